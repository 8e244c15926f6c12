#!/usr/bin/env bash
# Nakama's 2,000,000-player wallet and inventory test on one machine: server-function writes
# (wallet_spend, inventory_grant, half each, over the realtime socket) against one Muster, on
# SQLite and on PostgreSQL, stepping the offered rate up. Each step uses a fresh server and
# database: PLAYERS new accounts (each granted 1,000,000 coins and 1,000,000 items) ramp in over
# RAMP_S, then call at random intervals whose mean gives the step's rate, for HOLD_S. Latency
# percentiles, the achieved rate, Muster's CPU and the group-commit batch sizes are read over the
# hold only (its first 2 s and last 1 s left out). Prints JSON: every step (achieved calls/s;
# p50/p95/p99 of the slower function; Muster's and swarm's CPU in cores and Muster's CPU per call;
# bytes Muster wrote to storage per call; how busy the whole machine was; group-commit batch sizes
# from Muster's /metrics), and per engine the highest rate sustained with p95 <= 26.7 ms (the p95
# the Nakama test reported), no errors, and at least 95 % of the offered rate (medians over RUNS
# runs).
#
# Usage: bench/economy.sh
#   env: RATES="5000 10000 15000 20000 25000 30000" PLAYERS=4000 RAMP_S=10 HOLD_S=30
#        ENGINES="sqlite postgres" WORKERS=2 RUNS=1 LOG=warn KEEP=0 (KEEP=1: keep the work directory)
# PostgreSQL is started privately on 127.0.0.1 (as scripts/test does) with its durable defaults
# (fsync on, synchronous_commit on): acknowledged writes are on disk, as on SQLite. PG_OPTS adds
# server settings (the first PostgreSQL figures in bench/RESULTS.md were taken with
# "-c shared_buffers=256MB").
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RATES=${RATES:-"5000 10000 15000 20000 25000 30000"}
PLAYERS=${PLAYERS:-4000}
RAMP_S=${RAMP_S:-10}
HOLD_S=${HOLD_S:-30}
ENGINES=${ENGINES:-"sqlite postgres"}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-1}
# Muster's log filter; e.g. LOG=muster::store::sqlite_checkpoint=debug,warn shows every checkpoint.
LOG=${LOG:-warn}
P95_BAR_MS=26.7

build_release
work=$(mktemp -d /tmp/bench-economy.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

scenario() { # FILE RATE
  ramp_and_hold "economy-bench-$2" >"$1"
  cat >>"$1" <<TOML

[[steps]]
do = "connect"

[[steps]]
do = "rpc"
interval_s = $(paced_interval "$PLAYERS" "$2")
functions = [
  { id = "wallet_spend", payload = '{"amount": \${rand:1:10}}' },
  { id = "inventory_grant", payload = '{"item": "gem\${rand:1:4}", "count": 1}' },
]
TOML
}

# The scenario's players call the built-in value functions themselves, which Muster allows only
# when the studio opts in (a build from before that setting, run with BENCH_SERVER_BIN, lets them).
if "$muster_bin" config 2>/dev/null | grep -q '^player_builtin_functions'; then
  export MUSTER_RUNTIME__PLAYER_BUILTIN_FUNCTIONS="[wallet_spend, inventory_grant]"
fi
# Nakama's test gives every account 1,000,000 coins and items (Muster's default is none).
export MUSTER_ECONOMY__STARTING_WALLET="{coins=1000000}"
export MUSTER_ECONOMY__STARTING_ITEMS='[{id="item", kind="default", count=1000000}]'

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

PYTHONPATH="$root/bench" python3 - "$work" "$ENGINES" "$RATES" "$RUNS" "$P95_BAR_MS" "$PLAYERS" "$HOLD_S" <<'PY'
import json, sys
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
            spend, grant = m.get("rpc_wallet_spend", {}), m.get("rpc_inventory_grant", {})
            calls = spend.get("count", 0) + grant.get("count", 0)
            # Percentiles of both functions together: the slower function's are a bound; report each.
            secs = w["seconds"] or 1
            report = json.load(open(f"{work}/{tag}/out/report.json"))
            steps.append({
                "engine": engine, "offered": rate, "run": run,
                "achieved": round(calls / secs),
                "p50Ms": max(spend.get("p50", 0), grant.get("p50", 0)),
                "p95Ms": max(spend.get("p95", 0), grant.get("p95", 0)),
                "p99Ms": max(spend.get("p99", 0), grant.get("p99", 0)),
                "byFunction": {k: {x: v[x] for x in ("count", "p50", "p95", "p99", "max")} for k, v in m.items() if k.startswith("rpc_")},
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
                         "p95Ms": med([s["p95Ms"] for s in got]), "errors": sum(s["errors"] + s["failedPlayers"] for s in got)})
    ok = [r for r in per_rate if r["p95Ms"] <= bar and r["errors"] == 0 and r["achieved"] >= 0.95 * r["offered"]]
    best = max(ok, key=lambda r: r["achieved"]) if ok else None
    summary[engine] = {"bestSustainedWritesPerS": best["achieved"] if best else 0,
                       "atOffered": best["offered"] if best else None,
                       "p95MsThere": best["p95Ms"] if best else None, "byRate": per_rate}
print(json.dumps({"bench": "economy", "players": players, "holdS": hold, "p95BarMs": bar,
                  "summary": summary, "steps": steps}, indent=2))
PY
