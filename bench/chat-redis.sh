#!/usr/bin/env bash
# The reference for bench/chat.sh: Redis 7 pub/sub fanning out the same chat (PLAYERS connections
# in CHANNELS channels, each subscribed to its channel and publishing into it, 10–100-byte
# messages, each delivered to every subscriber, its sender included), driven by
# crates/muster/examples/chat_reference.rs on 2 client threads. The send rate per connection is
# raised level by level (LEVELS) against one private redis-server (single-threaded, as shipped:
# no persistence, no output-buffer limit for subscribers) until delivery p99 passes P99_LIMIT_MS.
# Prints JSON: every level's sent/s, delivered/s, delivery p50 / p99 / p99.9 from the intended
# send time, Redis's CPU per second and per delivery over the window, and the best level within
# the limit; medians over RUNS.
#
# Needs redis-server (Debian: apt-get install redis-server). bench/chat-vs-redis.sh runs this and
# bench/chat.sh in one sitting and gives Muster's ratios.
#
# Usage: bench/chat-redis.sh   (env: RUNS=1 LEVELS="0.5 1 1.5 2 3 4 5 6" PLAYERS=10000 CHANNELS=2000
#                                RAMP_S=8 WAIT_S=10 CHAT_S=20 P99_LIMIT_MS=50 THREADS=2)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
command -v redis-server >/dev/null || { echo "chat-redis.sh: redis-server is needed (apt-get install redis-server)" >&2; exit 2; }
RUNS=${RUNS:-1}
LEVELS=${LEVELS:-"0.5 1 1.5 2 3 4 5 6"}
PLAYERS=${PLAYERS:-10000}
CHANNELS=${CHANNELS:-2000}
RAMP_S=${RAMP_S:-8}
WAIT_S=${WAIT_S:-10}
CHAT_S=${CHAT_S:-20}
P99_LIMIT_MS=${P99_LIMIT_MS:-50}
THREADS=${THREADS:-2}

cargo build --release -q -p muster --example chat_reference
reference="$(dirname "$0")/../target/release/examples/chat_reference"
work=$(mktemp -d /tmp/chat-redis.XXXXXX)
REDIS_PID=""
trap '[ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null; remove_work_dir "$work"' EXIT

for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --maxclients $((PLAYERS + 100)) --client-output-buffer-limit "pubsub 0 0 0" \
    --logfile "$work/redis-$run.log" &
  REDIS_PID=$!
  for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  : >"$work/levels-$run"
  for rate in $LEVELS; do
    "$reference" "127.0.0.1:$port" "$PLAYERS" "$CHANNELS" "$rate" "$RAMP_S" "$WAIT_S" "$CHAT_S" \
      "$REDIS_PID" "$THREADS" >"$work/level.json"
    # Connections of the level just run are closed by the time Redis is asked again.
    python3 - "$work/level.json" "$P99_LIMIT_MS" <<'PY' | tee -a "$work/levels-$run" >&2
import json, sys
level = json.load(open(sys.argv[1]))
level["pass"] = level["errors"] == 0 and level["deliveryP99Ms"] <= float(sys.argv[2])
print(json.dumps(level))
PY
    if ! tail -n 1 "$work/levels-$run" | grep -q '"pass": true'; then break; fi
  done
  kill "$REDIS_PID"
  wait "$REDIS_PID" 2>/dev/null || true
  REDIS_PID=""
done

PYTHONPATH="$(dirname "$0")" python3 - "$work" "$RUNS" "$PLAYERS" "$CHANNELS" "$P99_LIMIT_MS" <<'PY'
import json, sys
from benchlib import best_medians, sweeps
work, runs, players, channels, limit = sys.argv[1:6]
out = sweeps(work, runs)
print(json.dumps({
    "bench": "chat-redis",
    "players": int(players), "channels": int(channels),
    "p99LimitMs": float(limit),
    "median": best_medians(out, ["deliveredPerS", "sentPerS", "deliveryP50Ms", "deliveryP99Ms",
                                   "deliveryP999Ms", "serverCpuUsPerDelivery"]),
    "runs": out,
}, indent=2))
PY
