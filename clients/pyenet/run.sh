#!/usr/bin/env bash
# The ENet transport against pyenet (PyPI; it bundles ENet 1.3's C library), in a throwaway
# virtual environment. Needs Python 3 with venv and a built server: `cargo build -p muster`
# (or SERVER_BIN=/path/to/muster). Exit status: 0 when every test passed.
set -euo pipefail
cd "$(dirname "$0")"

export SERVER_BIN="${SERVER_BIN:-$(pwd)/../../target/debug/muster}"
if [ ! -x "$SERVER_BIN" ]; then
  echo "run.sh: no muster binary at $SERVER_BIN; run \`cargo build -p muster\` first or set SERVER_BIN" >&2
  exit 2
fi
venv=$(mktemp -d /tmp/muster-pyenet.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider test_enet.py
