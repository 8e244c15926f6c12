#!/usr/bin/env bash
# Storage objects under load (docs/storage-objects.md), on SQLite and on PostgreSQL, stepping the
# offered rate up: swarm's `storage` step over REST, each player writing its own objects (KEYS keys
# of VALUE_BYTES bytes) and reading them back, READ_RATIO of the calls being reads. Each step uses
# a fresh server and database: PLAYERS new accounts ramp in over RAMP_S, then call at random
# intervals whose mean gives the step's rate, for HOLD_S. Latency percentiles, the achieved rates,
# Muster's CPU and the group-commit batch sizes are read over the hold only (its first 2 s and last
# 1 s left out). Prints JSON: every step (achieved writes/s and reads/s; p50/p95/p99 of each;
# Muster's and swarm's CPU in cores and Muster's CPU per call; bytes Muster wrote to disk per call;
# how busy the whole machine was; group-commit batch sizes), and per engine the highest rate
# sustained with write p95 <= 26.7 ms (the p95 Nakama's 2,000,000-player wallet and inventory test
# reported), no errors, and at least 95 % of the offered rate (medians over RUNS runs).
#
# Usage: bench/storage.sh
#   env: RATES="10000 20000 30000" PLAYERS=4000 RAMP_S=10 HOLD_S=20 READ_RATIO=0.5 KEYS=4
#        VALUE_BYTES=200 ENGINES="sqlite postgres" WORKERS=2 RUNS=1 LOG=warn KEEP=0
#        PGBENCH_CLIENTS=4 PGBENCH_S=10
# PostgreSQL is started privately on 127.0.0.1 (as scripts/test does) with its durable defaults
# (fsync on, synchronous_commit on): acknowledged writes are on disk, as on SQLite. PG_OPTS adds
# server settings. With PostgreSQL, the physical reference follows in the same sitting: pgbench
# running Muster's own storage write statement and a bare upsert (bench/pgbench-statements.py).
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RATES=${RATES:-"10000 20000 30000"}
PLAYERS=${PLAYERS:-4000}
RAMP_S=${RAMP_S:-10}
HOLD_S=${HOLD_S:-20}
READ_RATIO=${READ_RATIO:-0.5}
KEYS=${KEYS:-4}
VALUE_BYTES=${VALUE_BYTES:-200}
ENGINES=${ENGINES:-"sqlite postgres"}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-1}
# Muster's log filter; e.g. LOG=muster::store::sqlite_checkpoint=debug,warn shows every checkpoint.
LOG=${LOG:-warn}
P95_BAR_MS=26.7

