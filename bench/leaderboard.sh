#!/usr/bin/env bash
# Leaderboard writes and listings around an owner on one leaderboard of RECORDS records
# (docs/leaderboards.md), on SQLite and on PostgreSQL, with the physical references beside them.
#
# Per engine, one database is seeded once: the server creates the descending `best` leaderboard
# `bench` from its settings, then RECORDS records of random owners and scores go straight into
# its table. Every step then starts a server on that database (the first listing loads the ranks:
# its time is `rankLoadS`), and swarm's `leaderboard` step drives PLAYERS new players over REST:
# - write steps (WRITE_RATES, scores per second): every call submits a score;
# - around steps (AROUND_RATES, listings per second): each player submits one score, then only
#   lists the LIMIT records around itself.
# Latency percentiles, rates, Muster's CPU per call and the group-commit batch sizes are read
# over the hold only (its first 2 s and last 1 s left out).
#
# The references, in the same sitting: `rank_reference` (crates/muster/examples), the same
# in-memory order-statistic tree with no HTTP and no database; and on PostgreSQL `pgbench`
# running Muster's own upsert statement (PGBENCH_CLIENTS clients, PGBENCH_S seconds, RUNS runs)
# on the seeded table.
#
# Prints JSON: every step; per engine the highest write rate sustained with p95 <= 26.7 ms (the
# p95 Nakama's 2,000,000-player wallet and inventory test reported), no errors and at least 95 %
# of the offered rate, and the around listings' p99 at each offered rate (medians over RUNS runs);
# the references and the ratios.
#
# Usage: bench/leaderboard.sh
#   env: RECORDS=1000000 WRITE_RATES="5000 10000 20000" AROUND_RATES=5000 PLAYERS=4000 RAMP_S=10
#        HOLD_S=20 LIMIT=10 ENGINES="sqlite postgres" WORKERS=2 RUNS=3 PGBENCH_CLIENTS=4
#        PGBENCH_S=10 LOG=warn KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RECORDS=${RECORDS:-1000000}
WRITE_RATES=${WRITE_RATES:-"5000 10000 20000"}
AROUND_RATES=${AROUND_RATES:-5000}
PLAYERS=${PLAYERS:-4000}
RAMP_S=${RAMP_S:-10}
HOLD_S=${HOLD_S:-20}
LIMIT=${LIMIT:-10}
ENGINES=${ENGINES:-"sqlite postgres"}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-3}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-4}
PGBENCH_S=${PGBENCH_S:-10}
P95_BAR_MS=26.7
SCORES=1000000000

