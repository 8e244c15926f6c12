#!/usr/bin/env bash
# swarm's coordinator driving a fleet of remote workers: $WORKERS `swarm worker --listen`
# processes on this machine (each its own process, talking TCP to the coordinator exactly as
# across machines), $PLAYERS idle heartbeat players spread over them against one Muster.
#
# Per run: the start barrier's skew (how late the latest worker woke for the common start
# instant, less the earliest) and the clocks' uncertainty, the coordinator's peak RSS, and the
# merge check: the report's whole-run percentiles (each worker's run histogram, merged) against
# the same samples merged the other way (every worker's every second: `swarm window` over the
# whole run), which must agree to within the histograms' 1 % precision with equal counts.
# Prints JSON: every run and the medians.
#
# Usage: bench/swarm-fleet.sh   (env: WORKERS=16 PLAYERS=3200 RAMP_S=20 HOLD_S=20 INTERVAL_S=1 RUNS=3)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
WORKERS=${WORKERS:-16}
PLAYERS=${PLAYERS:-3200}
RAMP_S=${RAMP_S:-20}
HOLD_S=${HOLD_S:-20}
INTERVAL_S=${INTERVAL_S:-1}
RUNS=${RUNS:-3}

build_release
work=$(mktemp -d /tmp/swarm-fleet.XXXXXX)
trap 'stop_remote_workers; stop_muster; remove_work_dir "$work"' EXIT
export SWARM_WORKER_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

heartbeat_scenario "$work/scenario.toml" "$PLAYERS" "$RAMP_S" "$HOLD_S" "$INTERVAL_S"
for run in $(seq 1 "$RUNS"); do
  mkdir -p "$work/run-$run"
  port=$(free_port)
  start_muster "$port" "$work/muster-$run"
  start_remote_workers "$WORKERS" "$work/run-$run"
  "$swarm_bin" run "$work/scenario.toml" --target "http://127.0.0.1:$port" \
    --workers-at "$WORKERS_AT" --progress never --out "$work/run-$run/report" >/dev/null || true
  "$swarm_bin" window "$work/run-$run/report/report.json" --from-s 0 --to-s 100000 \
    >"$work/run-$run/window.json"
  stop_remote_workers
  stop_muster
done

python3 - "$work" "$RUNS" "$WORKERS" "$PLAYERS" <<'PY'
import json, statistics, sys
work, runs, workers, players = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report/report.json"))
    w = json.load(open(f"{work}/run-{i}/window.json"))
    merge = {}
    for name in ("auth", "connect", "ping"):
        run_m, win_m = r["metrics"][name], w["metrics"][name]
        pairs = {"p50": (run_m["percentile50"], win_m["p50"]), "p99": (run_m["percentile99"], win_m["p99"])}
        merge[name] = {
            "countsEqual": run_m["count"] == win_m["count"],
            "count": run_m["count"],
            # Relative difference of the two merges' percentiles.
            **{k: round(abs(a - b) / a, 5) if a else 0.0 for k, (a, b) in pairs.items()},
        }
    lates = [x["startLateMs"] for x in r["workers"] if x.get("startLateMs") is not None]
    out.append({
        "players": r["players"], "successful": r["successful"], "failed": r["failed"],
        "errors": r["errors"], "workers": len(r["workers"]),
        "workersReported": sum(1 for x in r["workers"] if x["reported"]),
        "startSkewMs": r["startSkewMs"], "clockUncertaintyMs": r["clockUncertaintyMs"],
        "startLateMsMax": max(lates), "coordinatorRssPeakKb": r["coordinatorRssPeakKb"],
        "mergeRelativeDifference": merge,
        "maxMergeDifference": max(v for m in merge.values() for k, v in m.items() if k in ("p50", "p99")),
        "countsEqual": all(m["countsEqual"] for m in merge.values()),
        "pingP99Ms": r["metrics"]["ping"]["percentile99"],
    })
med = lambda k: statistics.median(x[k] for x in out)
print(json.dumps({
    "bench": "swarm-fleet", "workers": workers, "players": players,
    "median": {k: med(k) for k in ["startSkewMs", "clockUncertaintyMs", "startLateMsMax", "coordinatorRssPeakKb", "maxMergeDifference", "pingP99Ms"]},
    "failedTotal": sum(x["failed"] for x in out),
    "countsEqualInEveryRun": all(x["countsEqual"] for x in out),
    "runs": out,
}, indent=2))
PY
