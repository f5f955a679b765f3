#!/usr/bin/env bash
# Measures `reprise route` against its round-robin policy: for each policy, a fresh redis-server
# and two fresh replicas (1 thread each, --kv-cache-memory MEM, publishing KV events) on loopback,
# the router in front (following the events with the prefix policy), and `reprise bench WORKLOAD
# --url ROUTER`; prints the bench's table and the replicas' prefix-cache counters. Everything it
# starts listens on 127.0.0.1 and is stopped at the end.
# Usage: [BENCH_ARGS=--quick] scripts/bench_router.sh [multidoc|concurrent] [MEM (default 100MiB)] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-multidoc}
mem=${2:-100MiB}
seed=${3:-1}
bin=$PWD/build/reprise
work=$(mktemp -d)
model=$work/model.gguf
"$bin" make-model --shape 135m --type q8_0 -o "$model" >/dev/null 2>&1
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_listen() { for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return; sleep 0.2; done; echo "nothing on port $1" >&2; exit 1; }
for policy in prefix round-robin; do
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  replicas=()
  for i in 1 2; do
    port=$(free_port)
    "$bin" serve -m "$model" --port "$port" -t 1 --kv-cache-memory "$mem" \
      --kv-events-redis-url "redis://127.0.0.1:$redis_port" >"$work/replica$i.log" 2>&1 &
    pids+=($!)
    wait_listen "$port"
    replicas+=(--replica "http://127.0.0.1:$port")
  done
  events=()
  [ "$policy" = prefix ] && events=(--kv-redis-url "redis://127.0.0.1:$redis_port")
  router_port=$(free_port)
  "$bin" route -m "$model" --port "$router_port" --policy "$policy" "${replicas[@]}" "${events[@]}" \
    >"$work/router.log" 2>&1 &
  pids+=($!)
  wait_listen "$router_port"
  echo "== --policy $policy"
  start=$(date +%s)
  # shellcheck disable=SC2086 # BENCH_ARGS: more flags for the bench, e.g. --quick
  "$bin" bench "$workload" --url "http://127.0.0.1:$router_port" --seed "$seed" ${BENCH_ARGS:-} 2>/dev/null |
    sed -n '/^\[/,$p' | grep -v '^\[bench\]'
  echo "wall: $(($(date +%s) - start)) s"
  for i in 1 2; do
    port=${replicas[$((2 * i - 1))]##*:}
    curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^reprise:prefix_cache_(hits|queries)_total' | sed "s/^/replica $i: /"
  done
  stop
done
