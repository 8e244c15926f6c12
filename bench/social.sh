#!/usr/bin/env bash
# Friends and notifications under load (docs/social.md), with the load of
# crates/muster/examples/social_load.rs. Prints one JSON line per run:
#   - store: CONCURRENCY callers each sending STORE_PER_CALL stored notifications per call (the
#     HTTP key's notifications_send) for STORE_S seconds: stored notifications/s and the calls'
#     latency percentiles, on each of ENGINES (PostgreSQL durable: fsync on, synchronous_commit
#     on);
#   - friends: one account with 1,000 friends, listed whole FRIEND_LISTS times in turn;
#   - latency (with nats-server installed): two clustered nodes on one PostgreSQL database, a
#     socket on node b, LATENCY_COUNT notifications sent through node a one at a time; from the
#     send to the socket's receipt, not stored and stored;
#   - status (with nats-server): three clustered nodes on one PostgreSQL database, one user online
#     on node a and FOLLOWERS sockets following it spread over the three; STATUS_UPDATES status
#     updates one at a time, from the send to each follower's receipt;
#   - match_list: MATCHES labelled rooms on one node (SQLite), MATCH_LISTS `GET /v2/match` with a
#     label query (`+label.mode:ranked +label.level:>=40`, limit 100), one at a time.
# Usage: bench/social.sh   env: PARTS="store friends latency status match_list"
#        ENGINES="sqlite postgres" CONCURRENCY="32 128" STORE_S=10 STORE_PER_CALL=1 FRIEND_LISTS=200
#        LATENCY_COUNT=500 FOLLOWERS=1000 STATUS_UPDATES=200 MATCHES=10000 MATCH_LISTS=500 RUNS=3
#        LOG=warn KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PARTS=${PARTS:-"store friends latency status match_list"}
ENGINES=${ENGINES:-"sqlite postgres"}
CONCURRENCY=${CONCURRENCY:-"32 128"}
STORE_S=${STORE_S:-10}
STORE_PER_CALL=${STORE_PER_CALL:-1}
FRIEND_LISTS=${FRIEND_LISTS:-200}
LATENCY_COUNT=${LATENCY_COUNT:-500}
FOLLOWERS=${FOLLOWERS:-1000}
STATUS_UPDATES=${STATUS_UPDATES:-200}
MATCHES=${MATCHES:-10000}
MATCH_LISTS=${MATCH_LISTS:-500}
RUNS=${RUNS:-3}

build_release
(cd "$root" && cargo build --release -p muster --example social_load --quiet) >&2
load="$release_dir/examples/social_load"
work=$(mktemp -d /tmp/bench-social.XXXXXX)
NATS_PID=""
NODE_PIDS=()
NODE_PORTS=()
cleanup() {
  stop_muster
  stop_cluster
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null || true
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

# start_nats: one private nats-server for the clustered parts, started once.
start_nats() {
  [ -n "$NATS_PID" ] && return
  local nats_port
  nats_port=$(free_port)
  nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
  NATS_PID=$!
  export MUSTER_CLUSTER__NATS_URL="nats://127.0.0.1:$nats_port"
}

# start_cluster PREFIX DATABASE NAME...: one node per NAME on one PostgreSQL database, their
# ports in NODE_PORTS (in NAME order); returns once the first sees them all.
start_cluster() {
  local prefix=$1 db=$2 name port
  shift 2
  NODE_PORTS=()
  NODE_PIDS=()
  for name in "$@"; do
    port=$(free_port)
    MUSTER_CLUSTER__SUBJECT_PREFIX=$prefix MUSTER_CLUSTER__NODE_NAME=$name \
      start_muster_on postgres "$port" "$work/$prefix-$name" "" "$db"
    NODE_PORTS+=("$port")
    NODE_PIDS+=("$MUSTER_PID")
    MUSTER_PID=""
  done
  for _ in $(seq 1 100); do
    curl -s "http://127.0.0.1:${NODE_PORTS[0]}/metrics" | grep -q "^muster_cluster_nodes $#" && break
    sleep 0.1
  done
}

stop_cluster() {
  local pid
  for pid in "${NODE_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  NODE_PIDS=()
}
wants() { [ "$PARTS" != "${PARTS/$1/}" ]; }
if [ "$ENGINES" != "${ENGINES/postgres/}" ] || wants latency || wants status; then start_postgres; fi
# Two nodes on one machine: the invite-links listener on a free port too.
export MUSTER_LINKS__LISTEN=127.0.0.1:0

for engine in $ENGINES; do
  for run in $(seq 1 "$RUNS"); do
    wants store && for concurrency in $CONCURRENCY; do
      tag="store-$engine-$concurrency-$run"
      port=$(free_port)
      start_muster_on "$engine" "$port" "$work/$tag"
      echo "{\"engine\":\"$engine\",\"run\":$run,\"result\":$("$load" store "http://127.0.0.1:$port" defaulthttpkey "$STORE_S" "$concurrency" "$STORE_PER_CALL")}"
      stop_muster
    done
    wants friends || continue
    tag="friends-$engine-$run"
    port=$(free_port)
    start_muster_on "$engine" "$port" "$work/$tag"
    echo "{\"engine\":\"$engine\",\"run\":$run,\"result\":$("$load" friends "http://127.0.0.1:$port" "$FRIEND_LISTS")}"
    stop_muster
  done
done

if wants latency && command -v nats-server >/dev/null 2>&1; then
  start_nats
  "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE bench_social_cluster" >/dev/null
  for run in $(seq 1 "$RUNS"); do
    start_cluster "social$run" bench_social_cluster a b
    echo "{\"engine\":\"postgres\",\"nodes\":2,\"run\":$run,\"result\":$("$load" latency "http://127.0.0.1:${NODE_PORTS[0]}" "http://127.0.0.1:${NODE_PORTS[1]}" defaulthttpkey "$LATENCY_COUNT")}"
    stop_cluster
  done
fi

if wants match_list; then
  for run in $(seq 1 "$RUNS"); do
    port=$(free_port)
    MUSTER_ROOMS__ADMIN_KEY=benchadmin MUSTER_ROOMS__MAX_ROOMS=$((MATCHES + 100)) \
      start_muster_on sqlite "$port" "$work/match-list-$run"
    echo "{\"engine\":\"sqlite\",\"run\":$run,\"result\":$("$load" match_list "http://127.0.0.1:$port" benchadmin "$MATCHES" "$MATCH_LISTS")}"
    stop_muster
  done
fi

if wants status && command -v nats-server >/dev/null 2>&1; then
  start_nats
  "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE bench_social_status" >/dev/null
  for run in $(seq 1 "$RUNS"); do
    start_cluster "status$run" bench_social_status a b c
    urls=$(printf 'http://127.0.0.1:%s,' "${NODE_PORTS[@]}")
    echo "{\"engine\":\"postgres\",\"nodes\":3,\"run\":$run,\"result\":$("$load" status "${urls%,}" "$FOLLOWERS" "$STATUS_UPDATES")}"
    stop_cluster
  done
fi
