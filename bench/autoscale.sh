#!/usr/bin/env bash
# Autoscaling (docs/autoscaling.md). Prints JSON:
#  - the simulator: every policy on the four traces (the two load traces of Space Ape's DynamoDB
#    autoscaling study, a bell curve and a top-heavy curve; a step; a sawtooth) at targets 30-80 %
#    on DynamoDB, and Muster's policy against the same policy sizing from the level only, on
#    DynamoDB and on Kubernetes (replicas set again any second, as the live loop does): % served,
#    mean headroom, peak over-provisioning; and how long it takes;
#  - the reaction from a breach at a node's /metrics to new replicas as a cluster sees it: the
#    real run loop and gRPC scaler, KEDA and the HPA emulated (StreamIsActive pushes handled as
#    KEDA does, GetMetrics read on the HPA's 15 s sync, its default scale-up limits), 20 trials
#    side by side (~35 s; crates/muster-autoscaler/examples/reaction.rs).
#
#   bench/autoscale.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The autoscaler's two examples only: the simulator is the library `muster autoscale simulate`
# calls, with the same defaults, so the server need not be built.
(cd "$root" && cargo build --release -p muster-autoscaler --example simulate --example reaction --quiet) >&2
examples="${CARGO_TARGET_DIR:-$root/target}/release/examples"
started=$(date +%s.%N)
runs=$("$examples/simulate" --json)
elapsed=$(echo "$(date +%s.%N) - $started" | bc)
reaction=$("$examples/reaction" | tail -n 1)
python3 - "$elapsed" "$runs" "$reaction" <<'PY'
import json, sys
elapsed, runs, reaction = float(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
at80 = [r for r in runs if r["target"] == 0.8]
at80_table = {f'{r["trace"]} / {r["policy"]}': {k: r[k] for k in ("served_pct", "throttled", "mean_headroom_pct", "peak_over_provisioning", "max_direction_changes_per_10_min", "changes")}
        for r in at80 if r["platform"] == "dynamodb"}
trend = {}
for r in at80:
    if r["policy"] in ("level only", "muster"):
        trend.setdefault(f'{r["platform"]} / {r["trace"]}', {})[r["policy"]] = {
            k: r[k] for k in ("served_pct", "mean_headroom_pct", "peak_over_provisioning", "changes")}
print(json.dumps({
    "bench": "autoscale",
    "simulated_runs": len(runs),
    "simulated_minutes_total": round(sum(r["simulated_s"] for r in runs) / 60),
    "wall_s_for_all_runs": round(elapsed, 3),
    "at_80_percent_on_dynamodb": at80_table,
    "trend_against_level_at_80_percent": trend,
    "reaction_as_a_cluster_sees_it": reaction,
    "runs": runs,
}, indent=2))
PY
