#!/usr/bin/env bash
# Reprise beside llama.cpp on one model file and the same threads: first the kernels
# (llama-bench's pp512/tg64 beside `reprise bench prefill|decode`, in process), then the
# `reprise bench --url` workloads, the same requests over HTTP to llama.cpp's llama-server and to
# `reprise serve`, one server at a time. llama.cpp is Debian unstable's package (bookworm has
# none): apt-get downloads it from the Debian mirror this machine's own apt sources name, with a
# private apt configuration, and it is unpacked under the work folder with its own C library, so
# nothing on the system changes. Not part of CI (it takes about 20 minutes on 2 cores).
#
#   scripts/compare_llama_cpp.sh MODEL.gguf [THREADS] [WORK_DIR]
#   QUICK=1 scripts/compare_llama_cpp.sh ...   # small sizes, a few minutes: checks the set-up
#   KERNELS_ONLY=1 scripts/compare_llama_cpp.sh ...   # the kernel comparison only
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/compare_llama_cpp.sh MODEL.gguf [THREADS] [WORK_DIR]}
threads=${2:-2}
work=${3:-/tmp/reprise-vs-llama-cpp}
quick=()
[[ "${QUICK:-0}" == 1 ]] && quick=(--quick)
reprise=build/reprise
[[ -x "$reprise" ]] || { echo "build Reprise first (scripts/setup.sh)" >&2; exit 1; }

# The URI of the first Debian archive (a release suite, component main) among this machine's apt
# sources, in one-line (.list) or deb822 (.sources) form; empty when there is none.
debian_mirror() {
  python3 - /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources <<'PY'
import re, sys
releases = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
            "oldstable", "stable", "testing", "unstable"}
entries = []  # (types, uris, suites, components)
for path in sys.argv[1:]:
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        continue
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            fields, key = {}, None
            for line in stanza.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            entries.append([fields.get(k, "").split() for k in ("types", "uris", "suites", "components")])
    else:
        for line in text.splitlines():
            match = re.match(r"\s*(deb)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*([^#]*)", line)
            if match:
                entries.append([[match[1]], [match[2]], [match[3]], match[4].split()])
for types, uris, suites, components in entries:
    if "deb" in types and uris and "main" in components and releases & set(suites):
        print(uris[0].rstrip("/"))
        break
PY
}

# --- llama.cpp from Debian unstable, unpacked privately -----------------------------------------
root="$work/root"
lib="$root/usr/lib/x86_64-linux-gnu"
if [[ ! -x "$root/usr/bin/llama-server" ]]; then
  mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs" "$root"
  mirror=$(debian_mirror)
  [[ -n "$mirror" ]] || { echo "no Debian mirror in /etc/apt/sources.list or sources.list.d" >&2; exit 1; }
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
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
loader=("$lib/ld-linux-x86-64.so.2" --library-path "$lib:$lib/llama")
llama_server=("${loader[@]}" "$root/usr/bin/llama-server")
llama_bench=("${loader[@]}" "$root/usr/bin/llama-bench")

# --- Kernels: llama-bench beside `reprise bench prefill|decode`, in process ----------------------
if [[ "${QUICK:-0}" == 1 ]]; then pp=64; tg=16; reps=1; else pp=512; tg=64; reps=3; fi
"${llama_bench[@]}" -m "$model" -t "$threads" -p "$pp" -n "$tg" -r "$reps" -o json \
  > "$work/llama-bench.json" 2> "$work/llama-bench.log"
for workload in prefill decode; do
  "$reprise" --log-level warn bench "$workload" -m "$model" -t "$threads" --repeat "$reps" \
    "${quick[@]}" --json "$work/reprise-$workload.json" > "$work/reprise-$workload.txt"
done
python3 - "$work" "$pp" "$tg" <<'EOF'
import json, sys
work, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llama = {}
for test in json.load(open(f"{work}/llama-bench.json")):
    llama["tg" if test["n_gen"] > 0 else "pp"] = test["avg_ts"]
def figure(workload, prefix):
    # The tok/s figure at the prompt length nearest llama-bench's pp (prefill_512_tok_s,
    # decode_512_tok_s; not decode_512_read_share, a share of the read peak).
    figures = json.load(open(f"{work}/reprise-{workload}.json"))["workloads"][0]["figures"]
    keys = [k for k in figures
            if k.startswith(prefix) and k.split("_")[1].isdigit() and k.endswith("_tok_s")]
    return figures[min(keys, key=lambda k: abs(int(k.split("_")[1]) - pp))] if keys else None
print(f"{'kernels (tok/s)':<50}{'llama.cpp':>10}{'reprise':>10}  reprise / llama.cpp")
for test, ours, theirs in ((f"pp{pp} vs", figure("prefill", "prefill_"), llama.get("pp")),
                           (f"tg{tg} vs", figure("decode", "decode_"), llama.get("tg"))):
    label = f"{test} {ours['label'] if ours else '-'}"
    if ours and theirs:
        print(f"{label[:49]:<50}{theirs:>10.1f}{ours['value']:>10.1f}  {ours['value'] / theirs:.2f}")
    else:
        print(f"{label[:49]:<50}{'-':>10}{'-':>10}  (missing)")
EOF
echo
[[ "${KERNELS_ONLY:-0}" == 1 ]] && exit 0

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