build_release
(cd "$root" && cargo build --release -p muster --example rank_reference --quiet) >&2
work=$(mktemp -d /tmp/bench-leaderboard.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

cat >"$work/settings.toml" <<TOML
[leaderboards]
boards = [{ id = "bench", sort_order = "desc", operator = "best" }]
TOML

# scenario FILE KIND RATE: write steps submit at RATE; around steps submit once, then list at RATE.
scenario() {
  ramp_and_hold "leaderboard-bench-$2-$3" >"$1"
  if [ "$2" = around ]; then
    cat >>"$1" <<TOML

[[steps]]
do = "leaderboard"
leaderboard = "bench"
score = [0, $SCORES]
read_ratio = 0.0
interval_s = [0.001, 0.001]
duration_s = 0.0015
TOML
  fi
  cat >>"$1" <<TOML

[[steps]]
do = "leaderboard"
leaderboard = "bench"
score = [0, $SCORES]
limit = $LIMIT
read_ratio = $([ "$2" = around ] && echo 1.0 || echo 0.0)
interval_s = $(paced_interval "$PLAYERS" "$3")
TOML
}

# seed ENGINE DIR: the leaderboard created by a first start, then RECORDS records inserted.
seed() {
  local engine=$1 dir=$2 port
  port=$(free_port)
  start_muster_on "$engine" "$port" "$dir" "$work/settings.toml" "${DB:-}"
  stop_muster
  if [ "$engine" = postgres ]; then
    "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -c "
      INSERT INTO leaderboard_records (leaderboard_id, expiry_time, owner_id, username, score,
          subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)
      SELECT 'bench', 0, gen_random_uuid(), 'seed' || n, (random() * $SCORES)::bigint, 0, 1, 0,
          '{}', 0, 0
      FROM generate_series(1, $RECORDS) AS n;
      ANALYZE leaderboard_records;" >/dev/null
  else
    python3 - "$dir/muster.sqlite3" "$RECORDS" "$SCORES" <<'PY'
import random, sqlite3, sys, uuid
db = sqlite3.connect(sys.argv[1])
n, scores = int(sys.argv[2]), int(sys.argv[3])
rows = ((str(uuid.UUID(int=random.getrandbits(128), version=4)), f"seed{i}", random.randrange(scores))
        for i in range(n))
db.executemany("INSERT INTO leaderboard_records (leaderboard_id, expiry_time, owner_id, username,"
               " score, subscore, num_score, max_num_score, metadata, create_time_ms, update_time_ms)"
               " VALUES ('bench', 0, ?, ?, ?, 0, 1, 0, '{}', 0, 0)", rows)
db.commit()
db.execute("ANALYZE")
db.close()
PY
  fi
}

# rank_load PORT: seconds until a first listing (which loads the ranks) answers.
rank_load() {
  local token
  token=$(curl -s -u defaultkey: -H 'Content-Type: application/json' \
    -d "{\"id\":\"bench-warmup-$RANDOM$RANDOM\"}" "http://127.0.0.1:$1/v2/account/authenticate/device" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
  curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $token" \
    "http://127.0.0.1:$1/v2/leaderboard/bench?limit=1"
}

from_s=$((RAMP_S + 2))
to_s=$((RAMP_S + HOLD_S - 1))
[ "$ENGINES" != "${ENGINES/postgres/}" ] && start_postgres

for engine in $ENGINES; do
  DB=""
  if [ "$engine" = postgres ]; then
    DB=bench_leaderboard
    "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE $DB" >/dev/null
  fi
  data="$work/$engine-data"
  seed "$engine" "$data"
  for kind in write around; do
    rates=$WRITE_RATES
    [ "$kind" = around ] && rates=$AROUND_RATES
    for rate in $rates; do
      for run in $(seq 1 "$RUNS"); do
        tag="$engine-$kind-$rate-$run"
        mkdir -p "$work/$tag"
        port=$(free_port)
        start_muster_on "$engine" "$port" "$data" "$work/settings.toml" "$DB"
        rank_load "$port" >"$work/$tag/rank-load"
        scenario "$work/$tag.toml" "$kind" "$rate"
        "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
          --progress never --out "$work/$tag/out" >"$work/$tag/swarm.log" 2>&1 &
        measure_hold "$port" $! "$work/$tag" "$from_s" "$to_s"
        "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
          >"$work/$tag/window.json" || true
        stop_muster
      done
    done
  done
  if [ "$engine" = postgres ]; then
    # Muster's own write statement (read from its source), `best` on a descending board, on
    # random owners of the seeded table (most of them new: the insert half of the upsert).
    "$root/bench/pgbench-statements.py" leaderboard "$work" "$SCORES"
    for run in $(seq 1 "$RUNS"); do
      "$PG_BIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "$PGBENCH_CLIENTS" \
        -j 2 -T "$PGBENCH_S" -f "$work/muster.sql" "$DB" 2>/dev/null |
        awk '/^tps/ {print $3}' >"$work/pgbench-$run"
    done
  fi
done

"$release_dir/examples/rank_reference" "$RECORDS" 1000000 "$RUNS" "$LIMIT" >"$work/rank-reference.json"

PYTHONPATH="$root/bench" python3 - "$work" "$ENGINES" "$WRITE_RATES" "$AROUND_RATES" "$RUNS" "$P95_BAR_MS" "$PLAYERS" "$HOLD_S" "$RECORDS" <<'PY'
import glob, json, sys
from benchlib import group_commits, hold as hold_window, median as med
work, engines = sys.argv[1], sys.argv[2].split()
write_rates, around_rates = [int(r) for r in sys.argv[3].split()], [int(r) for r in sys.argv[4].split()]
runs, bar, players, hold, records = int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])

