#!/usr/bin/env bash
# The GraphQL read gateway (docs/gateway.md), against mock origins on this machine. Prints one
# JSON object with three parts:
#   - stampede: the cache-stampede experiment published for AWS AppSync's resolver cache. USERS swarm
#     players ramp in over 10 s, then each queries `items(category: "c<1..KEYS>")` at random
#     intervals giving RATE queries/s in all, for DURATION_S; the origin answers after DELAY_MS;
#     the field's TTL is TTL_S (stale-while-revalidate as long again, XFetch β = 1). Reported:
#     queries/s, origin calls per key per TTL over the hold (AppSync without protection: ~500), and
#     the query p99 in every 5 s window of the hold — the highest window against the median one (a
#     spike after expiries would show).
#   - hits: wrk (keep-alive, HIT_CONNS connections, HIT_S seconds) on one cached key: queries/s,
#     p50/p99, Muster's CPU, queries/s per Muster core; and in the same sitting wrk on
#     /healthcheck (a static answer of the same HTTP stack) for the ratio and the p99 added.
#   - mass: MASS_KEYS keys of a second field (TTL MASS_TTL_S, origin concurrency
#     MASS_CONCURRENCY, 20 ms origin) are cached, left to expire together, then all asked for
#     within a few seconds: answers by cache status, fetch failures, and the most calls the
#     origin ever had in flight.
#
# Usage: bench/gateway.sh
#   env: USERS=2000 RATE=2000 DURATION_S=600 TTL_S=60 DELAY_MS=500 KEYS=20 WORKERS=2
#        HIT_S=10 HIT_CONNS=32 MASS_KEYS=10000 MASS_TTL_S=10 MASS_CONCURRENCY=8 KEEP=0
# Needs wrk (Debian's package).
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
USERS=${USERS:-2000}
RATE=${RATE:-2000}
DURATION_S=${DURATION_S:-600}
TTL_S=${TTL_S:-60}
DELAY_MS=${DELAY_MS:-500}
KEYS=${KEYS:-20}
WORKERS=${WORKERS:-2}
HIT_S=${HIT_S:-10}
HIT_CONNS=${HIT_CONNS:-32}
MASS_KEYS=${MASS_KEYS:-10000}
MASS_TTL_S=${MASS_TTL_S:-10}
MASS_CONCURRENCY=${MASS_CONCURRENCY:-8}
API_KEY=bench-gateway-key
command -v wrk >/dev/null || { echo "gateway.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }

build_release
(cd "$root" && cargo build --release -p muster-gateway --bin muster-mock-origin --quiet) >&2
work=$(mktemp -d /tmp/bench-gateway.XXXXXX)
MOCK_PIDS=()
cleanup() {
  stop_muster
  for pid in "${MOCK_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  remove_work_dir "$work"
}
trap cleanup EXIT

# start_mock DELAY_MS: a mock origin on a free port; prints its port.
start_mock() {
  local port
  port=$(free_port)
  "$release_dir/muster-mock-origin" --listen "127.0.0.1:$port" --delay-ms "$1" >/dev/null 2>&1 &
  MOCK_PIDS+=($!)
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$port/_stats" && break; sleep 0.1; done
  echo "$port"
}
slow_port=$(start_mock "$DELAY_MS")
fast_port=$(start_mock 20)

cat >"$work/muster.toml" <<TOML
[gateway]
api_key = "$API_KEY"
requests_per_ip_per_sec = 0

[[gateway.origins]]
name = "shop"
base_url = "http://127.0.0.1:$slow_port"
concurrency = 64
timeout_ms = 5000

[[gateway.origins]]
name = "feed"
base_url = "http://127.0.0.1:$fast_port"
concurrency = $MASS_CONCURRENCY
timeout_ms = 60000

[[gateway.types]]
name = "Item"
fields = { id = "ID", name = "String", price = "Int" }

[[gateway.fields]]
name = "items"
origin = "shop"
path = "/items/{category}"
arguments = ["category"]
returns = "[Item]"
select = "/items"
ttl_s = $TTL_S
stale_while_revalidate_s = $TTL_S
early_refresh_beta = 1.0

[[gateway.fields]]
name = "feed"
origin = "feed"
path = "/feed/{category}"
arguments = ["category"]
returns = "[Item]"
select = "/items"
ttl_s = $MASS_TTL_S
stale_while_revalidate_s = 3600
early_refresh_beta = 0.0
TOML
port=$(free_port)
base="http://127.0.0.1:$port"
MUSTER_CONFIG="$work/muster.toml" start_muster "$port" "$work/muster"
metrics() { curl -s "$base/metrics"; }
mock_calls() { curl -s "http://127.0.0.1:$1/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"])'; }

