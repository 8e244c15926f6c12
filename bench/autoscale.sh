#!/usr/bin/env bash
# Autoscaling (docs/autoscaling.md): the seed's experiment in the simulator, every policy on both
# traces at targets 30-80 %, how long the simulation takes, and the reaction from a breach at a
# node's /metrics to the new replicas pushed on KEDA's gRPC stream (20 trials over 127.0.0.1,
# crates/muster-autoscaler/examples/reaction.rs). Prints JSON.
#
#   bench/autoscale.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root" && cargo build --release -p muster -p muster-autoscaler --examples --quiet) >&2
muster="${CARGO_TARGET_DIR:-$root/target}/release/muster"
started=$(date +%s.%N)
runs=$("$muster" autoscale simulate --json)
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
reaction=$("${CARGO_TARGET_DIR:-$root/target}/release/examples/reaction" | tail -n 1)
python3 - "$elapsed" "$runs" "$reaction" <<'PY'
import json, sys
elapsed, runs, reaction = float(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
at80 = {f'{r["trace"]} / {r["policy"]}': {k: r[k] for k in ("served_pct", "throttled", "mean_headroom_pct", "max_direction_changes_per_10_min", "changes")}
        for r in runs if r["target"] == 0.8}
print(json.dumps({
    "bench": "autoscale",
    "simulated_runs": len(runs),
    "simulated_minutes_total": sum(105 if r["trace"] == "bell curve" else 127 for r in runs),
    "wall_s_for_all_runs": round(elapsed, 3),
    "at_80_percent": at80,
    "reaction_breach_to_grpc_push": reaction,
    "runs": runs,
}, indent=2))
PY
