# Shared helpers for the swarm benches (sourced, not run). Load only ever targets 127.0.0.x,
# every wait is bounded, and only the PIDs started here are ever signalled.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Where `cargo build` puts the binaries: CARGO_TARGET_DIR when set (a target directory shared
# between worktrees), else the workspace's own.
release_dir="${CARGO_TARGET_DIR:-$root/target}/release"
swarm_bin="$release_dir/swarm"
# BENCH_SERVER_BIN runs another build of the server (e.g. an older commit's, for an A/B comparison).
muster_bin="${BENCH_SERVER_BIN:-$release_dir/muster}"  # not MUSTER_*: those are server settings
MUSTER_PID=""

# remove_work_dir DIR: deletes a bench's work directory, or with KEEP=1 (any swarm bench) keeps it
# (swarm's reports, Muster's logs) and says where.
remove_work_dir() {
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $1" >&2; else rm -rf "$1"; fi
}

build_release() {
  (cd "$root" && cargo build --release -p swarm -p muster --quiet) >&2
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_muster PORT DATA_DIR: one muster process, per-IP rate limits off (all players come
# from a few 127.0.0.x addresses), logs to DATA_DIR/muster.log.
# limits_off: sets LIMITS_OFF to the settings that turn the per-IP limits off (every simulated
# player comes from a few local addresses), for the server build under test: an older build (an
# A/B baseline) is not given a setting it does not have, which it would refuse.
limits_off() {
  LIMITS_OFF=(MUSTER_LIMITS__AUTH_PER_IP_PER_SEC=0 MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC=0)
  if "$muster_bin" config 2>/dev/null | grep -q '^max_connections_per_ip'; then
    LIMITS_OFF+=(MUSTER_LIMITS__MAX_CONNECTIONS_PER_IP=0)
  fi
  if "$muster_bin" config 2>/dev/null | grep -q '^max_sockets_per_ip'; then
    LIMITS_OFF+=(MUSTER_LIMITS__MAX_SOCKETS_PER_IP=0)
  fi
  # The gRPC edge is off unless the bench asks for it (MUSTER_GRPC__LISTEN): several nodes on
  # one machine cannot all have Nakama's port.
  if "$muster_bin" config 2>/dev/null | grep -q '^\[grpc\]'; then
    LIMITS_OFF+=(MUSTER_GRPC__LISTEN="${MUSTER_GRPC__LISTEN:-}")
  fi
}

start_muster() {
  local port=$1 data=$2
  mkdir -p "$data"
  limits_off
  # The native TCP transport gets a free port unless the bench chose one (7351 may be taken).
  env "${LIMITS_OFF[@]}" \
  MUSTER_ROOMS__TCP_LISTEN="${MUSTER_ROOMS__TCP_LISTEN:-127.0.0.1:0}" \
  MUSTER_ENET__LISTEN="${MUSTER_ENET__LISTEN:-127.0.0.1:0}" \
    "$muster_bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --log warn \
    >"$data/muster.log" 2>&1 &
  MUSTER_PID=$!
  wait_for_muster "$port" "$data"
}

# start_muster_with_config CONFIG PORT DATA_DIR [WAIT_S]: one muster process with the settings
# file CONFIG (per-IP limits off, the native TCP, ENet and links listeners off or on free ports),
# logs to DATA_DIR/muster.log; waits at most WAIT_S (10) seconds for it to answer.
start_muster_with_config() {
  local config=$1 port=$2 data=$3 wait_s=${4:-10}
  mkdir -p "$data"
  limits_off
  env "${LIMITS_OFF[@]}" MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 MUSTER_ENET__LISTEN=127.0.0.1:0 \
    MUSTER_LINKS__LISTEN= \
    "$muster_bin" serve --config "$config" --listen "127.0.0.1:$port" --data-dir "$data" \
    --log warn >"$data/muster.log" 2>&1 &
  MUSTER_PID=$!
  wait_for_muster "$port" "$data" "$wait_s"
}

# wait_for_muster PORT DATA_DIR [WAIT_S]: waits (at most WAIT_S, 10, seconds) until the Muster
# just started answers.
wait_for_muster() {
  local port=$1 data=$2 wait_s=${3:-10} i
  for i in $(seq 1 $(( wait_s * 10 ))); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/healthcheck"; then return 0; fi
    if ! kill -0 "$MUSTER_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "muster did not start on 127.0.0.1:$port; see $data/muster.log" >&2
  return 1
}

stop_muster() {
  if [ -n "$MUSTER_PID" ] && kill -0 "$MUSTER_PID" 2>/dev/null; then
    kill -TERM "$MUSTER_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 150); do
      kill -0 "$MUSTER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$MUSTER_PID" 2>/dev/null || true
    wait "$MUSTER_PID" 2>/dev/null || true
  fi
  MUSTER_PID=""
}

# --- Remote workers ---------------------------------------------------------------------------
WORKER_PIDS=()

# start_remote_workers N DIR: N `swarm worker --listen 127.0.0.1:0 --once` processes (the token
# from SWARM_WORKER_TOKEN), their output in DIR; waits (at most 10 s each) for their addresses
# and sets WORKERS_AT to them, comma-separated, for `swarm run --workers-at`.
start_remote_workers() {
  local n=$1 dir=$2 i k addrs=()
  for i in $(seq 1 "$n"); do
    "$swarm_bin" worker --listen 127.0.0.1:0 --once >"$dir/worker-$i.out" 2>"$dir/worker-$i.log" &
    WORKER_PIDS+=($!)
  done
  for i in $(seq 1 "$n"); do
    for k in $(seq 1 100); do grep -q '^listening' "$dir/worker-$i.out" && break; sleep 0.1; done
    addrs+=("$(awk '/^listening/ {print $2}' "$dir/worker-$i.out")")
  done
  WORKERS_AT=$(IFS=,; echo "${addrs[*]}")
}

# stop_remote_workers: ends the workers started above (by PID) that are still running.
stop_remote_workers() {
  local pid
  for pid in "${WORKER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${WORKER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  WORKER_PIDS=()
}

# rss_kb PID: resident memory of a process, KiB.
rss_kb() {
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

# heartbeat_scenario FILE PLAYERS RAMP_S HOLD_S INTERVAL_S: writes an idle-heartbeat scenario.
heartbeat_scenario() {
  cat >"$1" <<TOML
name = "idle-heartbeat-$2"
timeout_s = 10
grace_s = 10

[[phases]]
name = "ramp"
duration_s = $3
shape = "linear"
players = $2

[[phases]]
name = "hold"
duration_s = $4

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "heartbeat"
interval_s = $5
TOML
}

# whole_seconds PLAYERS RATE: how many whole seconds (at least 1) PLAYERS arrivals at RATE per
# second take. Phases of whole seconds line up with the report's per-second rows, so the report's
# rates by phase are exact.
whole_seconds() {
  python3 -c "print(max(1, round($1 / $2)))"
}

# accounts_scenario FILE PLAYERS SECONDS: writes a scenario in which PLAYERS players arrive at an
# even rate over SECONDS (one arrival-rate phase), each creating a new device account and doing
# nothing else. A 2 s phase without arrivals follows: a player that starts only once the run is
# over skips its steps (and still counts as successful), so the last arrivals must not coincide
# with the end of the run.
accounts_scenario() {
  cat >"$1" <<TOML
name = "accounts-$2"
timeout_s = 10
grace_s = 10

[[phases]]
name = "accounts"
duration_s = $3
arrival_rate = $(python3 -c "print($2 / $3)")

[[phases]]
name = "drain"
duration_s = 2

[[steps]]
do = "authenticate"
TOML
}

# --- PostgreSQL, private to one bench ------------------------------------------------------------
PG_BIN="" PG_DIR="" PG_PORT=""

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# start_postgres: a private cluster on 127.0.0.1 (PG_PORT), Debian's PostgreSQL with its durable
# defaults (fsync on, synchronous_commit on); PG_OPTS adds server settings ("-c name=value ...").
start_postgres() {
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
    echo "PostgreSQL is not installed (scripts/test installs it)" >&2
    return 1
  fi
  # Its own directory: the postgres user cannot enter a bench's work directory (mode 700, ours).
  PG_DIR=$(mktemp -d /tmp/bench-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
  PG_PORT=$(free_port)
  as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres -E UTF8 >/dev/null
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR ${PG_OPTS:-}" start >/dev/null
}

stop_postgres() {
  if [ -n "$PG_DIR" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
  PG_DIR=""
}

# start_muster_on ENGINE PORT DIR [CONFIG] [DB]: like start_muster, with the database the engine
# needs: for `postgres`, the database DB of the private PostgreSQL when given (it exists), else a
# fresh one; for `sqlite`, the one in DIR. CONFIG: a settings file. LOG is Muster's log filter
# (default warn).
start_muster_on() {
  local engine=$1 port=$2 data=$3 config=${4:-} db=${5:-}
  mkdir -p "$data"
  local url=""
  if [ "$engine" = postgres ]; then
    if [ -z "$db" ]; then
      db="bench_$(basename "$data" | tr -c 'a-z0-9\n' '_')"
      "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE $db" >/dev/null
    fi
    url="postgres://postgres@127.0.0.1:$PG_PORT/$db"
  fi
  local args=(serve --listen "127.0.0.1:$port" --data-dir "$data" --log "${LOG:-warn}")
  [ -n "$config" ] && args+=(--config "$config")
  limits_off
  env "${LIMITS_OFF[@]}" MUSTER_DATABASE_URL="$url" \
    MUSTER_ROOMS__TCP_LISTEN="${MUSTER_ROOMS__TCP_LISTEN:-127.0.0.1:0}" \
  MUSTER_ENET__LISTEN="${MUSTER_ENET__LISTEN:-127.0.0.1:0}" \
    "$muster_bin" "${args[@]}" >>"$data/muster.log" 2>&1 &
  MUSTER_PID=$!
  wait_for_muster "$port" "$data"
}

# --- CPU and storage counters ----------------------------------------------------------------------
# cpu_ticks PID: user + system CPU of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# tree_ticks PID: user + system CPU of a process and its children (swarm and its workers).
tree_ticks() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do total=$((total + $(cpu_ticks "$p"))); done
  echo "$total"
}
# disk_bytes PID: bytes the process has caused to be written to storage (WAL, database file).
disk_bytes() { awk '/^write_bytes:/ {print $2}' "/proc/$1/io" 2>/dev/null || echo 0; }
# machine_ticks: busy and total CPU ticks of the whole machine.
machine_ticks() { awk '/^cpu / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }

# --- The stepping benches (economy, storage, leaderboard): scenario, hold window -------------------

# paced_interval PLAYERS RATE: swarm's `interval_s` so that PLAYERS players make RATE calls a second
# in all: uniform within ±50 % of the mean, PLAYERS / RATE seconds. Prints "[lo, hi]".
paced_interval() {
  python3 -c "m = $1 / $2; print(f'[{round(m * 0.5, 4)}, {round(m * 1.5, 4)}]')"
}

# ramp_and_hold NAME: the head of a stepping bench's scenario: PLAYERS new players arrive over
# RAMP_S, a HOLD_S hold follows, and each player authenticates first; the bench appends its steps.
ramp_and_hold() {
  cat <<TOML
name = "$1"
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
TOML
}

# measure_hold PORT SWARM_PID DIR FROM_S TO_S: the hold window from the server's side, FROM_S and
# TO_S seconds after the run began: Muster's /metrics at both ends (DIR/metrics-from, -to) and, in
# DIR/cpu, Muster's CPU ticks, the machine's busy and total ticks at both ends, the clock tick,
# swarm's CPU ticks, Muster's bytes written to storage, and Muster's RSS (KiB) at the end — read
# by bench/benchlib.py's `hold`. Then waits for swarm to end.
measure_hold() {
  local port=$1 swarm_pid=$2 dir=$3 from_s=$4 to_s=$5
  local cpu_from cpu_to machine_from machine_to swarm_from swarm_to disk_from disk_to rss_kb
  sleep "$from_s"
  curl -s "http://127.0.0.1:$port/metrics" >"$dir/metrics-from"
  cpu_from=$(cpu_ticks "$MUSTER_PID"); machine_from=$(machine_ticks)
  swarm_from=$(tree_ticks "$swarm_pid"); disk_from=$(disk_bytes "$MUSTER_PID")
  sleep $((to_s - from_s))
  curl -s "http://127.0.0.1:$port/metrics" >"$dir/metrics-to"
  cpu_to=$(cpu_ticks "$MUSTER_PID"); machine_to=$(machine_ticks)
  swarm_to=$(tree_ticks "$swarm_pid"); disk_to=$(disk_bytes "$MUSTER_PID")
  rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$MUSTER_PID/status" 2>/dev/null || echo 0)
  wait "$swarm_pid" || true
  echo "$cpu_from $cpu_to $machine_from $machine_to $(getconf CLK_TCK) $swarm_from $swarm_to" \
    "$disk_from $disk_to $rss_kb" >"$dir/cpu"
}

# --- The persistent world ------------------------------------------------------------------------
# shard_area PBF TILES DIR: the centre (x, y) of a shard of TILES copies of the map PBF, laid out as
# Muster lays them (rows of ceil(sqrt(TILES)), each the map's extent plus 1 km apart), and the
# radius its viewports spread over; the map's extent read by the engine's bench (DIR: its scratch).
shard_area() {
  local pbf=$1 tiles=$2 dir=$3 extent
  (cd "$root" && cargo build --release -p muster-world --example world-bench --quiet) >&2
  extent=$("$release_dir/examples/world-bench" "$pbf" towers=10 creeps=10 ticks=1 checkpoints=1 \
    dir="$dir")
  python3 - "$tiles" "$extent" <<'PY'
import json, math, sys
tiles, extent = int(sys.argv[1]), json.loads(sys.argv[2])
cols = math.ceil(math.sqrt(tiles)); rows = math.ceil(tiles / cols)
w, h = extent["mapWidthM"] + 1000, extent["mapHeightM"] + 1000
print((cols - 1) * w / 2, (rows - 1) * h / 2, min(cols * w, rows * h) / 2)
PY
}
