#!/usr/bin/env bash
# Efficiency of the load generator itself: idle heartbeat players per worker-process CPU-second
# (= players one core drives) and per GiB of worker memory, with bytes per idle player.
#
# Each run starts a fresh muster on 127.0.0.1, runs ONE swarm worker with $PLAYERS players
# (linear ramp over $RAMP_S s, then a $HOLD_S s hold, a ping every $INTERVAL_S s), and measures
# the worker during the hold, past the ramp (auth done), from the report's per-second series
# (workerCpuS, workerRssKb read from /proc by the worker). Prints JSON: every run and the medians.
#
# Usage: bench/swarm-efficiency.sh   (env: PLAYERS=18000 RAMP_S=60 HOLD_S=60 INTERVAL_S=10 RUNS=3)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PLAYERS=${PLAYERS:-18000}
RAMP_S=${RAMP_S:-60}
HOLD_S=${HOLD_S:-60}
INTERVAL_S=${INTERVAL_S:-10}
RUNS=${RUNS:-3}

build_release
work=$(mktemp -d /tmp/swarm-efficiency.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT

heartbeat_scenario "$work/scenario.toml" "$PLAYERS" "$RAMP_S" "$HOLD_S" "$INTERVAL_S"
for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  start_muster "$port" "$work/muster-$run"
  "$swarm_bin" run "$work/scenario.toml" --target "http://127.0.0.1:$port" --workers 1 \
    --progress never --out "$work/run-$run" >/dev/null || true
  stop_muster
done

python3 - "$work" "$RUNS" "$RAMP_S" "$HOLD_S" "$PLAYERS" "$INTERVAL_S" <<'PY'
import json, statistics, sys
work, runs, ramp, hold, players, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report.json"))
    # The hold window, past the ramp and its last auths, before the end-of-run closes.
    win = [row for row in r["timeseries"] if ramp + 10 <= row["t"] < ramp + hold - 2]
    held = min(row["ccu"] for row in win)
    cpu_per_s = statistics.mean(row["workerCpuS"] for row in win)
    rss_kb = statistics.median(row["workerRssKb"] for row in win)
    base_kb = r["workers"][0]["rssBaselineKb"]
    out.append({
        "players": r["players"], "successful": r["successful"], "failed": r["failed"],
        "errors": r["errors"], "heldDuringWindow": held, "windowSeconds": len(win),
        "workerCpuSecondsPerSecond": round(cpu_per_s, 4),
        "idlePlayersPerWorkerCpuSecond": round(held / cpu_per_s) if cpu_per_s > 0 else None,
        "workerRssKb": rss_kb, "workerRssBaselineKb": base_kb,
        "bytesPerIdlePlayer": round((rss_kb - base_kb) * 1024 / held),
        "idlePlayersPerGiB": round(held / (rss_kb * 1024 / 2**30)),
        "pingP99Ms": r["metrics"]["ping"]["percentile99"],
        "clientLagP99Ms": r["metrics"]["client_lag"]["percentile99"],
        "wholeRunWorkerCpuS": r["workers"][0]["cpuS"],
    })
med = lambda k: statistics.median(x[k] for x in out if x[k] is not None)
print(json.dumps({
    "bench": "swarm-efficiency", "playersPerWorker": players, "pingIntervalS": interval,
    "median": {k: med(k) for k in ["idlePlayersPerWorkerCpuSecond", "idlePlayersPerGiB", "bytesPerIdlePlayer", "workerCpuSecondsPerSecond", "pingP99Ms"]},
    "failedTotal": sum(x["failed"] for x in out),
    "runs": out,
}, indent=2))
PY
