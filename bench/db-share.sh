#!/usr/bin/env bash
# The database's share of a durable call, on PostgreSQL: one release Muster on a private
# PostgreSQL (Debian's, durable defaults, pg_stat_statements loaded), a warm-up, then CALLS calls
# of each kind at CONCURRENCY, and what PostgreSQL did for them per call: statements and rows
# (pg_stat_statements), WAL bytes (the WAL position before and after), the CPU of every PostgreSQL process
# (bench/db_share.py). Kinds: wallet (the built-in wallet_spend), storage (an object written
# over), leaderboard (a score, operator best). One JSON line per kind and run.
# Usage: bench/db-share.sh   env: KINDS="wallet storage leaderboard" CALLS=4000 CONCURRENCY=16
#        RUNS=3 LOG=warn
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
KINDS=${KINDS:-"wallet storage leaderboard"}
CALLS=${CALLS:-4000}
CONCURRENCY=${CONCURRENCY:-16}
RUNS=${RUNS:-3}

build_release
work=$(mktemp -d /tmp/bench-db-share.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

PG_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
start_postgres
export PATH="$PG_BIN:$PATH"
postmaster=$(head -n 1 "$PG_DIR/data/postmaster.pid")
export MUSTER_LEADERBOARDS__BOARDS='[{id="bench", sort_order="desc", operator="best"}]'
export MUSTER_RUNTIME__PLAYER_BUILTIN_FUNCTIONS="[wallet_spend]"
export MUSTER_ECONOMY__STARTING_WALLET="{coins=1000000}"
for run in $(seq 1 "$RUNS"); do
  db="share_$run"
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE $db" >/dev/null
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$db" \
    -c "CREATE EXTENSION pg_stat_statements" >/dev/null
  port=$(free_port)
  start_muster_on postgres "$port" "$work/muster-$run" "" "$db"
  python3 "$(dirname "$0")/db_share.py" "http://127.0.0.1:$port" "$PG_PORT" "$db" "$postmaster" \
    "$CALLS" "$CONCURRENCY" $KINDS | sed "s/^{/{\"run\":$run,/"
  stop_muster
done
