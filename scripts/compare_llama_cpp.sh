#!/usr/bin/env bash
# The `reprise bench --url` comparison of issue 6: the same requests, over HTTP, to llama.cpp's
# llama-server and to `reprise serve`, on one model file and the same threads, one server at a
# time. llama.cpp is Debian unstable's package (bookworm has none): apt-get downloads it with a
# private apt configuration and it is unpacked under the work folder with its own C library, so
# nothing on the system changes. Not part of CI (it takes about 20 minutes on 2 cores).
#
#   scripts/compare_llama_cpp.sh MODEL.gguf [THREADS] [WORK_DIR]
#   QUICK=1 scripts/compare_llama_cpp.sh ...   # small sizes, a minute: checks the set-up
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/compare_llama_cpp.sh MODEL.gguf [THREADS] [WORK_DIR]}
threads=${2:-2}
work=${3:-/tmp/reprise-vs-llama-cpp}
quick=()
[[ "${QUICK:-0}" == 1 ]] && quick=(--quick)
reprise=build/reprise
[[ -x "$reprise" ]] || { echo "build Reprise first (scripts/setup.sh)" >&2; exit 1; }

# --- llama.cpp from Debian unstable, unpacked privately -----------------------------------------
root="$work/root"
lib="$root/usr/lib/x86_64-linux-gnu"
if [[ ! -x "$root/usr/bin/llama-server" ]]; then
  mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs" "$root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
    > "$work/apt/sources.list"
  apt_options=(-q -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
               -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
               -o Dir::State::status=/dev/null)
  apt-get "${apt_options[@]}" update
  # llama-server and what it links, the C and C++ runtimes included (unstable's are newer).
  (cd "$work/debs" && apt-get "${apt_options[@]}" download llama.cpp-tools libllama0 libggml0 \
     libc6 libstdc++6 libgcc-s1 libgomp1 libssl3t64 zlib1g)
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  # ggml looks for its CPU backends next to the running executable, which is the loader here.
  ln -sf "$lib"/ggml/backends0/*.so "$lib"/
fi
llama_server=("$lib/ld-linux-x86-64.so.2" --library-path "$lib:$lib/llama" "$root/usr/bin/llama-server")

server_pid=""
stop_server() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=""; }
trap stop_server EXIT
wait_healthy() {
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0
    sleep 1
  done
  echo "the server on port $1 did not become healthy" >&2
  return 1
}
run_workloads() {  # name port workloads...
  local name=$1 port=$2
  shift 2
  for workload in "$@"; do
    "$reprise" --log-level warn bench "$workload" --url "http://127.0.0.1:$port" -m "$model" \
      --repeat 3 "${quick[@]}" --json "$work/$name-$workload.json" > "$work/$name-$workload.txt"
  done
}

# One request at a time (one llama.cpp slot), then 16 clients (16 slots sharing one KV cache).
single=(prefill decode doc chat multidoc)
"${llama_server[@]}" -m "$model" --port 8191 -t "$threads" -c 16384 -np 1 > "$work/llama-1.log" 2>&1 &
server_pid=$!
wait_healthy 8191 && run_workloads llama.cpp 8191 "${single[@]}"
stop_server
"${llama_server[@]}" -m "$model" --port 8191 -t "$threads" -c 40960 -np 16 -kvu > "$work/llama-16.log" 2>&1 &
server_pid=$!
wait_healthy 8191 && run_workloads llama.cpp 8191 concurrent
stop_server

"$reprise" --log-level warn serve -m "$model" --port 8192 --threads "$threads" > "$work/reprise.log" 2>&1 &
server_pid=$!
wait_healthy 8192 && run_workloads reprise 8192 "${single[@]}" concurrent
stop_server

# Every figure of both, side by side (value and unit), from the JSON reports.
python3 - "$work" "${single[@]}" concurrent <<'EOF'
import json, sys
work, workloads = sys.argv[1], sys.argv[2:]
print(f"{'workload':<11}{'figure':<44}{'llama.cpp':>12}{'reprise':>12}  unit   reprise / llama.cpp")
for workload in workloads:
    def figures(name):
        with open(f"{work}/{name}-{workload}.json") as f:
            report = json.load(f)
        return {key: fig for w in report["workloads"] for key, fig in w["figures"].items()}
    llama, ours = figures("llama.cpp"), figures("reprise")
    for key, fig in ours.items():
        if key not in llama:
            continue
        a, b = llama[key]["value"], fig["value"]
        ratio = f"{b / a:.2f}" if a else "-"
        print(f"{workload:<11}{fig['label'][:43]:<44}{a:>12.4g}{b:>12.4g}  {fig['unit']:<6} {ratio}")
EOF
