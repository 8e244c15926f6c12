#!/usr/bin/env bash
# 18,000+ concurrent sockets held against ONE muster process for a 60 s hold, with zero failures:
# scenarios/connect-and-heartbeat.toml (Nakama's 2,000,000-player idle-socket test, scaled), 2
# swarm workers on 127.0.0.2 and 127.0.0.3. Prints JSON: players, failures by kind, seconds at full
# CCU, latency percentiles, and muster's peak RSS. Each of $RUNS runs uses a fresh muster and
# database.
#
# Usage: bench/swarm-hold.sh   (env: RUNS=1 WORKERS=2 SCENARIO=scenarios/connect-and-heartbeat.toml)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RUNS=${RUNS:-1}
WORKERS=${WORKERS:-2}
SCENARIO=${SCENARIO:-$root/scenarios/connect-and-heartbeat.toml}

build_release
work=$(mktemp -d /tmp/swarm-hold.XXXXXX)
SAMPLER_PID=""
trap '[ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null; stop_muster; remove_work_dir "$work"' EXIT

for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  start_muster "$port" "$work/muster-$run"
  # Sample muster's RSS once a second (bounded: at most 1 hour).
  ( for _ in $(seq 1 3600); do rss_kb "$MUSTER_PID"; sleep 1; done ) >"$work/muster-rss-$run" 2>/dev/null &
  SAMPLER_PID=$!
  "$swarm_bin" run "$SCENARIO" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
    --progress never --out "$work/run-$run" >/dev/null || true
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""
  stop_muster
done

python3 - "$work" "$RUNS" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report.json"))
    rss = [int(x) for x in open(f"{work}/muster-rss-{i}").read().split() if x.strip().isdigit()]
    full = [row for row in r["timeseries"] if row["ccu"] >= r["players"]]
    m = r["metrics"]
    out.append({
        "status": r["status"], "players": r["players"], "successful": r["successful"],
        "failed": r["failed"], "errors": r["errors"], "peakCcu": r["peakCcu"],
        "secondsAtFullCcu": len(full),
        "closesUnanswered": r["counters"].get("closesUnanswered", 0),
        "authP99Ms": m["auth"]["percentile99"], "authP9999Ms": m["auth"]["percentile99point99"],
        "connectP99Ms": m["connect"]["percentile99"],
        "pingCount": m["ping"]["count"], "pingP99Ms": m["ping"]["percentile99"],
        "pingP9999Ms": m["ping"]["percentile99point99"], "pingMaxMs": m["ping"]["max"],
        "musterPeakRssKb": max(rss) if rss else None,
        "musterBytesPerSocket": round(max(rss) * 1024 / r["peakCcu"]) if rss and r["peakCcu"] else None,
        "workerPeakRssKb": [w["rssPeakKb"] for w in r["workers"]],
        "workerCpuS": [w["cpuS"] for w in r["workers"]],
    })
print(json.dumps({
    "bench": "swarm-hold",
    "median": {k: statistics.median(x[k] for x in out) for k in ["peakCcu", "secondsAtFullCcu", "failed", "pingP99Ms", "authP99Ms"]},
    "zeroFailures": all(x["failed"] == 0 for x in out),
    "runs": out,
}, indent=2))
PY
