#!/usr/bin/env bash
# Hathora's room-hosting test (30 room creations a second, each joined by two TCP players) against
# process rooms (docs/fleet.md), driven by swarm: Muster (release build) runs
# clients/fleet-server/relay.py — a Python game server on the Agones SDK's REST API — as rooms of
# kind "relay"; swarm runs scenarios/published/hathora-process-rooms.toml: RATE room creates a second
# for CREATE_S s, each room's host and port looked up, two TCP connections opened to the game
# server (tickets redeemed through Muster), a recorded game of REPLAY_S s replayed through the
# server's relay (metric `relay`: a line's send on one connection → its arrival on the other).
#
# The fleet: a warm pool of BUFFER ready processes, at least MIN running (MIN pre-starts a fleet
# sized for a burst, as Agones' buffer autoscaler would be), at most MAX; with REUSE=1 a game
# server calls Ready again after its game (Agones' GameServer reuse) instead of exiting. A create
# waits at most 20 s for a process (queued creates count their wait); "no server" is a create
# refused after that wait.
#
# Prints JSON: every run and the medians.
#
#   bench/swarm-process-rooms.sh   # RATE=30 CREATE_S=600 REPLAY_S=5 BUFFER=16 MIN=0 MAX=400 REUSE=1 RUNS=1
#   RATE=200 CREATE_S=60 REPLAY_S=1 MIN=400 bench/swarm-process-rooms.sh   # the burst
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
RATE=${RATE:-30} CREATE_S=${CREATE_S:-600} REPLAY_S=${REPLAY_S:-5}
BUFFER=${BUFFER:-16} MIN=${MIN:-0} MAX=${MAX:-400} REUSE=${REUSE:-1} RUNS=${RUNS:-1}
REUSE_ARG=""
[ "$REUSE" = 1 ] && REUSE_ARG=', "--reuse"'

build_release
work=$(mktemp -d /tmp/swarm-process-rooms.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
python=$(command -v python3)

# scenarios/published/hathora-process-rooms.toml at this rate and length, replaying the first
# REPLAY_S s of the recorded 60 s arena game.
python3 - "$root" "$work" "$RATE" "$CREATE_S" "$REPLAY_S" <<'PY'
import json, re, sys
root, work, rate, create_s, replay_s = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lines = open(f"{root}/scenarios/replays/arena-2p-60s.jsonl").read().splitlines()
kept = [lines[0]] + [l for l in lines[1:] if json.loads(l)["t_ms"] <= replay_s * 1000]
open(f"{work}/game.jsonl", "w").write("\n".join(kept) + "\n")
text = open(f"{root}/scenarios/published/hathora-process-rooms.toml").read()
text = text.replace('file = "../replays/arena-2p-5s.jsonl"', f'file = "{work}/game.jsonl"')
text = re.sub(r'(name = "create"\nduration_s = )\d+\narrival_rate = \d+', rf'\g<1>{create_s:g}\narrival_rate = {rate:g}', text)
text = re.sub(r'(name = "finish"\nduration_s = )\d+', rf'\g<1>{replay_s + 25:g}', text)
open(f"{work}/scenario.toml", "w").write(text)
PY

cat >"$work/fleet.toml" <<TOML
[fleet]
port_range = "42000-44999"
[fleet.servers.relay]
command = "$python"
args = ["$root/clients/fleet-server/relay.py", "--port", "{port}"$REUSE_ARG]
buffer = $BUFFER
min = $MIN
max = $MAX
queue_timeout_ms = 20000
max_queue = 100000
TOML

# metric NAME_AND_LABELS PORT: one sample of Muster's /metrics (0 when absent).
metric() {
  curl -s "http://127.0.0.1:$2/metrics" | awk -v m="$1" 'index($0, m " ") == 1 {print $2; found=1} END {if (!found) print 0}'
}

for run in $(seq 1 "$RUNS"); do
  dir="$work/run-$run"
  mkdir -p "$dir"
  port=$(free_port)
  start_muster_with_config "$work/fleet.toml" "$port" "$dir"
  # The warm pool (and MIN) first: at most 5 minutes.
  want=$(( BUFFER > MIN ? BUFFER : MIN ))
  started=$(date +%s.%N)
  for _ in $(seq 1 3000); do
    ready=$(metric 'muster_fleet_processes{server="relay",state="Ready"}' "$port")
    [ "${ready%.*}" -ge "$want" ] && break
    sleep 0.1
  done
  warmed=$(python3 -c "import time; print(round(time.time() - $started, 1))")
  "$swarm_bin" run "$work/scenario.toml" --target "http://127.0.0.1:$port" --progress never \
    --out "$dir/report" >"$dir/swarm.out" 2>&1 || true
  {
    echo "{\"warmS\": $warmed, \"warmReady\": ${ready%.*},"
    echo " \"warmAllocations\": $(metric 'muster_fleet_allocations_total{how="warm",server="relay"}' "$port"),"
    echo " \"coldAllocations\": $(metric 'muster_fleet_allocations_total{how="cold",server="relay"}' "$port"),"
    echo " \"queuedAllocations\": $(metric 'muster_fleet_allocations_total{how="queued",server="relay"}' "$port")}"
  } >"$dir/fleet.json"
  stop_muster
done

python3 - "$work" "$RUNS" "$RATE" "$CREATE_S" "$REPLAY_S" "$BUFFER" "$MIN" "$MAX" "$REUSE" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
rate, create_s, replay_s, buffer, minimum, maximum, reuse = sys.argv[3:10]
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report/report.json"))
    m = r["metrics"]
    pick = lambda name: {k: m.get(name, {}).get(src) for k, src in (("count", "count"), ("p50", "percentile50"), ("p99", "percentile99"), ("max", "max"))}
    out.append({
        "players": r["players"], "successful": r["successful"], "failed": r["failed"],
        "errors": r.get("errors", {}),
        "roomCreateMs": pick("room_create"), "roomLookupMs": pick("room_lookup"),
        "joinMs": pick("join"), "relayMs": pick("relay"),
        "fleet": json.load(open(f"{work}/run-{i}/fleet.json")),
    })
med = lambda f: round(statistics.median(f(x) for x in out), 2)
print(json.dumps({
    "bench": "swarm-process-rooms",
    "settings": {"ratePerS": float(rate), "createS": float(create_s), "replayS": float(replay_s),
                 "buffer": int(buffer), "min": int(minimum), "max": int(maximum), "reuse": reuse == "1"},
    "runs": out,
    "median": {
        "failed": med(lambda x: x["failed"]),
        "roomCreateP99Ms": med(lambda x: x["roomCreateMs"]["p99"] or 0),
        "relayP50Ms": med(lambda x: x["relayMs"]["p50"] or 0),
        "relayP99Ms": med(lambda x: x["relayMs"]["p99"] or 0),
    },
}, indent=2))
PY
