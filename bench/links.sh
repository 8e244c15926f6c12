#!/usr/bin/env bash
# Invite links (docs/links.md): redirects per second over many stored links, and durable creates
# per second, with wrk (keep-alive) as the load generator on the same two cores. Prints JSON.
#
#   bench/links.sh [STORED_LINKS=1000000] [RUNS=3]
#
# Environment: DURATION (s per run, 10), CONNS (wrk's keep-alive connections for redirects, 16),
# CREATE_CONNS (for creates, 4: about 10,000-20,000 creates/s; 16 saturates the writer), HOT (distinct
# codes visited, 10000: a hot set that fits the cache), WORKERS (Muster's worker_threads values to
# run, "0 1": one per core, then one — on two cores shared with wrk, one worker is not preempted
# by it), REFERENCE=1 also runs wrk against a static answer of the same HTTP stack (the links
# service's precomputed assetlinks.json) in the same sitting, for the ratio. Needs wrk (Debian's
# package). Only 127.0.0.1 is loaded.
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"

stored=${1:-1000000}
runs=${2:-3}
duration=${DURATION:-10}
conns=${CONNS:-16}
create_conns=${CREATE_CONNS:-4}
workers_list=${WORKERS:-0 1}
hot=${HOT:-10000}
command -v wrk >/dev/null || { echo "links.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }

build_release
work=$(mktemp -d /tmp/muster-links-bench.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
data="$work/data"
mkdir -p "$data"
"$muster_bin" migrate --data-dir "$data" --log warn >/dev/null
seed_started=$(date +%s.%N)
python3 "$root/bench/links/seed.py" "$data/muster.sqlite3" "$stored" "$work/codes" "$hot"
seed_s=$(echo "$(date +%s.%N) - $seed_started" | bc)

api_key=bench-key
wrk_run() { # wrk_run SCRIPT|- PATH [CONNECTIONS]: one run against $base, its figures as JSON
  local script=$1 path=$2 args=(-t1 -c"${3:-$conns}" -d"${duration}s" --latency)
  [ "$script" != - ] && args+=(-s "$script")
  CODES="$work/codes" API_KEY=$api_key wrk "${args[@]}" "$base$path" | python3 "$root/bench/links/wrk_json.py"
}

# One Muster per worker-thread count (0: one per core). Each line of $work/results is one
# configuration's figures.
for workers in $workers_list; do
  port=$(free_port)
  links_port=$(free_port)
  MUSTER_WORKER_THREADS=$workers \
  MUSTER_LINKS__LISTEN="127.0.0.1:$links_port" MUSTER_GRPC__LISTEN= MUSTER_LINKS__API_KEY=$api_key \
  MUSTER_LINKS__REQUESTS_PER_IP_PER_SEC=0 \
  MUSTER_LINKS__ANDROID_PACKAGE=com.example.bench \
  MUSTER_LINKS__ANDROID_SHA256_FINGERPRINTS="[\"$(python3 -c 'print(":".join(["AB"] * 32))')\"]" \
    start_muster "$port" "$data"
  base="http://127.0.0.1:$links_port"
  # Warm the cache with the hot codes, then measure.
  CODES="$work/codes" wrk -t1 -c8 -d2s -s "$root/bench/links/redirect.lua" "$base/" >/dev/null
  redirect_runs=() reference_runs=() create_runs=()
  for i in $(seq 1 "$runs"); do
    redirect_runs+=("$(wrk_run "$root/bench/links/redirect.lua" /)")
    if [ "${REFERENCE:-0}" = 1 ]; then
      # A static answer of the same stack: the assetlinks.json built once at start.
      reference_runs+=("$(wrk_run - /.well-known/assetlinks.json)")
    fi
  done
  rss_after_redirects=$(rss_kb "$MUSTER_PID")
  for i in $(seq 1 "$runs"); do
    create_runs+=("$(wrk_run "$root/bench/links/create.lua" / "$create_conns")")
  done
  rss_end=$(rss_kb "$MUSTER_PID")
  stop_muster
  python3 -c 'import json, sys
parse = lambda block: [json.loads(l) for l in block.splitlines() if l.strip()]
print(json.dumps({"workers": int(sys.argv[1]), "rss_kb_after_redirects": int(sys.argv[2]), "rss_kb_end": int(sys.argv[3]),
                  "redirects": parse(sys.argv[4]), "reference": parse(sys.argv[5]), "creates": parse(sys.argv[6])}))' \
    "$workers" "$rss_after_redirects" "$rss_end" "$(printf '%s\n' "${redirect_runs[@]}")" \
    "$(printf '%s\n' "${reference_runs[@]:-}")" "$(printf '%s\n' "${create_runs[@]}")" >>"$work/results"
done
db_bytes=$(du -sb "$data" | cut -f1)

python3 - "$stored" "$seed_s" "$db_bytes" "$conns" "$duration" "$hot" "$work/results" "$create_conns" <<'PY'
import json, statistics, sys
stored, seed_s, db_bytes, conns, duration, hot, results, create_conns = sys.argv[1:9]
def summary(runs):
    if not runs:
        return None
    return {
        "runs": runs,
        "median_per_s": statistics.median(r["rps"] for r in runs),
        "median_p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "median_p99_ms": statistics.median(r["p99_ms"] for r in runs),
    }
configurations = []
for line in open(results):
    r = json.loads(line)
    c = {
        "worker_threads": r["workers"] or "one per core",
        "redirects": summary(r["redirects"]),
        "creates": summary(r["creates"]),
        "muster_rss_mb_after_redirects": round(r["rss_kb_after_redirects"] / 1024, 1),
        "muster_rss_mb_end": round(r["rss_kb_end"] / 1024, 1),
    }
    if r["reference"]:
        c["static_reference"] = summary(r["reference"])
        c["redirects_to_reference"] = round(c["redirects"]["median_per_s"] / c["static_reference"]["median_per_s"], 3)
    configurations.append(c)
print(json.dumps({
    "bench": "links",
    "stored_links": int(stored),
    "seed_s": round(float(seed_s), 1),
    "wrk": {"threads": 1, "connections": int(conns), "create_connections": int(create_conns), "duration_s": int(duration), "hot_codes": int(hot)},
    "database_mb_end": round(int(db_bytes) / 1e6, 1),
    "configurations": configurations,
}, indent=2))
PY
