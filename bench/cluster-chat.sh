#!/usr/bin/env bash
# Chat across a cluster (docs/cluster.md) against one node, in one sitting: bench/chat.sh's sweep
# (10,000 sockets in 2,000 rooms of 5, send rate raised level by level until delivery p99 passes
# P99_LIMIT_MS) against ONE node, then against NODES=3 clustered nodes (every room has members on
# every node), RUNS times alternating. Prints JSON: each side's best delivered/s within the limit
# (median over runs) and the ratio cluster / one node. Same env as bench/chat.sh.
#
#   bench/cluster-chat.sh        # RUNS=1 NODES=3 LEVELS="0.25 0.5 0.75 1 1.5 2 3"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-1}
CLUSTER_NODES=${NODES:-3}
export LEVELS=${LEVELS:-"0.25 0.5 0.75 1 1.5 2 3"}
work=$(mktemp -d /tmp/cluster-chat.XXXXXX)
trap 'rm -rf "$work"' EXIT
for run in $(seq 1 "$RUNS"); do
  NODES=1 RUNS=1 "$here/chat.sh" >"$work/one-$run.json"
  NODES=$CLUSTER_NODES RUNS=1 "$here/chat.sh" >"$work/cluster-$run.json"
done
python3 - "$work" "$RUNS" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
def side(kind):
    rows = [json.load(open(f"{work}/{kind}-{r}.json")) for r in range(1, runs + 1)]
    bests = [r["runs"][0]["best"] for r in rows]
    delivered = [b["deliveredPerS"] if b else 0 for b in bests]
    return {
        "nodes": rows[0]["nodes"],
        "bestDeliveredPerS": statistics.median(delivered),
        "perRun": [
            {k: b.get(k) for k in ["ratePerSocket", "deliveredPerS", "deliveryP50Ms", "deliveryP99Ms",
                                   "musterPeakRssKb", "musterCpuS", "natsCpuS", "deliveredPerMusterCpuS"]}
            if b else None
            for b in bests
        ],
    }
one, cluster = side("one"), side("cluster")
print(json.dumps({
    "bench": "cluster-chat",
    "p99LimitMs": json.load(open(f"{work}/one-1.json"))["p99LimitMs"],
    "oneNode": one,
    "cluster": cluster,
    "ratio": round(cluster["bestDeliveredPerS"] / one["bestDeliveredPerS"], 3) if one["bestDeliveredPerS"] else None,
}, indent=2))
PY
