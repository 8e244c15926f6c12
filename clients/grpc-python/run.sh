#!/usr/bin/env bash
# Nakama's gRPC API against grpcio's Python client, its stubs generated here from Nakama's own
# published protos (Nakama v3.40's apigrpc.proto, nakama-common's api.proto and grpc-gateway's
# OpenAPI options, from the Go module proxy: NAKAMA_DIR, NAKAMA_COMMON_DIR and
# GRPC_GATEWAY_DIR, which scripts/test sets), in a throwaway virtual environment. Needs Python 3
# with venv and a built server: `cargo build -p muster` (or SERVER_BIN=/path/to/muster). Exit
# status: 0 when every test passed.
set -euo pipefail
cd "$(dirname "$0")"

export SERVER_BIN="${SERVER_BIN:-$(pwd)/../../target/debug/muster}"
if [ ! -x "$SERVER_BIN" ]; then
  echo "run.sh: no muster binary at $SERVER_BIN; run \`cargo build -p muster\` first or set SERVER_BIN" >&2
  exit 2
fi
for dir in NAKAMA_DIR NAKAMA_COMMON_DIR GRPC_GATEWAY_DIR; do
  if [ -z "${!dir:-}" ] || [ ! -d "${!dir}" ]; then
    echo "run.sh: set $dir to the Go module's directory (scripts/test fetches it)" >&2
    exit 2
  fi
done
venv=$(mktemp -d /tmp/muster-grpc-python.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv/env"
"$venv/env/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt
site=$("$venv/env/bin/python" -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$venv/generated"
"$venv/env/bin/python" -m grpc_tools.protoc \
  -I "$NAKAMA_DIR" -I "$NAKAMA_COMMON_DIR" -I "$GRPC_GATEWAY_DIR" -I "$site" -I "$site/grpc_tools/_proto" \
  --python_out="$venv/generated" --grpc_python_out="$venv/generated" \
  apigrpc/apigrpc.proto api/api.proto \
  protoc-gen-openapiv2/options/annotations.proto protoc-gen-openapiv2/options/openapiv2.proto
export PYTHONPATH="$venv/generated"
exec "$venv/env/bin/python" -m pytest -q -p no:cacheprovider test_grpc.py