steps = []
for engine in engines:
    for kind, rates in (("write", write_rates), ("around", around_rates)):
        for rate in rates:
            for run in range(1, runs + 1):
                tag = f"{engine}-{kind}-{rate}-{run}"
                base = {"engine": engine, "kind": kind, "offered": rate, "run": run}
                try:
                    w = json.load(open(f"{work}/{tag}/window.json"))
                    report = json.load(open(f"{work}/{tag}/out/report.json"))
                except Exception:
                    steps.append({**base, "error": "no report"}); continue
                m = w["metrics"]
                name = "leaderboard_write" if kind == "write" else "leaderboard_around"
                got = m.get(name, {})
                calls = sum(v.get("count", 0) for k, v in m.items() if k.startswith("leaderboard_"))
                secs = w["seconds"] or 1
                steps.append({**base,
                    "achieved": round(got.get("count", 0) / secs),
                    "p50Ms": got.get("p50", 0), "p95Ms": got.get("p95", 0), "p99Ms": got.get("p99", 0),
                    "maxMs": got.get("max", 0),
                    "rankLoadS": round(float(open(f"{work}/{tag}/rank-load").read() or 0), 2),
                    "errors": w["errors"], "failedPlayers": report["failed"], "errorKinds": report["errors"],
                    **hold_window(f"{work}/{tag}", secs, calls),
                    "meanGroupCommit": group_commits(f"{work}/{tag}", hold).get("meanBatch")})

reference = json.load(open(f"{work}/rank-reference.json"))
summary = {}
for engine in engines:
    def per_rate(kind, rates):
        out = []
        for rate in rates:
            got = [s for s in steps if s["engine"] == engine and s["kind"] == kind and s["offered"] == rate and "achieved" in s]
            if not got: continue
            out.append({"offered": rate, "achieved": med([s["achieved"] for s in got]),
                        "p50Ms": med([s["p50Ms"] for s in got]), "p95Ms": med([s["p95Ms"] for s in got]),
                        "p99Ms": med([s["p99Ms"] for s in got]),
                        "musterCpuUsPerCall": med([s["musterCpuUsPerCall"] for s in got]),
                        "machineBusy": med([s["machineBusy"] for s in got]),
                        "rankLoadS": med([s["rankLoadS"] for s in got]),
                        "errors": sum(s["errors"] + s["failedPlayers"] for s in got)})
        return out
    writes, arounds = per_rate("write", write_rates), per_rate("around", around_rates)
    ok = [r for r in writes if r["p95Ms"] <= bar and r["errors"] == 0 and r["achieved"] >= 0.95 * r["offered"]]
    best = max(ok, key=lambda r: r["achieved"]) if ok else None
    entry = {"bestSustainedWritesPerS": best["achieved"] if best else 0,
             "p95MsThere": best["p95Ms"] if best else None,
             "writes": writes, "around": arounds}
    if best:
        entry["writesVsReferenceUpdates"] = round(best["achieved"] / reference["updatesPerS"], 4)
    if arounds:
        top = max(arounds, key=lambda r: r["achieved"] or 0)
        entry["aroundVsReference"] = round((top["achieved"] or 0) / reference["aroundPerS"], 4)
    pg = [float(open(p).read() or 0) for p in sorted(glob.glob(f"{work}/pgbench-*"))]
    if engine == "postgres" and pg:
        entry["pgbenchTps"] = round(med(pg))
        entry["pgbenchRuns"] = [round(x) for x in pg]
        if best: entry["writesVsPgbench"] = round(best["achieved"] / med(pg), 2)
    summary[engine] = entry
print(json.dumps({"bench": "leaderboard", "records": records, "players": players, "holdS": hold,
                  "writeP95BarMs": bar, "rankReference": reference, "summary": summary,
                  "steps": steps}, indent=2))
PY