# --- 1. The AppSync cache-stampede experiment (the JSON's `stampede`) -------------------------------
mean=$(python3 -c "print($USERS / $RATE)")
cat >"$work/stampede.toml" <<TOML
name = "gateway-stampede"
timeout_s = 10
grace_s = 10

[[phases]]
name = "ramp"
duration_s = 10
players = $USERS

[[phases]]
name = "hold"
duration_s = $DURATION_S

[[steps]]
do = "authenticate"

[[steps]]
do = "graphql"
interval_s = [$(python3 -c "print(round($mean * 0.5, 4))"), $(python3 -c "print(round($mean * 1.5, 4))")]
queries = [{ id = "items", query = '{ items(category: "c\${rand:1:$KEYS}") { id name price } }' }]
TOML
hold_from=12
hold_to=$((10 + DURATION_S - 1))
"$swarm_bin" run "$work/stampede.toml" --target "$base" --workers "$WORKERS" --progress never \
  --out "$work/stampede" >"$work/stampede.log" 2>&1 &
swarm_pid=$!
sleep "$hold_from"
calls_from=$(mock_calls "$slow_port")
sleep $((hold_to - hold_from))
calls_to=$(mock_calls "$slow_port")
wait "$swarm_pid" || true
"$swarm_bin" window "$work/stampede/report.json" --from-s "$hold_from" --to-s "$hold_to" >"$work/stampede-hold.json"
: >"$work/stampede-windows"
for from in $(seq "$hold_from" 5 $((hold_to - 5))); do
  "$swarm_bin" window "$work/stampede/report.json" --from-s "$from" --to-s $((from + 5)) \
    | python3 -c 'import json,sys; m=json.load(sys.stdin)["metrics"].get("graphql_items",{}); print(m.get("p99","null"))' \
    >>"$work/stampede-windows"
done

# --- 2. Cache hits, and the static reference -----------------------------------------------------
curl -s -o /dev/null -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
  -d '{"query":"{ items(category: \"c1\") { id name price } }"}' "$base/graphql"
cpu_from=$(cpu_ticks "$MUSTER_PID"); t_from=$(date +%s%N)
KEY_PREFIX=c KEYS=1 FIELD=items API_KEY=$API_KEY THREADS=2 \
  wrk -t2 -c"$HIT_CONNS" -d"${HIT_S}s" --latency -s "$root/bench/gateway/query.lua" "$base/graphql" \
  >"$work/hits.txt"
cpu_to=$(cpu_ticks "$MUSTER_PID"); t_to=$(date +%s%N)
echo "$cpu_from $cpu_to $t_from $t_to $(getconf CLK_TCK)" >"$work/hits-cpu"
wrk -t2 -c"$HIT_CONNS" -d"${HIT_S}s" --latency "$base/healthcheck" >"$work/static.txt"

# --- 3. Mass expiry ---------------------------------------------------------------------------------
# Cache every key (each thread walks its share in turn), wait for all to expire, ask for all again.
prime_s=$(python3 -c "import math; print(max(5, math.ceil($MASS_KEYS * 0.02 / $MASS_CONCURRENCY * 1.5) + 5))")
KEY_PREFIX=m KEYS=$MASS_KEYS FIELD=feed API_KEY=$API_KEY THREADS=2 \
  wrk -t2 -c16 -d"${prime_s}s" --latency -s "$root/bench/gateway/query.lua" "$base/graphql" >"$work/prime.txt"
metrics >"$work/mass-before"
primed=$(mock_calls "$fast_port")
sleep $((MASS_TTL_S + 1))
KEY_PREFIX=m KEYS=$MASS_KEYS FIELD=feed API_KEY=$API_KEY THREADS=2 \
  wrk -t2 -c64 -d3s --latency -s "$root/bench/gateway/query.lua" "$base/graphql" >"$work/mass.txt"
