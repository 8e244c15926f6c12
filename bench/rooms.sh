#!/usr/bin/env bash
# Room creation + connection lookup per second (Hathora's room-hosting test with Frost Giant
# created 30 rooms/s): swarm players arrive at RATE per second for DURATION_S; each authenticates
# (an account made beforehand by a warm-up run, so account creation is not counted), creates an
# "arena" room (POST /v2/rooms) and looks up its connection info with a join ticket (GET
# /v2/rooms/{id}/connection). Rooms are never joined and expire after matches.empty_timeout_ms.
# Muster's CPU is read from /proc over the measured phase.
#
# Prints JSON. Usage: bench/rooms.sh   (env: RATE=1500 DURATION_S=20 WORKERS=2 RUNS=1)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RATE=${RATE:-1500}
DURATION_S=${DURATION_S:-20}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-1}
PLAYERS=$((RATE * DURATION_S))

build_release
work=$(mktemp -d /tmp/bench-rooms.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

scenario() { # FILE RATE DURATION ROOMS(0|1)
  cat >"$1" <<TOML
name = "bench-rooms"
timeout_s = 10
grace_s = 10
[[phases]]
duration_s = $3
arrival_rate = $2
[[steps]]
do = "authenticate"
reuse_accounts = true
TOML
  if [ "$4" = 1 ]; then
    cat >>"$1" <<TOML
[[steps]]
do = "create_room"
handler = "arena"
capacity = 2
[[steps]]
do = "room_connect"
connections = 1
open = false
TOML
  fi
}

for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  MUSTER_ROOMS__TCP_LISTEN="127.0.0.1:$(free_port)" start_muster "$port" "$work/muster-$run"
  # Warm-up: create the accounts (not measured).
  scenario "$work/warm.toml" 2000 $(( (PLAYERS + 1999) / 2000 )) 0
  "$swarm_bin" run "$work/warm.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
    --progress never --out "$work/warm-$run" >/dev/null 2>&1 || true
  scenario "$work/rooms.toml" "$RATE" "$DURATION_S" 1
  c1=$(cpu_ticks "$MUSTER_PID"); s1=$(date +%s.%N)
  "$swarm_bin" run "$work/rooms.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
    --progress never --out "$work/run-$run" >/dev/null 2>&1 || true
  c2=$(cpu_ticks "$MUSTER_PID"); s2=$(date +%s.%N)
  rooms_now=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^muster_rooms / {print $2}')
  echo "$c1 $s1 $c2 $s2 $rooms_now $(rss_kb "$MUSTER_PID")" >"$work/window-$run"
  stop_muster
done

python3 - "$work" "$RUNS" "$(getconf CLK_TCK)" "$DURATION_S" <<'PY'
import json, statistics, sys
work, runs, hz, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report.json"))
    c1, s1, c2, s2, rooms_now, rss = open(f"{work}/window-{i}").read().split()
    m = r["metrics"]
    created = m.get("room_create", {}).get("count", 0)
    looked = m.get("room_lookup", {}).get("count", 0)
    secs = float(s2) - float(s1)
    out.append({
        "status": r["status"], "players": r["players"], "failed": r["failed"], "errors": r["errors"],
        "roomsCreated": created, "lookups": looked,
        "roomsPerSecond": round(min(created, looked) / duration, 1),
        "roomCreate": m.get("room_create"), "roomLookup": m.get("room_lookup"),
        "createP99Ms": m.get("room_create", {}).get("percentile99"),
        "lookupP99Ms": m.get("room_lookup", {}).get("percentile99"),
        "clientLagP99Ms": m.get("client_lag", {}).get("percentile99"),
        "roomsAliveAtEnd": int(float(rooms_now)),
        "musterCpuPercent": round(100 * (int(c2) - int(c1)) / hz / secs, 1),
        "musterRssKb": int(rss),
    })
print(json.dumps({
    "bench": "rooms",
    "median": {k: statistics.median(x[k] for x in out if x[k] is not None) for k in
               ["roomsPerSecond", "createP99Ms", "lookupP99Ms", "failed"]},
    "runs": out,
}, indent=2))
PY
