#!/usr/bin/env bash
# Muster's pages in a real headless browser: Debian's chromium, driven by puppeteer-core.
# Needs Node >= 20, chromium (CHROMIUM=/path, default: the first of chromium, chromium-browser on
# PATH) and a built server and swarm: `cargo build -p muster -p swarm` (or SERVER_BIN=/path/to/muster,
# SWARM_BIN=/path/to/swarm). The console's test writes its screenshots to SCREENSHOT_DIR
# (default: docs/images).
# Exit status: 0 when every test passed.
set -euo pipefail
cd "$(dirname "$0")"

export SERVER_BIN="${SERVER_BIN:-$(pwd)/../../target/debug/muster}"
# swarm drives players while the console's charts are watched.
export SWARM_BIN="${SWARM_BIN:-$(dirname "$SERVER_BIN")/swarm}"
# The console's screenshots, for docs/console.md.
export SCREENSHOT_DIR="${SCREENSHOT_DIR:-$(pwd)/../../docs/images}"
if [ ! -x "$SWARM_BIN" ]; then
  echo "run.sh: no swarm binary at $SWARM_BIN; run \`cargo build -p swarm\` first or set SWARM_BIN" >&2
  exit 2
fi
if [ ! -x "$SERVER_BIN" ]; then
  echo "run.sh: no muster binary at $SERVER_BIN; run \`cargo build -p muster\` first or set SERVER_BIN" >&2
  exit 2
fi
if [ -z "${CHROMIUM:-}" ]; then
  CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
fi
if [ -z "$CHROMIUM" ]; then
  echo "run.sh: no chromium found; install Debian's chromium package or set CHROMIUM" >&2
  exit 2
fi
export CHROMIUM

# puppeteer-core downloads no browser and runs no install script.
if [ -f package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
else
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error
fi
exec node --test --test-reporter=tap --test-force-exit --test-timeout=60000 test/*.test.mjs
