#!/usr/bin/env bash
# PostgreSQL at full speed (docs/storage.md): new device accounts per second against one release
# Muster on a private PostgreSQL (Debian's, durable defaults: fsync and synchronous_commit on), and
# the physical reference in the same sitting: pgbench running a comparable single-row insert (an
# account-shaped row: uuid, unique name, two timestamps), one transaction per insert, as a server
# without group commit would.
#
# Accounts: for each rate in ACCOUNT_RATES and each of RUNS runs, a fresh Muster on a fresh
# database; ACCOUNT_RATE * ACCOUNTS_S players arrive at an even rate, each creating a device account
# (authenticate, create=true) and doing nothing else. Reported per run: accounts created per second
# while they arrived (swarm's report, by phase), the authenticate latency from each player's
# intended start (p50/p95/p99/max), Muster's and PostgreSQL's CPU (cores), group commits per second
# and their mean size (Muster's /metrics); then medians per rate.
# pgbench: PGBENCH_S seconds at each concurrency in PGBENCH_CLIENTS (the default pairs Muster's
# writer connections with the client count a busy server would use), transactions per second,
# median of RUNS; Muster's ratio is accounts/s over the best pgbench figure.
# Durable RPC writes on PostgreSQL are bench/economy.sh's (ENGINES=postgres).
# Each player opens its own connection, so swarm's share of the two cores grows with the number
# of players: runs are kept short (ACCOUNTS_S) so that the load generator is not the limit.
#
# Usage: bench/postgres.sh
#   env: ACCOUNT_RATES="10000 12500" ACCOUNTS_S=6 RUNS=3 WORKERS=2 PGBENCH_S=10
#        PGBENCH_CLIENTS="4 64" WRITERS=4 (database.writer_connections) LOG=warn KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
ACCOUNT_RATES=${ACCOUNT_RATES:-"10000 12500"}
ACCOUNTS_S=${ACCOUNTS_S:-6}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
PGBENCH_S=${PGBENCH_S:-10}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-"4 64"}
WRITERS=${WRITERS:-4}

