#!/usr/bin/env bash
# Process rooms (docs/fleet.md) in the flow of Hathora's room-hosting test with Frost Giant:
# Muster (release build) runs clients/fleet-server/relay.py — a Python game server on the Agones
# SDK's REST API — as rooms, driven by bench/fleet/drive.mjs.
#   1. warm: creates at WARM_RATE/s for WARM_S s from a warm pool (each room destroyed at once):
#      allocation latency from the pool;
#   2. cold: the same with no warm pool (buffer 0): every create starts its process;
#   3. burst: creates at BURST_RATE/s for BURST_S s (destroyed at once) against a pool of
#      BUFFER warm processes and at most MAX: queued creates count their wait; "no server" is a
#      create that failed for want of a process;
#   4. play: that test's flow at PLAY_RATE rooms/s for PLAY_S s — create, two players fetch
#      their tickets, connect over TCP, redeem them, exchange GAME_LINES lines (each answered),
#      leave; the server then shuts down.
# Prints one JSON object with every phase's result (PHASES="warm cold burst play" picks some;
# queued creates wait at most 20 s, under Muster's 30 s request timeout).
#
#   bench/fleet.sh    # WARM_RATE=5 WARM_S=20 COLD_RATE=2 COLD_S=10 BURST_RATE=200 BURST_S=10
#                     # PLAY_RATE=30 PLAY_S=60 BUFFER=16 MAX=200 (PLAY_S=600: the 10 minutes
#                     # of scenarios/published/hathora-process-rooms.toml)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
WARM_RATE=${WARM_RATE:-5} WARM_S=${WARM_S:-20}
COLD_RATE=${COLD_RATE:-2} COLD_S=${COLD_S:-10}
BURST_RATE=${BURST_RATE:-200} BURST_S=${BURST_S:-10}
PLAY_RATE=${PLAY_RATE:-30} PLAY_S=${PLAY_S:-60}
BUFFER=${BUFFER:-16} MAX=${MAX:-200}
# REUSE=1: a game server calls Ready again after its game (Agones' reuse) instead of exiting.
REUSE=${REUSE:-0}
REUSE_ARG=""
[ "$REUSE" = 1 ] && REUSE_ARG=', "--reuse"'

build_release
work=$(mktemp -d /tmp/muster-fleet.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
python=$(command -v python3)

# run_phase NAME BUFFER MODE RATE SECONDS: one Muster with that warm pool, one drive.
run_phase() {
  local name=$1 buffer=$2 mode=$3 rate=$4 seconds=$5 port
  mkdir -p "$work/$name"
  cat >"$work/$name/fleet.toml" <<TOML
[rooms]
admin_key = "fleet-admin"
[fleet]
port_range = "42000-44999"
[fleet.servers.relay]
command = "$python"
args = ["$root/clients/fleet-server/relay.py", "--port", "{port}"$REUSE_ARG]
buffer = $buffer
min = 0
max = $MAX
queue_timeout_ms = 20000
max_queue = 100000
TOML
  port=$(free_port)
  start_muster_with_config "$work/$name/fleet.toml" "$port" "$work/$name"
  # The warm pool first (at most 60 s).
  for _ in $(seq 1 600); do
    ready=$(curl -s "http://127.0.0.1:$port/metrics" |
      awk -F' ' '/^muster_fleet_processes\{server="relay",state="Ready"\}/ {print $2}')
    [ "${ready:-0}" -ge "$buffer" ] && break
    sleep 0.1
  done
  node "$here/fleet/drive.mjs" "http://127.0.0.1:$port" "$mode" "$rate" "$seconds" >"$work/$name/result.json"
  stop_muster
}

# The bound: what starting one game server costs here (Python's start with the relay's
# imports), median of 20; two cores start at most about 2000 / that many per second.
python3 - "$python" >"$work/python.json" <<'PY'
import json, statistics, subprocess, sys, time
runs = []
for _ in range(20):
    t = time.perf_counter()
    subprocess.run([sys.argv[1], "-c", "import argparse, json, socket, threading, urllib.request"], check=True)
    runs.append((time.perf_counter() - t) * 1000)
print(json.dumps({"pythonStartMsMedian": round(statistics.median(runs), 1)}))
PY
PHASES=${PHASES:-"warm cold burst play"}
for phase in $PHASES; do
  case $phase in
    warm) run_phase warm "$BUFFER" create "$WARM_RATE" "$WARM_S" ;;
    cold) run_phase cold 0 create "$COLD_RATE" "$COLD_S" ;;
    burst) run_phase burst "$BUFFER" create "$BURST_RATE" "$BURST_S" ;;
    play) run_phase play "$BUFFER" play "$PLAY_RATE" "$PLAY_S" ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
done
python3 - "$work" $PHASES <<'PY'
import json, sys
work, phases = sys.argv[1], sys.argv[2:]
print(json.dumps({"bench": "fleet", **json.load(open(f"{work}/python.json")), **{p: json.load(open(f"{work}/{p}/result.json")) for p in phases}}, indent=2))
PY
