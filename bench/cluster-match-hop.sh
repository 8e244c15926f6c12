#!/usr/bin/env bash
# What a cluster adds to a match message: echo round trips between two players of one relayed
# match, both on the match's node ("local") or the second on another node ("cross": each round
# trip crosses NATS twice, once each way). Two Muster nodes (release build) and a private
# nats-server on 127.0.0.1; RUNS alternating runs of ROUNDS round trips each; prints JSON with
# the medians over runs of each run's p50/p99, and the p99 added per hop, (cross − local) / 2.
#
#   bench/cluster-match-hop.sh            # RUNS=5 ROUNDS=2000
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
RUNS=${RUNS:-5}
ROUNDS=${ROUNDS:-2000}
command -v nats-server >/dev/null || { echo "needs nats-server (scripts/test installs it)" >&2; exit 1; }
[ -d "$root/clients/js-acceptance/node_modules/ws" ] ||
  (cd "$root/clients/js-acceptance" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
build_release
work=$(mktemp -d /tmp/muster-hop.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  remove_work_dir "$work"
}
trap cleanup EXIT
nats_port=$(free_port)
nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
PIDS+=($!)
export MUSTER_CLUSTER__NATS_URL="nats://127.0.0.1:$nats_port"
export MUSTER_LINKS__LISTEN=
# One message per round trip each way, as fast as they come back: past a player's usual rate.
export MUSTER_MATCHES__MAX_INPUTS_PER_SEC=100000 MUSTER_MATCHES__INPUT_BURST=1000
sleep 0.3
urls=()
for name in a b; do
  port=$(free_port)
  MUSTER_CLUSTER__NODE_NAME=$name start_muster "$port" "$work/$name"
  PIDS+=("$MUSTER_PID")
  MUSTER_PID=""
  urls+=("http://127.0.0.1:$port")
done
for url in "${urls[@]}"; do
  for i in $(seq 1 100); do
    [ "$(curl -s "$url/metrics" | awk '/^muster_cluster_nodes / {print $2}')" = 2 ] && break
    sleep 0.1
  done
done
for run in $(seq 1 "$RUNS"); do
  node "$here/cluster/match-hop.mjs" "${urls[0]}" "${urls[0]}" "$ROUNDS" >"$work/local-$run.json"
  node "$here/cluster/match-hop.mjs" "${urls[0]}" "${urls[1]}" "$ROUNDS" >"$work/cross-$run.json"
done
python3 - "$work" "$RUNS" "$ROUNDS" <<'PY'
import json, statistics, sys
work, runs, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(kind):
    return [json.load(open(f"{work}/{kind}-{r}.json")) for r in range(1, runs + 1)]
local, cross = load("local"), load("cross")
med = lambda rows, key: statistics.median(r[key] for r in rows)
out = {
    "bench": "cluster-match-hop",
    "runs": runs,
    "roundsPerRun": rounds,
    "local": {"p50Us": med(local, "p50Us"), "p99Us": med(local, "p99Us")},
    "cross": {"p50Us": med(cross, "p50Us"), "p99Us": med(cross, "p99Us")},
    "perRun": {"local": local, "cross": cross},
}
out["addedPerHopP50Us"] = (out["cross"]["p50Us"] - out["local"]["p50Us"]) / 2
out["addedPerHopP99Us"] = (out["cross"]["p99Us"] - out["local"]["p99Us"]) / 2
print(json.dumps(out, indent=2))
PY
