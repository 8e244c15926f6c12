#!/usr/bin/env bash
# Foundation figures (issue 2), printed as one JSON object:
#   - device accounts created per second on SQLite, with latency percentiles (closed loop);
#   - players authenticating + opening a socket per second, with latency percentiles;
#   - ping RTT at SOCKETS idle sockets, each pinging every PING_MS (measured from intended send time);
#   - the server's RSS per idle socket: (RSS with all sockets open - RSS before) / sockets.
# The server and the load client run on this machine, on 127.0.0.1, as separate processes.
# Settings (environment): ACCOUNTS (20000), SOCKETS (18000), HOLD (30 s), PING_MS (10000), CONCURRENCY (64).
set -euo pipefail
cd "$(dirname "$0")/.."
ACCOUNTS=${ACCOUNTS:-20000}
SOCKETS=${SOCKETS:-18000}
HOLD=${HOLD:-30}
PING_MS=${PING_MS:-10000}
CONCURRENCY=${CONCURRENCY:-64}

cargo build --release --quiet -p muster -p muster-bench
data=$(mktemp -d /tmp/muster-bench.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
target="http://127.0.0.1:$port"
# Per-IP limits off: every simulated player comes from 127.0.0.1.
MUSTER_LIMITS__AUTH_PER_IP_PER_SEC=0 MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC=0 MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 \
  target/release/muster --listen "127.0.0.1:$port" --data-dir "$data" --log warn &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -sf "$target/healthcheck" >/dev/null && break; sleep 0.1; done

accounts=$(target/release/muster-bench accounts --target "$target" --count "$ACCOUNTS" \
  --concurrency "$CONCURRENCY" --prefix accounts)
sockets=$(target/release/muster-bench sockets --target "$target" --count "$SOCKETS" \
  --concurrency "$CONCURRENCY" --prefix sockets --ping-interval-ms "$PING_MS" --hold-secs "$HOLD" \
  --server-pid "$server")
python3 - "$accounts" "$sockets" <<'PY'
import json, sys
accounts, sockets = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"accounts": accounts, "sockets": sockets}, indent=2))
PY