sleep $(python3 -c "import math; print(math.ceil($MASS_KEYS * 0.02 / $MASS_CONCURRENCY) + 5)")
metrics >"$work/mass-after"
curl -s "http://127.0.0.1:$fast_port/_stats" >"$work/mass-stats.json"

python3 - "$work" "$root" "$USERS" "$RATE" "$DURATION_S" "$TTL_S" "$KEYS" "$calls_from" "$calls_to" \
  "$MASS_KEYS" "$MASS_CONCURRENCY" "$primed" <<'PY'
import json, statistics, subprocess, sys
work, root = sys.argv[1], sys.argv[2]
users, rate, duration, ttl, keys = (float(x) for x in sys.argv[3:8])
calls_from, calls_to, mass_keys, mass_conc, primed = (int(x) for x in sys.argv[8:13])

def wrk(name):
    out = subprocess.run(["python3", f"{root}/bench/links/wrk_json.py"], stdin=open(f"{work}/{name}"),
                         capture_output=True, text=True).stdout
    return json.loads(out)

def metric(path, name):
    for line in open(path):
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

hold = json.load(open(f"{work}/stampede-hold.json"))
items = hold["metrics"].get("graphql_items", {})
report = json.load(open(f"{work}/stampede/report.json"))
windows = [float(x) for x in open(f"{work}/stampede-windows").read().split() if x not in ("null", "None")]
hold_s = hold.get("seconds") or 1
ttls = max(1.0, hold_s / ttl)
stampede = {
    "users": int(users), "offeredPerS": rate, "holdS": hold_s, "ttlS": ttl, "keys": int(keys),
    "queriesPerS": round(items.get("count", 0) / hold_s, 1),
    "p50Ms": items.get("p50"), "p99Ms": items.get("p99"), "maxMs": items.get("max"),
    "failedPlayers": report["failed"], "errors": report["errors"],
    "originCallsInHold": calls_to - calls_from,
    "originCallsPerKeyPerTtl": round((calls_to - calls_from) / (keys * ttls), 2),
    "windowP99Ms": {"median": statistics.median(windows) if windows else None,
                    "highest": max(windows) if windows else None, "windows": len(windows)},
}

hits, static = wrk("hits.txt"), wrk("static.txt")
cf, ct, tf, tt, hz = map(float, open(f"{work}/hits-cpu").read().split())
cores = (ct - cf) / hz / ((tt - tf) / 1e9)
hit = {"rps": hits["rps"], "p50Ms": hits["p50_ms"], "p99Ms": hits["p99_ms"], "errors": hits["errors"],
       "musterCores": round(cores, 2),
       "rpsPerMusterCore": round(hits["rps"] / cores) if hits["rps"] and cores else None,
       "staticRps": static["rps"], "staticP99Ms": static["p99_ms"],
       "ratioToStatic": round(hits["rps"] / static["rps"], 2) if hits["rps"] and static["rps"] else None,
       "p99AddedMs": round(hits["p99_ms"] - static["p99_ms"], 3) if hits["p99_ms"] is not None and static["p99_ms"] is not None else None}

def lookups(path, status):
    return metric(path, f'muster_gateway_lookups_total{{status="{status}"}}')

b, a = f"{work}/mass-before", f"{work}/mass-after"
stats = json.load(open(f"{work}/mass-stats.json"))
mass_wrk = wrk("mass.txt")
mass = {"keys": mass_keys, "originConcurrency": mass_conc, "primedOriginCalls": primed,
        "answered": mass_wrk["rps"] and round(mass_wrk["rps"] * 3), "httpErrors": mass_wrk["errors"],
        "byStatus": {s: int(lookups(a, s) - lookups(b, s)) for s in ("hit", "miss", "coalesced", "stale", "stale_if_error")},
        "fetchFailures": int(metric(a, 'muster_gateway_fetches_total{kind="failed"}')),
        "originCallsAfterExpiry": stats["calls"] - primed,
        "originMostInFlight": stats["mostInFlight"]}
print(json.dumps({"bench": "gateway", "stampede": stampede, "hits": hit, "mass": mass}, indent=2))
PY
