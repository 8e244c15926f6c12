#!/usr/bin/env bash
# Nakama's API over gRPC against the same calls over REST, on one node (SQLite), in one sitting:
# swarm's steps run with `api = "rest"` and `api = "grpc"` in turn (RUNS pairs, each on a fresh
# server and database, gRPC on the HTTP port less one as Nakama has it).
#   - device authentications: new players arrive at AUTH_RATE per second for AUTH_S seconds,
#     each creating its account (`AuthenticateDevice`); measured over the arrivals' middle;
#   - storage writes: PLAYERS players ramp in over RAMP_S, then write their own objects
#     (`WriteStorageObjects`, VALUE_BYTES bytes, KEYS keys) at STORAGE_RATE per second in all
#     for HOLD_S; measured over the hold (its first 2 s and last 1 s left out).
# Prints JSON: every run (calls/s achieved, p50/p95/p99, Muster's CPU per call in µs, how busy the
# machine was) and per call kind the medians for each API and gRPC's ratios to REST.
#
# Usage: bench/grpc.sh
#   env: AUTH_RATE=2000 AUTH_S=10 STORAGE_RATE=5000 PLAYERS=2000 RAMP_S=8 HOLD_S=15 KEYS=4
#        VALUE_BYTES=200 WORKERS=2 RUNS=3 KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
AUTH_RATE=${AUTH_RATE:-2000}
AUTH_S=${AUTH_S:-10}
STORAGE_RATE=${STORAGE_RATE:-5000}
PLAYERS=${PLAYERS:-2000}
RAMP_S=${RAMP_S:-8}
HOLD_S=${HOLD_S:-15}
KEYS=${KEYS:-4}
VALUE_BYTES=${VALUE_BYTES:-200}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-3}

build_release
work=$(mktemp -d /tmp/bench-grpc.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT

auth_scenario() { # API
  cat <<TOML
name = "grpc-bench-auth-$1"
timeout_s = 10
grace_s = 10

[[phases]]
name = "arrivals"
duration_s = $AUTH_S
players = $((AUTH_RATE * AUTH_S))

[[steps]]
do = "authenticate"
api = "$1"
TOML
}

storage_scenario() { # API
  cat <<TOML
name = "grpc-bench-storage-$1"
timeout_s = 10
grace_s = 10

[[phases]]
name = "ramp"
duration_s = $RAMP_S
players = $PLAYERS

[[phases]]
name = "hold"
duration_s = $HOLD_S

[[steps]]
do = "authenticate"
api = "$1"

[[steps]]
do = "storage"
api = "$1"
interval_s = $(paced_interval "$PLAYERS" "$STORAGE_RATE")
collection = "saves"
keys = $KEYS
value_bytes = $VALUE_BYTES
read_ratio = 0
TOML
}

# run KIND API RUN FROM_S TO_S: one run on a fresh server, measured from FROM_S to TO_S.
run() {
  local kind=$1 api=$2 n=$3 from_s=$4 to_s=$5 tag="$1-$2-$3" port
  port=$(free_port)
  while [ "$port" -lt 1025 ] || ! python3 -c "import socket; socket.socket().bind(('127.0.0.1', $port - 1))" 2>/dev/null; do
    port=$(free_port)
  done
  MUSTER_GRPC__LISTEN="127.0.0.1:$((port - 1))" start_muster_on sqlite "$port" "$work/$tag"
  "${kind}_scenario" "$api" >"$work/$tag.toml"
  "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
    --progress never --out "$work/$tag/out" >"$work/$tag/swarm.log" 2>&1 &
  measure_hold "$port" $! "$work/$tag" "$from_s" "$to_s"
  "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
    >"$work/$tag/window.json"
  stop_muster
}

for n in $(seq 1 "$RUNS"); do
  for api in rest grpc; do
    run auth "$api" "$n" 2 $((AUTH_S - 1))
    run storage "$api" "$n" $((RAMP_S + 2)) $((RAMP_S + HOLD_S - 1))
  done
done

PYTHONPATH="$root/bench" python3 - "$work" "$RUNS" <<'PY'
import json, sys
from benchlib import hold, median
work, runs = sys.argv[1], int(sys.argv[2])
metric = {"auth": "auth", "storage": "storage_write"}
rows, summary = [], {}
for kind in ("auth", "storage"):
    per_api = {}
    for api in ("rest", "grpc"):
        got = []
        for n in range(1, runs + 1):
            tag = f"{kind}-{api}-{n}"
            try:
                w = json.load(open(f"{work}/{tag}/window.json"))
            except Exception:
                rows.append({"kind": kind, "api": api, "run": n, "error": "no report"}); continue
            m = w["metrics"].get(metric[kind], {})
            secs = w["seconds"] or 1
            calls = m.get("count", 0)
            row = {"kind": kind, "api": api, "run": n, "callsPerS": round(calls / secs),
                   "p50Ms": m.get("p50"), "p95Ms": m.get("p95"), "p99Ms": m.get("p99"),
                   "errors": w["errors"], **hold(f"{work}/{tag}", secs, calls)}
            rows.append(row); got.append(row)
        if got:
            per_api[api] = {k: median([r[k] for r in got]) for k in ("callsPerS", "p50Ms", "p95Ms", "p99Ms", "musterCpuUsPerCall", "machineBusy")}
    if "rest" in per_api and "grpc" in per_api:
        r, g = per_api["rest"], per_api["grpc"]
        per_api["grpcToRest"] = {"callsPerS": round(g["callsPerS"] / max(1, r["callsPerS"]), 3),
                                 "musterCpuUsPerCall": round(g["musterCpuUsPerCall"] / max(0.1, r["musterCpuUsPerCall"]), 3)}
    summary[kind] = per_api
print(json.dumps({"bench": "grpc", "runs": rows, "medians": summary}, indent=2))
PY