build_release
work=$(mktemp -d /tmp/bench-postgres.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT
start_postgres
pg_pid=$(head -n 1 "$PG_DIR/data/postmaster.pid")
# CPU of the postmaster and every backend.
pg_ticks() { tree_ticks "$pg_pid"; }
hz=$(getconf CLK_TCK)

# --- Muster: device accounts ---------------------------------------------------------------------
for rate in $ACCOUNT_RATES; do
  for run in $(seq 1 "$RUNS"); do
    tag="accounts-$rate-$run"
    port=$(free_port)
    MUSTER_DATABASE__WRITER_CONNECTIONS=$WRITERS start_muster_on postgres "$port" "$work/$tag"
    players=$((rate * ACCOUNTS_S))
    accounts_scenario "$work/$tag.toml" "$players" "$ACCOUNTS_S"
    # swarm budgets an open file per player and worker: enough workers for every player.
    workers=$(( WORKERS > (players + 17999) / 18000 ? WORKERS : (players + 17999) / 18000 ))
    curl -s "http://127.0.0.1:$port/metrics" >"$work/$tag/metrics-from"
    cpu_from=$(cpu_ticks "$MUSTER_PID"); pg_from=$(pg_ticks); t_from=$(date +%s%N)
    "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" --workers "$workers" \
      --progress never --out "$work/$tag/out" >"$work/$tag/swarm.log" 2>&1 || true
    cpu_to=$(cpu_ticks "$MUSTER_PID"); pg_to=$(pg_ticks); t_to=$(date +%s%N)
    curl -s "http://127.0.0.1:$port/metrics" >"$work/$tag/metrics-to"
    echo "$cpu_from $cpu_to $pg_from $pg_to $t_from $t_to $hz" >"$work/$tag/cpu"
    "$swarm_bin" window "$work/$tag/out/report.json" --from-s 0 --to-s 1000000000 \
      >"$work/$tag/window.json"
    stop_muster
  done
done

# --- The reference: pgbench, one insert per transaction ------------------------------------------
"$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE reference" >/dev/null
"$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d reference -c \
  "CREATE TABLE accounts (id uuid PRIMARY KEY, username text NOT NULL UNIQUE,
                          create_time_ms int8 NOT NULL, update_time_ms int8 NOT NULL)" >/dev/null
cat >"$work/insert.sql" <<'SQL'
INSERT INTO accounts (id, username, create_time_ms, update_time_ms)
VALUES (gen_random_uuid(), gen_random_uuid()::text, 0, 0);
SQL
for clients in $PGBENCH_CLIENTS; do
  for run in $(seq 1 "$RUNS"); do
    "$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "$clients" -j 2 \
      -T "$PGBENCH_S" -f "$work/insert.sql" reference >"$work/pgbench-$clients-$run.log" 2>&1 || true
  done
done

python3 - "$work" "$ACCOUNT_RATES" "$RUNS" "$ACCOUNTS_S" "$PGBENCH_CLIENTS" "$WRITERS" <<'PY'
import json, re, statistics, sys
work, rates, runs, seconds = sys.argv[1], [int(r) for r in sys.argv[2].split()], int(sys.argv[3]), int(sys.argv[4])
clients, writers = [int(c) for c in sys.argv[5].split()], int(sys.argv[6])

def counter(path, name):
    for line in open(path):
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

runs_out = []
for rate in rates:
    for run in range(1, runs + 1):
        tag = f"accounts-{rate}-{run}"
        try:
            report = json.load(open(f"{work}/{tag}/out/report.json"))
            window = json.load(open(f"{work}/{tag}/window.json"))
        except Exception:
            runs_out.append({"offered": rate, "run": run, "error": "no report"}); continue
        phase = next((p for p in report.get("phases", []) if p["name"] == "accounts"), {})
        auth = window["metrics"].get("auth", {})
        cf, ct, pf, pt, tf, tt, hz = map(float, open(f"{work}/{tag}/cpu").read().split())
        wall = (tt - tf) / 1e9
        m1, m2 = f"{work}/{tag}/metrics-from", f"{work}/{tag}/metrics-to"
        commits = counter(m2, "muster_db_group_commit_size_count") - counter(m1, "muster_db_group_commit_size_count")
        writes = counter(m2, "muster_db_group_commit_size_sum") - counter(m1, "muster_db_group_commit_size_sum")
        runs_out.append({
            "offered": rate, "run": run,
            "accountsPerS": phase.get("ratesPerS", {}).get("auth", 0.0),
            "created": counter(m2, "muster_accounts_created_total"),
            "p50Ms": auth.get("p50"), "p95Ms": auth.get("p95"), "p99Ms": auth.get("p99"), "maxMs": auth.get("max"),
            "failedPlayers": report["failed"], "errors": report["errors"],
            "musterCores": round((ct - cf) / hz / wall, 2), "postgresCores": round((pt - pf) / hz / wall, 2),
            "groupCommitsPerS": round(commits / wall, 1), "meanBatch": round(writes / commits, 1) if commits else None,
        })

by_rate = []
for rate in rates:
    got = [r for r in runs_out if r["offered"] == rate and "accountsPerS" in r]
    by_rate.append({"offered": rate, "runs": len(got),
                    "accountsPerS": med([r["accountsPerS"] for r in got]),
                    "p99Ms": med([r["p99Ms"] for r in got]),
                    "failedPlayers": sum(r["failedPlayers"] for r in got)})

pgbench = []
for c in clients:
    tps = []
    for run in range(1, runs + 1):
        text = open(f"{work}/pgbench-{c}-{run}.log").read()
        m = re.search(r"tps = ([0-9.]+)", text)
        if m: tps.append(float(m.group(1)))
    pgbench.append({"clients": c, "tpsRuns": tps, "tps": med(tps)})

ok = [r for r in by_rate if r["p99Ms"] is not None and r["p99Ms"] <= 50 and r["failedPlayers"] == 0
      and r["accountsPerS"] >= 0.95 * r["offered"]]
best = max(ok, key=lambda r: r["accountsPerS"]) if ok else None
reference = max((p["tps"] or 0 for p in pgbench), default=0)
print(json.dumps({
    "bench": "postgres", "writerConnections": writers, "accountsSeconds": seconds,
    "summary": {
        "bestAccountsPerSWithP99Under50Ms": best["accountsPerS"] if best else 0,
        "atOffered": best["offered"] if best else None,
        "p99MsThere": best["p99Ms"] if best else None,
        "pgbenchInsertTps": reference,
        "ratioToPgbench": round(best["accountsPerS"] / reference, 2) if best and reference else None,
    },
    "accountsByRate": by_rate, "pgbench": pgbench, "runs": runs_out,
}, indent=2))
PY