build_release
work=$(mktemp -d /tmp/bench-storage.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

scenario() { # FILE RATE
  ramp_and_hold "storage-bench-$2" >"$1"
  cat >>"$1" <<TOML

[[steps]]
do = "storage"
interval_s = $(paced_interval "$PLAYERS" "$2")
collection = "saves"
keys = $KEYS
value_bytes = $VALUE_BYTES
read_ratio = $READ_RATIO
TOML
}

from_s=$((RAMP_S + 2))
to_s=$((RAMP_S + HOLD_S - 1))
[ "$ENGINES" != "${ENGINES/postgres/}" ] && start_postgres

for engine in $ENGINES; do
  for rate in $RATES; do
    for run in $(seq 1 "$RUNS"); do
      tag="$engine-$rate-$run"
      port=$(free_port)
      start_muster_on "$engine" "$port" "$work/$tag"
      scenario "$work/$tag.toml" "$rate"
      "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
        --progress never --out "$work/$tag/out" >"$work/$tag/swarm.log" 2>&1 &
      # The hold window, measured from the server's side too.
      measure_hold "$port" $! "$work/$tag" "$from_s" "$to_s"
      "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
        >"$work/$tag/window.json"
      stop_muster
    done
  done
done

# The physical reference on PostgreSQL, in the same sitting: pgbench running Muster's own storage
# write statement, and a bare upsert of the same row, on a table of the same schema
# (PGBENCH_CLIENTS clients, PGBENCH_S seconds, RUNS runs each; every transaction its own commit).
if [ "$ENGINES" != "${ENGINES/postgres/}" ]; then
  "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE bench_reference" >/dev/null
  "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d bench_reference \
    -f "$root/crates/muster/src/storage/migrations/0009_storage_objects.postgres.sql" >/dev/null
  mkdir -p "$work/pgbench"
  "$root/bench/pgbench-statements.py" storage "$work/pgbench"
  for run in $(seq 1 "$RUNS"); do
    for script in muster bare; do
      "$PG_BIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PG_PORT" -U postgres \
        -c "${PGBENCH_CLIENTS:-4}" -j 2 -T "${PGBENCH_S:-10}" -f "$work/pgbench/$script.sql" \
        bench_reference 2>/dev/null | awk '/^tps/ {print $3}' >"$work/pgbench/$script-$run" || true
    done
  done
fi

PYTHONPATH="$root/bench" python3 - "$work" "$ENGINES" "$RATES" "$RUNS" "$P95_BAR_MS" "$PLAYERS" "$HOLD_S" <<'PY'
import glob, json, sys
from benchlib import group_commits, hold as hold_window, median as med
work, engines, rates, runs, bar = sys.argv[1], sys.argv[2].split(), [int(r) for r in sys.argv[3].split()], int(sys.argv[4]), float(sys.argv[5])
players, hold = int(sys.argv[6]), int(sys.argv[7])

steps = []
for engine in engines:
    for rate in rates:
        for run in range(1, runs + 1):
            tag = f"{engine}-{rate}-{run}"
            try:
                w = json.load(open(f"{work}/{tag}/window.json"))
            except Exception:
                steps.append({"engine": engine, "offered": rate, "run": run, "error": "no report"}); continue
            m = w["metrics"]
            writes, reads = m.get("storage_write", {}), m.get("storage_read", {})
            calls = writes.get("count", 0) + reads.get("count", 0)
            secs = w["seconds"] or 1
            report = json.load(open(f"{work}/{tag}/out/report.json"))
            steps.append({
                "engine": engine, "offered": rate, "run": run,
                "achieved": round(calls / secs),
                "writesPerS": round(writes.get("count", 0) / secs), "readsPerS": round(reads.get("count", 0) / secs),
                "p50Ms": writes.get("p50", 0), "p95Ms": writes.get("p95", 0), "p99Ms": writes.get("p99", 0),
                "byCall": {k: {x: v[x] for x in ("count", "p50", "p95", "p99", "max")} for k, v in m.items() if k.startswith("storage_")},
                "clientLagP95Ms": m.get("client_lag", {}).get("p95"),
                "errors": w["errors"], "failedPlayers": report["failed"], "errorKinds": report["errors"],
                **hold_window(f"{work}/{tag}", secs, calls),
                "groupCommit": group_commits(f"{work}/{tag}", hold),
            })

summary = {}
for engine in engines:
    per_rate = []
    for rate in rates:
        got = [s for s in steps if s["engine"] == engine and s["offered"] == rate and "achieved" in s]
        if not got: continue
        per_rate.append({"offered": rate, "achieved": med([s["achieved"] for s in got]),
                         "writesPerS": med([s["writesPerS"] for s in got]), "readsPerS": med([s["readsPerS"] for s in got]),
                         "p95Ms": med([s["p95Ms"] for s in got]),
                         "readP95Ms": med([s["byCall"].get("storage_read", {}).get("p95", 0) for s in got]),
                         "errors": sum(s["errors"] + s["failedPlayers"] for s in got)})
    ok = [r for r in per_rate if r["p95Ms"] <= bar and r["errors"] == 0 and r["achieved"] >= 0.95 * r["offered"]]
    best = max(ok, key=lambda r: r["achieved"]) if ok else None
    summary[engine] = {"bestSustainedCallsPerS": best["achieved"] if best else 0,
                       "writesPerSThere": best["writesPerS"] if best else 0,
                       "readsPerSThere": best["readsPerS"] if best else 0,
                       "atOffered": best["offered"] if best else None,
                       "p95MsThere": best["p95Ms"] if best else None, "byRate": per_rate}
reference = {}
for script in ("muster", "bare"):
    tps = [float(open(p).read() or 0) for p in sorted(glob.glob(f"{work}/pgbench/{script}-*"))]
    if tps:
        reference[script + "StatementTps"] = round(med(tps))
        reference[script + "StatementRuns"] = [round(x) for x in tps]
if reference and "postgres" in summary and summary["postgres"]["writesPerSThere"]:
    writes = summary["postgres"]["writesPerSThere"]
    reference["postgresWritesVsMusterStatement"] = round(writes / max(1, reference.get("musterStatementTps", 0)), 2)
    reference["postgresWritesVsBareUpsert"] = round(writes / max(1, reference.get("bareStatementTps", 0)), 2)
print(json.dumps({"bench": "storage", "players": players, "holdS": hold, "writeP95BarMs": bar,
                  "summary": summary, "pgbenchReference": reference, "steps": steps}, indent=2))
PY
