#!/usr/bin/env bash
# A world on two nodes (docs/world.md, "A world on several nodes"): two release-build Muster nodes
# on one private PostgreSQL (durable defaults) and one private nats-server, sharing one checkpoint
# folder, run a world of 2 shards the size of TDWorld's (TILES Helsinki tiles, TOWERS NPC towers
# and twice as many creeps each, 10 Hz); one shard per node. Prints JSON (bench/world/cluster.py):
# kill -9 → the shard's first tick on the other node (KILLS times; LEASE_MS, the restore's own
# time), views of SUBSCRIBERS players through the shard's node and through the other (RUNS pairs),
# claims per second applied when CLAIM_PLAYERS players claim every CLAIM_EVERY_S through either.
#
#   bench/world-cluster.sh   # KILLS=3 RUNS=3 LEASE_MS=5000 TILES=1217 TOWERS=263278
#                            # SUBSCRIBERS=1000 CLAIM_PLAYERS=2000 CLAIM_EVERY_S=0.2 RAMP_S=10 HOLD_S=20
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
command -v nats-server >/dev/null || { echo "needs nats-server (scripts/test installs it)" >&2; exit 1; }
KILLS=${KILLS:-3} RUNS=${RUNS:-3} LEASE_MS=${LEASE_MS:-5000} TILES=${TILES:-1217}
TOWERS=${TOWERS:-263278}

build_release
work=$(mktemp -d /tmp/muster-world-cluster.XXXXXX)
NATS_PID=""
trap '[ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null; stop_postgres; remove_work_dir "$work"' EXIT
pbf="${CARGO_TARGET_DIR:-$root/target}/world-data/Helsinki.osm.pbf"
"$root/scripts/fetch-helsinki.sh" "$pbf"
start_postgres
nats_port=$(free_port)
nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$nats_port") 2>/dev/null && break; sleep 0.1; done

read -r cx cy spread <<<"$(shard_area "$pbf" "$TILES" "$work/extent")"

cat >"$work/world.toml" <<TOML
[world]
map = "$pbf"
shards = 2
tiles_per_shard = $TILES
seed_towers_per_shard = $TOWERS
checkpoint_dir = "$work/volume"
checkpoint_interval_s = 10
actions_per_sec = 0
lease_ms = $LEASE_MS
[world.rules]
claim_cost = 0
TOML

SERVER_BIN="$muster_bin" SWARM_BIN="$swarm_bin" WORK="$work" \
  PG_BASE="postgres://postgres@127.0.0.1:$PG_PORT" PSQL="$PG_BIN/psql" NATS_URL="nats://127.0.0.1:$nats_port" \
  KILLS="$KILLS" RUNS="$RUNS" LEASE_MS="$LEASE_MS" CX="$cx" CY="$cy" SPREAD="$spread" \
  BUILDINGS=$(( TILES * 433 )) python3 "$here/world/cluster.py"
