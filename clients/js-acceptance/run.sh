#!/usr/bin/env bash
# Acceptance tests: the official @heroiclabs/nakama-js client against a real Muster server.
# Needs Node >= 20 and a built server: `cargo build -p muster` (or SERVER_BIN=/path/to/muster).
# Each test file starts its own server on a free 127.0.0.1 port with a temporary SQLite data dir.
# Exit status: 0 when every test passed.
set -euo pipefail
cd "$(dirname "$0")"

export SERVER_BIN="${SERVER_BIN:-$(pwd)/../../target/debug/muster}"
if [ ! -x "$SERVER_BIN" ]; then
  echo "run.sh: no muster binary at $SERVER_BIN; run \`cargo build -p muster\` first or set SERVER_BIN" >&2
  exit 2
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "run.sh: Node >= 20 required, found $(node --version)" >&2
  exit 2
fi

# No install scripts are needed (the only one, @scarf/scarf's, is analytics).
export SCARF_ANALYTICS=false
if [ -f package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
else
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error
fi

# TAP reporter, so the summary lines read "# pass N" / "# fail N" on a terminal too.
# --test-force-exit: nakama-js leaves request/heartbeat timers armed; do not wait for them.
exec node --test --test-reporter=tap --test-force-exit --test-timeout=60000 test/*.test.mjs
