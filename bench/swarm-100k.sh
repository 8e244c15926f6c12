#!/usr/bin/env bash
# 100,000 idle players from this one machine: $WORKERS remote workers (`swarm worker --listen`,
# each its own process under the 20,000-open-file limit) driven by one coordinator, against
# $NODES Muster nodes (one process holds ~19,000 sockets, so 100,000 need several; each node
# has its own SQLite database, and worker n plays against node n mod $NODES).
#
# Per run: failures, players held through the hold, the workers' RSS per held player (their
# resident memory during the hold less their baseline before any player, over the players
# held), the Muster nodes' RSS, the start skew and the coordinator's peak RSS. Prints JSON: every
# run and the medians.
#
# With CLUSTER=1 the nodes form one Muster cluster over a private nats-server (docs/cluster.md):
# heartbeats and every session's opening and ending are shared between them.
#
# Usage: bench/swarm-100k.sh   (env: PLAYERS=100000 NODES=6 WORKERS=6 RAMP_S=200 HOLD_S=60
#                               INTERVAL_S=30 RUNS=3 CLUSTER=0)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PLAYERS=${PLAYERS:-100000}
NODES=${NODES:-6}
WORKERS=${WORKERS:-6}
RAMP_S=${RAMP_S:-200}
HOLD_S=${HOLD_S:-60}
INTERVAL_S=${INTERVAL_S:-30}
RUNS=${RUNS:-3}
CLUSTER=${CLUSTER:-0}

build_release
work=$(mktemp -d /tmp/swarm-100k.XXXXXX)
PIDS=()
stop_all() {
  local pid
  stop_remote_workers
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
NATS_PID=""
trap 'stop_all; [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null; remove_work_dir "$work"' EXIT
export SWARM_WORKER_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
# Several nodes on one machine: no invite-link listener (its default port would be shared).
export MUSTER_LINKS__LISTEN=

if [ "$CLUSTER" = 1 ]; then
  command -v nats-server >/dev/null || { echo "CLUSTER=1 needs nats-server (scripts/test installs it)" >&2; exit 1; }
  nats_port=$(free_port)
  nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
  NATS_PID=$!
  export MUSTER_CLUSTER__NATS_URL="nats://127.0.0.1:$nats_port"
  sleep 0.5
fi
heartbeat_scenario "$work/scenario.toml" "$PLAYERS" "$RAMP_S" "$HOLD_S" "$INTERVAL_S"
for run in $(seq 1 "$RUNS"); do
  dir="$work/run-$run"
  mkdir -p "$dir"
  targets=() muster_pids=()
  for n in $(seq 1 "$NODES"); do
    port=$(free_port)
    [ "$CLUSTER" = 1 ] && export MUSTER_CLUSTER__NODE_NAME="node-$n"
    start_muster "$port" "$dir/muster-$n"
    PIDS+=("$MUSTER_PID") muster_pids+=("$MUSTER_PID")
    targets+=("http://127.0.0.1:$port")
    MUSTER_PID=""
  done
  start_remote_workers "$WORKERS" "$dir"
  # The nodes' memory in the middle of the hold.
  (
    sleep $((RAMP_S + HOLD_S / 2))
    for pid in "${muster_pids[@]}"; do rss_kb "$pid"; done >"$dir/muster-rss-kb"
    for t in "${targets[@]}"; do
      curl -s "$t/metrics" | awk '/^muster_cluster_nodes / {print $2}'
    done >"$dir/cluster-nodes"
  ) &
  sampler=$!
  "$swarm_bin" run "$work/scenario.toml" --target "$(IFS=,; echo "${targets[*]}")" \
    --workers-at "$WORKERS_AT" --progress never --out "$dir/report" >/dev/null || true
  wait "$sampler" || true
  stop_all
done

python3 - "$work" "$RUNS" "$RAMP_S" "$HOLD_S" "$PLAYERS" "$NODES" "$WORKERS" "$CLUSTER" <<'PY'
import json, statistics, sys
work, runs, ramp, hold, players, nodes, workers = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
cluster = sys.argv[8] == "1"
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report/report.json"))
    win = [row for row in r["timeseries"] if ramp + 10 <= row["t"] < ramp + hold - 2]
    held = min(row["ccu"] for row in win)
    rss_kb = statistics.median(row["workerRssKb"] for row in win)
    base_kb = sum(w["rssBaselineKb"] for w in r["workers"])
    muster_kb = [int(x) for x in open(f"{work}/run-{i}/muster-rss-kb").read().split()]
    out.append({
        "players": r["players"], "successful": r["successful"], "failed": r["failed"],
        "errors": r["errors"], "heldThroughHold": held, "workers": len(r["workers"]),
        "workerRssKb": rss_kb, "workerRssBaselineKb": base_kb,
        "workerBytesPerPlayer": round((rss_kb - base_kb) * 1024 / held) if held else None,
        "workerWholeRssBytesPerPlayer": round(rss_kb * 1024 / held) if held else None,
        "workerPeakRssKb": [w["rssPeakKb"] for w in r["workers"]],
        "musterRssKb": muster_kb,
        "musterBytesPerSocket": round(sum(muster_kb) * 1024 / held) if held else None,
        # Each node's count of live cluster nodes in the middle of the hold (empty: no cluster).
        "clusterNodesSeen": [int(float(x)) for x in open(f"{work}/run-{i}/cluster-nodes").read().split()],
        "startSkewMs": r["startSkewMs"], "coordinatorRssPeakKb": r["coordinatorRssPeakKb"],
        "authP99Ms": r["metrics"]["auth"]["percentile99"],
        "pingP99Ms": r["metrics"]["ping"]["percentile99"],
    })
med = lambda k: statistics.median(x[k] for x in out if x[k] is not None)
print(json.dumps({
    "bench": "swarm-100k", "players": players, "nodes": nodes, "workers": workers, "cluster": cluster,
    "median": {k: med(k) for k in ["heldThroughHold", "workerBytesPerPlayer", "workerWholeRssBytesPerPlayer", "musterBytesPerSocket", "startSkewMs", "coordinatorRssPeakKb", "authP99Ms", "pingP99Ms"]},
    "failedTotal": sum(x["failed"] for x in out),
    "runs": out,
}, indent=2))
PY
