#!/usr/bin/env bash
# The console's status data for a 3-node cluster (docs/console.md): NODES Muster nodes on one
# private PostgreSQL and a private nats-server, each with its console on; after WARM_S seconds of
# history, one operator's requests to node 1's console, one at a time over a keep-alive
# connection:
#   poll      the page's poll: the points after the last it has (5-minute view), REQUESTS times;
#   minutes   a first load of the last 5 minutes at 1 s, LOADS times;
#   hour      a first load of the last hour at 5 s (every=5), LOADS times;
#   week      a first load of the last 7 days at 15 min (every=15), LOADS times;
# each with its p50, p99 and bytes; every node's data is in each answer (the other nodes' over
# NATS). Plus each node's RSS and CPU over the warm-up (the sampler's cost is in
# examples/console_history, which fills a node's whole hour of 150 series).
#
# Prints JSON. Env: NODES=3 WARM_S=60 REQUESTS=300 LOADS=30 KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
NODES=${NODES:-3}
WARM_S=${WARM_S:-60}
REQUESTS=${REQUESTS:-300}
LOADS=${LOADS:-30}
PASSWORD=bench-console-pw

build_release
command -v nats-server >/dev/null || { echo "needs nats-server (scripts/test installs it)" >&2; exit 1; }
work=$(mktemp -d /tmp/bench-console.XXXXXX)
PIDS=()
NATS_PID=""
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null || true
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT

start_postgres
nats_port=$(free_port)
nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
NATS_PID=$!
"$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE bench_console" >/dev/null
consoles=()
for n in $(seq 1 "$NODES"); do
  console_port=$(free_port)
  consoles+=("http://127.0.0.1:$console_port")
  MUSTER_CLUSTER__NATS_URL="nats://127.0.0.1:$nats_port" MUSTER_CLUSTER__NODE_NAME="node$n" \
  MUSTER_CONSOLE__LISTEN="127.0.0.1:$console_port" MUSTER_CONSOLE__ADMIN_PASSWORD="$PASSWORD" \
  MUSTER_LINKS__LISTEN="" MUSTER_GRPC__LISTEN="" \
    start_muster_on postgres "$(free_port)" "$work/node$n" "" bench_console
  PIDS+=("$MUSTER_PID")
done
ticks_before=()
for pid in "${PIDS[@]}"; do ticks_before+=("$(cpu_ticks "$pid")"); done
sleep "$WARM_S"
ticks_after=()
rss=()
for pid in "${PIDS[@]}"; do
  ticks_after+=("$(cpu_ticks "$pid")")
  rss+=("$(rss_kb "$pid")")
done

python3 - "${consoles[0]}" "$PASSWORD" "$REQUESTS" "$LOADS" "$NODES" "$WARM_S" \
  "${ticks_before[*]}" "${ticks_after[*]}" "${rss[*]}" "$(getconf CLK_TCK)" <<'PY'
import http.client, json, sys, time, urllib.parse
base, password, requests, loads, nodes, warm_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
before = [int(x) for x in sys.argv[7].split()]
after = [int(x) for x in sys.argv[8].split()]
rss = [int(x) for x in sys.argv[9].split()]
hz = int(sys.argv[10])
host = urllib.parse.urlparse(base).netloc
conn = http.client.HTTPConnection(host, timeout=10)
conn.request("POST", "/api/login", json.dumps({"username": "admin", "password": password}), {"content-type": "application/json"})
answer = conn.getresponse()
cookie = answer.getheader("set-cookie").split(";")[0]
answer.read()

def get(path):
    started = time.perf_counter()
    conn.request("GET", path, headers={"cookie": cookie})
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status == 200, (response.status, body[:200])
    return elapsed, body

def pct(values, p):
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round((len(values) - 1) * p)))], 3)

ranges = {
    "minutes": "resolution=second&every=1&span=300",
    "hour": "resolution=second&every=5&span=3600",
    "week": "resolution=minute&every=15&span=604800",
}
result = {"bench": "console", "nodes": nodes, "warmS": warm_s}
# Every node answers in each.
_, body = get(f"/api/status?{ranges['minutes']}&after=0")
first = json.loads(body)
answered = [n["node"] for n in first["nodes"] if "window" in n]
result["nodesAnswering"] = answered
result["seriesPerNode"] = {n["node"]: len(n["window"]["series"]) for n in first["nodes"] if "window" in n}
for name, query in ranges.items():
    times, size = [], 0
    for _ in range(loads):
        t, body = get(f"/api/status?{query}&after=0")
        times.append(t)
        size = len(body)
    result[name] = {"p50Ms": pct(times, 0.5), "p99Ms": pct(times, 0.99), "bytes": size}
# The page's poll: what came after the last point it has.
end = max(n["window"]["end"] for n in first["nodes"] if "window" in n)
times, sizes = [], []
for i in range(requests):
    t, body = get(f"/api/status?{ranges['minutes']}&after={end}")
    times.append(t)
    sizes.append(len(body))
    page = json.loads(body)
    end = max([end] + [n["window"]["end"] for n in page["nodes"] if "window" in n])
    time.sleep(0.02)
result["poll"] = {"p50Ms": pct(times, 0.5), "p99Ms": pct(times, 0.99), "bytesP50": pct(sizes, 0.5)}
result["perNode"] = [
    {"node": f"node{i + 1}", "rssKb": rss[i], "cpuShareOverWarmUp": round((after[i] - before[i]) / hz / warm_s, 4)}
    for i in range(nodes)
]
print(json.dumps(result, indent=2))
PY
