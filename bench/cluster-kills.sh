#!/usr/bin/env bash
# 100 kill -9s of cluster nodes (docs/cluster.md): 3 release-build nodes over a private nats-server,
# 10 players per node in one chat room and a room (authoritative match) per node; each kill
# (nodes in turn) is timed until every other player has been told the dead node's players left,
# then the node restarts under its name and its players come back; after each, no node may show
# a ghost presence and no room may be listed by two nodes. Prints JSON (bench/cluster/kills.mjs).
#
#   bench/cluster-kills.sh       # KILLS=100 NODES=3 PLAYERS=10, the default cluster timings
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/swarm-common.sh"
command -v nats-server >/dev/null || { echo "needs nats-server (scripts/test installs it)" >&2; exit 1; }
[ -d "$root/clients/js-acceptance/node_modules/ws" ] ||
  (cd "$root/clients/js-acceptance" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
build_release
work=$(mktemp -d /tmp/muster-kills.XXXXXX)
NATS_PID=""
trap '[ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null; remove_work_dir "$work"' EXIT
nats_port=$(free_port)
nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
NATS_PID=$!
sleep 0.3
SERVER_BIN="$muster_bin" NATS_URL="nats://127.0.0.1:$nats_port" WORK="$work" \
  node "$here/cluster/kills.mjs"
