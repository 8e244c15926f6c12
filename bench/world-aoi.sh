#!/usr/bin/env bash
# Areas of interest at scale (docs/world.md): SUBSCRIBERS swarm players on this machine subscribe to
# a shard of Muster's world of Helsinki (tiled TILES times, seeded with TOWERS NPC towers and
# twice as many creeps, ticking at 10 Hz), each panning a BOX_M viewport every PAN_S seconds and
# claiming a building every CLAIM_S seconds, for HOLD_S seconds after a RAMP_S ramp; Muster sends
# each subscriber AOI_HZ updates a second.
# FORMAT is the sockets' format: protobuf (binary envelopes) or json.
# Prints JSON: update latency from the server's tick (p50/p99/max), subscribe latency, bytes/s
# per client, updates skipped for slow clients, late ticks, Muster's CPU and RSS, failures.
#
#   bench/world-aoi.sh   # SUBSCRIBERS=10000 RAMP_S=30 HOLD_S=60 TILES=100 TOWERS=20000 BOX_M=600
#                        # PAN_S=5 CLAIM_S=30 AOI_HZ=5 FORMAT=protobuf RUNS=1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
SUBSCRIBERS=${SUBSCRIBERS:-10000} RAMP_S=${RAMP_S:-30} HOLD_S=${HOLD_S:-60}
TILES=${TILES:-100} TOWERS=${TOWERS:-20000} BOX_M=${BOX_M:-600} PAN_S=${PAN_S:-5}
CLAIM_S=${CLAIM_S:-30} AOI_HZ=${AOI_HZ:-5} FORMAT=${FORMAT:-protobuf} RUNS=${RUNS:-1}

build_release
work=$(mktemp -d /tmp/muster-world-aoi.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
pbf="${CARGO_TARGET_DIR:-$root/target}/world-data/Helsinki.osm.pbf"
"$root/scripts/fetch-helsinki.sh" "$pbf"

read -r cx cy spread <<<"$(shard_area "$pbf" "$TILES" "$work/extent")"

cat >"$work/world.toml" <<TOML
[world]
map = "$pbf"
tiles_per_shard = $TILES
seed_towers_per_shard = $TOWERS
aoi_hz = $AOI_HZ
checkpoint_interval_s = 60
TOML
cat >"$work/scenario.toml" <<TOML
name = "world-aoi"
timeout_s = 20
grace_s = 10
[[phases]]
name = "ramp"
duration_s = $RAMP_S
players = $SUBSCRIBERS
[[phases]]
name = "hold"
duration_s = $HOLD_S
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
format = "$FORMAT"
[[steps]]
do = "world"
duration_s = $(( HOLD_S + RAMP_S / 2 ))
center = [$cx, $cy]
spread_m = $spread
box_m = $BOX_M
pan_every_s = $PAN_S
claim_every_s = $CLAIM_S
buildings = $(( TILES * 433 ))
TOML

for run in $(seq 1 "$RUNS"); do
  dir="$work/run-$run"; mkdir -p "$dir"
  port=$(free_port)
  # Importing the map and seeding come first: up to a minute.
  start_muster_with_config "$work/world.toml" "$port" "$dir" 60
  cpu0=$(awk '{print $14+$15}' "/proc/$MUSTER_PID/stat")
  "$swarm_bin" run "$work/scenario.toml" --target "http://127.0.0.1:$port" --progress never \
    --out "$dir/report" >"$dir/swarm.out" 2>&1 || true
  cpu1=$(awk '{print $14+$15}' "/proc/$MUSTER_PID/stat")
  curl -s "http://127.0.0.1:$port/metrics" >"$dir/metrics.txt"
  echo "{\"musterCpuS\": $(( (cpu1 - cpu0) / $(getconf CLK_TCK) )), \"musterRssKb\": $(rss_kb "$MUSTER_PID")}" >"$dir/muster.json"
  stop_muster
done

python3 - "$work" "$RUNS" "$SUBSCRIBERS" "$HOLD_S" "$RAMP_S" "$AOI_HZ" "$BOX_M" "$FORMAT" <<'PY'
import json, statistics, sys
work, runs, subs, hold, ramp, hz, box, fmt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8]
def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0
out = []
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run-{i}/report/report.json"))
    m = open(f"{work}/run-{i}/metrics.txt").read()
    mu = json.load(open(f"{work}/run-{i}/muster.json"))
    wu, ws = r["metrics"].get("world_update", {}), r["metrics"].get("world_subscribe", {})
    c = r["counters"]
    seconds = hold + ramp / 2
    out.append({
        "players": r["players"], "failed": r["failed"], "errors": r.get("errors", {}),
        "updateMs": {k: wu.get(s) for k, s in (("count", "count"), ("p50", "percentile50"), ("p99", "percentile99"), ("max", "max"))},
        "subscribeMs": {k: ws.get(s) for k, s in (("count", "count"), ("p50", "percentile50"), ("p99", "percentile99"))},
        "worldStates": c.get("worldStates"), "worldBytes": c.get("worldBytes"),
        "bytesPerClientPerS": round(c.get("worldBytes", 0) / max(1, r["players"]) / seconds, 1),
        "statesSkipped": metric(m, "muster_world_states_skipped_total"),
        "statesSent": metric(m, "muster_world_states_sent_total"),
        "lateTicks": metric(m, "muster_world_late_ticks_total"),
        "claimsApplied": metric(m, "muster_world_actions_total"),
        **mu,
    })
print(json.dumps({"bench": "world-aoi", "format": fmt, "subscribers": subs, "aoiHz": float(hz), "boxM": float(box), "runs": out,
                  "median": {"updateP99Ms": statistics.median(x["updateMs"]["p99"] or 0 for x in out),
                             "updateP50Ms": statistics.median(x["updateMs"]["p50"] or 0 for x in out)}}, indent=2))
PY
