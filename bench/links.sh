#!/usr/bin/env bash
# Invite links (docs/links.md): redirects per second over many stored links, and durable creates
# per second, with wrk (keep-alive) as the load generator on the same two cores. Prints JSON.
#
#   bench/links.sh [STORED_LINKS=1000000] [RUNS=3]
#
# Environment: DURATION (s per run, 10), CONNS (wrk connections, 64), HOT (distinct codes
# visited, 10000: a hot set that fits the cache), REFERENCE=1 also runs wrk against a static
# answer of the same HTTP stack (the links service's precomputed assetlinks.json) in the same
# sitting, for the ratio. Needs wrk (Debian's package). Only 127.0.0.1 is loaded.
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"

stored=${1:-1000000}
runs=${2:-3}
duration=${DURATION:-10}
conns=${CONNS:-64}
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

port=$(free_port)
links_port=$(free_port)
api_key=bench-key
MUSTER_LINKS__LISTEN="127.0.0.1:$links_port" MUSTER_LINKS__API_KEY=$api_key \
MUSTER_LINKS__REQUESTS_PER_IP_PER_SEC=0 \
  start_muster "$port" "$data"
base="http://127.0.0.1:$links_port"

wrk_run() { # wrk_run SCRIPT|- PATH: one run, its figures as JSON
  local script=$1 path=$2 args=(-t1 -c"$conns" -d"${duration}s" --latency)
  [ "$script" != - ] && args+=(-s "$script")
  CODES="$work/codes" API_KEY=$api_key wrk "${args[@]}" "$base$path" | python3 "$root/bench/links/wrk_json.py"
}

# Warm the cache with every hot code once, then measure.
CODES="$work/codes" wrk -t1 -c8 -d2s -s "$root/bench/links/redirect.lua" "$base/" >/dev/null
redirect_runs=()
reference_runs=()
create_runs=()
for i in $(seq 1 "$runs"); do
  redirect_runs+=("$(wrk_run "$root/bench/links/redirect.lua" /)")
  if [ "${REFERENCE:-0}" = 1 ]; then
    # A static answer of the same stack. assetlinks.json needs an Android app configured; the
    # 404 it answers otherwise is a static answer just the same (wrk counts it as an error).
    reference_runs+=("$(wrk_run - /.well-known/assetlinks.json)")
  fi
done
rss_after_redirects=$(rss_kb "$MUSTER_PID")
for i in $(seq 1 "$runs"); do
  create_runs+=("$(wrk_run "$root/bench/links/create.lua" /)")
done
rss_end=$(rss_kb "$MUSTER_PID")
db_bytes=$(du -sb "$data" | cut -f1)

python3 - "$stored" "$seed_s" "$rss_after_redirects" "$rss_end" "$db_bytes" "$conns" "$duration" "$hot" \
  "$(printf '%s\n' "${redirect_runs[@]}")" "$(printf '%s\n' "${reference_runs[@]:-}")" \
  "$(printf '%s\n' "${create_runs[@]}")" <<'PY'
import json, statistics, sys
stored, seed_s, rss_r, rss_e, db_bytes, conns, duration, hot = sys.argv[1:9]
parse = lambda block: [json.loads(l) for l in block.splitlines() if l.strip()]
redirects, reference, creates = (parse(b) for b in sys.argv[9:12])
def summary(runs):
    if not runs:
        return None
    return {
        "runs": runs,
        "median_per_s": statistics.median(r["rps"] for r in runs),
        "median_p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "median_p99_ms": statistics.median(r["p99_ms"] for r in runs),
    }
out = {
    "bench": "links",
    "stored_links": int(stored),
    "seed_s": round(float(seed_s), 1),
    "wrk": {"threads": 1, "connections": int(conns), "duration_s": int(duration), "hot_codes": int(hot)},
    "redirects": summary(redirects),
    "creates": summary(creates),
    "muster_rss_mb_after_redirects": round(int(rss_r) / 1024, 1),
    "muster_rss_mb_end": round(int(rss_e) / 1024, 1),
    "database_mb": round(int(db_bytes) / 1e6, 1),
}
if reference:
    out["static_reference"] = summary(reference)
    out["redirects_to_reference"] = round(out["redirects"]["median_per_s"] / out["static_reference"]["median_per_s"], 3)
print(json.dumps(out, indent=2))
PY
