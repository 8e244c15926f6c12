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
  local mean lo hi
  mean=$(python3 -c "print($PLAYERS / $2)")
  lo=$(python3 -c "print(round($mean * 0.5, 4))")
  hi=$(python3 -c "print(round($mean * 1.5, 4))")
  cat >"$1" <<TOML
name = "economy-bench-$2"
timeout_s = 10
grace_s = 10

[[phases]]
name = "ramp"
duration_s = $RAMP_S
players = $PLAYERS

[[phases]]
name = "hold"
duration_s = $HOLD_S

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "rpc"
interval_s = [$lo, $hi]
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
      swarm_pid=$!
      # The hold window, measured from the server's side too.
      sleep "$from_s"
      curl -s "http://127.0.0.1:$port/metrics" >"$work/$tag/metrics-from"
      cpu_from=$(cpu_ticks "$MUSTER_PID"); machine_from=$(machine_ticks)
      swarm_from=$(tree_ticks "$swarm_pid"); disk_from=$(disk_bytes "$MUSTER_PID")
      sleep $((to_s - from_s))
      curl -s "http://127.0.0.1:$port/metrics" >"$work/$tag/metrics-to"
      cpu_to=$(cpu_ticks "$MUSTER_PID"); machine_to=$(machine_ticks)
      swarm_to=$(tree_ticks "$swarm_pid"); disk_to=$(disk_bytes "$MUSTER_PID")
      wait "$swarm_pid" || true
      echo "$cpu_from $cpu_to $machine_from $machine_to $(getconf CLK_TCK) $swarm_from $swarm_to $disk_from $disk_to" >"$work/$tag/cpu"
      "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
        >"$work/$tag/window.json"
      stop_muster
    done
  done
done

python3 - "$work" "$ENGINES" "$RATES" "$RUNS" "$P95_BAR_MS" "$PLAYERS" "$HOLD_S" <<'PY'
import json, re, statistics, sys
work, engines, rates, runs, bar = sys.argv[1], sys.argv[2].split(), [int(r) for r in sys.argv[3].split()], int(sys.argv[4]), float(sys.argv[5])
players, hold = int(sys.argv[6]), int(sys.argv[7])

def histogram(path):
    buckets, total, count = {}, 0.0, 0
    for line in open(path):
        m = re.match(r'muster_db_group_commit_size_bucket\{le="([^"]+)"\} (\S+)', line)
        if m: buckets[m.group(1)] = float(m.group(2))
        if line.startswith("muster_db_group_commit_size_sum "): total = float(line.split()[1])
        if line.startswith("muster_db_group_commit_size_count "): count = float(line.split()[1])
    return buckets, total, count

def batches(tag):
    b1, s1, c1 = histogram(f"{work}/{tag}/metrics-from")
    b2, s2, c2 = histogram(f"{work}/{tag}/metrics-to")
    commits = c2 - c1
    if commits <= 0: return {"commits": 0}
    # Cumulative bucket counts over the window, and the smallest bound holding half / 99 %.
    cum = sorted(((float("inf") if k == "+Inf" else float(k), b2.get(k, 0) - b1.get(k, 0)) for k in b2))
    def bound(q):
        for le, n in cum:
            if n >= q * commits: return le
        return None
    return {"commits": int(commits), "commitsPerS": round(commits / max(1, hold - 3), 1),
            "meanBatch": round((s2 - s1) / commits, 1), "p50BatchAtMost": bound(0.5), "p99BatchAtMost": bound(0.99),
            "writesPerCommitBuckets": {("inf" if le == float("inf") else int(le)): int(n) for le, n in cum}}

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
            cf, ct, mf_busy, mf_total, mt_busy, mt_total, hz, sf, st, df, dt = map(float, open(f"{work}/{tag}/cpu").read().split())
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
                "musterCpuCores": round((ct - cf) / hz / secs, 2),
                "musterCpuUsPerCall": round((ct - cf) / hz / max(1, calls) * 1e6, 1),
                "swarmCpuCores": round((st - sf) / hz / secs, 2),
                "musterDiskBytesPerCall": round((dt - df) / max(1, calls)),
                "machineBusy": round((mt_busy - mf_busy) / max(1, mt_total - mf_total), 2),
                "groupCommit": batches(tag),
            })

def med(xs): return statistics.median(xs) if xs else None
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
