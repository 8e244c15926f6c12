#!/usr/bin/env bash
# Chat fanout (Nakama's 2,000,000-player chat test scaled to one machine): 10,000 sockets in 2,000
# rooms of 5 against ONE muster process, 2 swarm workers on 127.0.0.2 and 127.0.0.3. The send rate
# per socket is raised level by level (LEVELS, messages per socket per second); each level is one
# swarm run against the same server (accounts reused, so only the first level creates them). Prints
# JSON: for every level sent/s and delivered/s over the seconds when every player was sending,
# delivery latency p50 / p99 / p99.9 (from each message's intended send time, carried in the
# message), failures and muster's peak RSS; and the highest delivered/s whose delivery p99 stayed
# <= P99_LIMIT_MS. The sweep stops at the first level that misses the limit or has a failure.
# Muster, like Nakama, delivers each message to its sender too, so a full room delivers 5 messages
# per message sent.
#
# NODES=3: the same against a cluster of 3 nodes over a private nats-server (docs/cluster.md),
# one swarm worker per node (WORKERS defaults to NODES when that is more than 2); players are dealt
# to workers round-robin, so every room of 5 has members on every node. RSS and CPU are the
# nodes' sums (NATS's own are reported apart). bench/cluster-chat.sh runs both and gives the ratio.
#
# Usage: bench/chat.sh   (env: RUNS=1 LEVELS="0.5 1 1.5 2 3 4 5 6" WORKERS=2 PLAYERS=10000 CHANNELS=2000
#                          GROUP=5 RAMP_S=8 WAIT_S=10 CHAT_S=20 P99_LIMIT_MS=50 NODES=1 KEEP=0)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
RUNS=${RUNS:-1}
LEVELS=${LEVELS:-"0.5 1 1.5 2 3 4 5 6"}
NODES=${NODES:-1}
WORKERS=${WORKERS:-$((NODES > 2 ? NODES : 2))}
PLAYERS=${PLAYERS:-10000}
CHANNELS=${CHANNELS:-2000}
GROUP=${GROUP:-5}
RAMP_S=${RAMP_S:-8}
WAIT_S=${WAIT_S:-10}
CHAT_S=${CHAT_S:-20}
P99_LIMIT_MS=${P99_LIMIT_MS:-50}

build_release
work=$(mktemp -d /tmp/chat-bench.XXXXXX)
SAMPLER_PID=""
NODE_PIDS=()
NATS_PID=""
stop_nodes() {
  local pid
  for pid in "${NODE_PIDS[@]}"; do MUSTER_PID=$pid; stop_muster; done
  NODE_PIDS=()
}
trap '[ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null; stop_nodes; [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null; remove_work_dir "$work"' EXIT
if [ "$NODES" -gt 1 ]; then
  command -v nats-server >/dev/null || { echo "NODES>1 needs nats-server (scripts/test installs it)" >&2; exit 1; }
  nats_port=$(free_port)
  nats-server -a 127.0.0.1 -p "$nats_port" >"$work/nats.log" 2>&1 &
  NATS_PID=$!
  export MUSTER_CLUSTER__NATS_URL="nats://127.0.0.1:$nats_port"
  # Several nodes on one machine: no invite-link listener (its default port would be shared).
  export MUSTER_LINKS__LISTEN=
  sleep 0.3
fi

# start_nodes DIR: NODES Muster processes (a cluster when more than one); sets NODE_PIDS and
# TARGETS (their URLs, comma-separated), and waits until each counts them all.
start_nodes() {
  local urls=() n port
  for n in $(seq 1 "$NODES"); do
    port=$(free_port)
    [ "$NODES" -gt 1 ] && export MUSTER_CLUSTER__NODE_NAME="node-$n"
    start_muster "$port" "$1/node-$n"
    NODE_PIDS+=("$MUSTER_PID")
    MUSTER_PID=""
    urls+=("http://127.0.0.1:$port")
  done
  TARGETS=$(IFS=,; echo "${urls[*]}")
  if [ "$NODES" -gt 1 ]; then
    local url i
    for url in "${urls[@]}"; do
      for i in $(seq 1 100); do
        [ "$(curl -s "$url/metrics" | awk '/^muster_cluster_nodes / {print $2}')" = "$NODES" ] && break
        sleep 0.1
      done
    done
  fi
}

# nodes_rss_kb / nodes_cpu_s: the sums over the nodes.
nodes_rss_kb() {
  local pid total=0
  for pid in "${NODE_PIDS[@]}"; do total=$((total + $(rss_kb "$pid"))); done
  echo "$total"
}

# chat_scenario FILE RATE: every player joins its room, waits until all have joined, sends RATE
# messages a second on average (intervals uniform in [0.5, 1.5] / RATE s) for CHAT_S seconds, then
# waits 3 s for the last deliveries.
chat_scenario() {
  local low high
  low=$(python3 -c "print(0.5 / $2)")
  high=$(python3 -c "print(1.5 / $2)")
  cat >"$1" <<TOML
name = "chat-bench-$2"
timeout_s = 10
grace_s = 10

[[phases]]
name = "ramp"
duration_s = $RAMP_S
players = $PLAYERS

[[phases]]
name = "hold"
duration_s = $((WAIT_S + CHAT_S + 6))

[[steps]]
do = "authenticate"
reuse_accounts = true

[[steps]]
do = "connect"

[[steps]]
do = "chat_join"
channels = $CHANNELS
group_size = $GROUP
room_prefix = "bench"

[[steps]]
do = "wait"
duration_s = $WAIT_S

[[steps]]
do = "chat"
send_interval_s = [$low, $high]
message_bytes = [10, 100]
duration_s = $CHAT_S

[[steps]]
do = "wait"
duration_s = 3
TOML
}

# cpu_s PID: user + system CPU seconds a process has used so far.
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}

nodes_cpu_s() {
  local pid
  for pid in "${NODE_PIDS[@]}"; do cpu_s "$pid"; done | awk '{s += $1} END {print s + 0}'
}

# level_result REPORT RSS_FILE RATE MUSTER_CPU_S NATS_CPU_S: one level's figures as a JSON line.
level_result() {
  python3 - "$@" "$RAMP_S" "$WAIT_S" "$CHAT_S" "$P99_LIMIT_MS" <<'PY'
import json, sys
report, rss_file, rate, muster_cpu, nats_cpu, ramp, wait, chat, limit = sys.argv[1:10]
ramp, wait, chat, limit, muster_cpu = int(ramp), int(wait), int(chat), float(limit), float(muster_cpu)
r = json.load(open(report))
samples = [tuple(float(x) for x in l.split()) for l in open(rss_file) if len(l.split()) == 3]
samples = [(s[0] - samples[0][0], s[1], s[2]) for s in samples]
rss = [int(s[1]) for s in samples]
# Every player is sending from (last arrival + wait) to (first arrival + wait + chat); keep one
# second clear of each edge.
window = [row for row in r["timeseries"] if ramp + wait + 1 <= row["t"] < wait + chat - 1]
secs = max(len(window), 1)
# Muster's CPU over the same window, from the samples nearest its edges (the sampler starts just
# before swarm, so its clock and the report's agree to a fraction of a second).
def cpu_at(t):
    return min(samples, key=lambda s: abs(s[0] - t)) if samples else None
window_cpu = None
if samples and window:
    a, b = cpu_at(window[0]["t"]), cpu_at(window[-1]["t"] + 1)
    if b[0] > a[0]:
        window_cpu = (b[2] - a[2], b[0] - a[0])
d = r["metrics"].get("chat_delivery", {})
c = r["counters"]
p99 = d.get("percentile99")
print(json.dumps({
    "ratePerSocket": float(rate),
    "players": r["players"], "failed": r["failed"], "errors": r["errors"],
    "windowS": len(window),
    "sentPerS": round(sum(row.get("chatSent", 0) for row in window) / secs),
    "deliveredPerS": round(sum(row.get("chatDelivered", 0) for row in window) / secs),
    "chatSent": c.get("chatSent", 0), "chatAcked": c.get("chatAcked", 0),
    "chatDelivered": c.get("chatDelivered", 0),
    "deliveryP50Ms": d.get("percentile50"), "deliveryP99Ms": p99,
    "deliveryP999Ms": d.get("percentile99point9"), "deliveryMaxMs": d.get("max"),
    "worstSecondP99Ms": max((row["p99"].get("chat_delivery", 0) for row in window), default=None),
    "ackP99Ms": r["metrics"].get("chat_ack", {}).get("percentile99"),
    "clientLagP99Ms": r["metrics"].get("client_lag", {}).get("percentile99"),
    "musterPeakRssKb": max(rss) if rss else None,
    "musterCpuS": round(muster_cpu, 2),
    "natsCpuS": round(float(nats_cpu), 2),
    # Muster's CPU while every player was sending: per second, and per delivery.
    "windowMusterCpuPerS": round(window_cpu[0] / window_cpu[1], 3) if window_cpu else None,
    "musterCpuUsPerDelivery": round(window_cpu[0] / window_cpu[1] * 1e6 / (sum(row.get("chatDelivered", 0) for row in window) / secs), 2) if window_cpu and sum(row.get("chatDelivered", 0) for row in window) else None,
    # Whole run (auth, joins and all): a figure less sensitive to other load on the machine.
    "deliveredPerMusterCpuS": round(c.get("chatDelivered", 0) / muster_cpu) if muster_cpu else None,
    "workerCpuS": [w["cpuS"] for w in r["workers"]],
    "pass": r["failed"] == 0 and p99 is not None and p99 <= limit,
}))
PY
}

for run in $(seq 1 "$RUNS"); do
  start_nodes "$work/muster-$run"
  : >"$work/levels-$run"
  for rate in $LEVELS; do
    chat_scenario "$work/chat-$run-$rate.toml" "$rate"
    # Sample muster's RSS and CPU once a second (bounded: at most 10 minutes per level), each
    # line "unix-time rss-kb cpu-s", to take the CPU of the sending window alone.
    ( for _ in $(seq 1 600); do echo "$(date +%s.%N) $(nodes_rss_kb) $(nodes_cpu_s)"; sleep 1; done ) \
      >"$work/rss-$run-$rate" 2>/dev/null &
    SAMPLER_PID=$!
    cpu_before=$(nodes_cpu_s)
    nats_cpu_before=$([ -n "$NATS_PID" ] && cpu_s "$NATS_PID" || echo 0)
    "$swarm_bin" run "$work/chat-$run-$rate.toml" --target "$TARGETS" \
      --workers "$WORKERS" --progress never --out "$work/run-$run-$rate" >/dev/null || true
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
    cpu_used=$(python3 -c "print($(nodes_cpu_s) - $cpu_before)")
    nats_cpu=$(python3 -c "print($([ -n "$NATS_PID" ] && cpu_s "$NATS_PID" || echo 0) - $nats_cpu_before)")
    level_result "$work/run-$run-$rate/report.json" "$work/rss-$run-$rate" "$rate" "$cpu_used" "$nats_cpu" | tee -a "$work/levels-$run" >&2
    if ! tail -n 1 "$work/levels-$run" | grep -q '"pass": true'; then break; fi
  done
  stop_nodes
done

PYTHONPATH="$(dirname "$0")" python3 - "$work" "$RUNS" "$PLAYERS" "$CHANNELS" "$GROUP" "$P99_LIMIT_MS" "$NODES" <<'PY'
import json, sys
from benchlib import best_medians, sweeps
work, runs, players, channels, group, limit, nodes = sys.argv[1:8]
out = sweeps(work, runs)
print(json.dumps({
    "bench": "chat",
    "nodes": int(nodes),
    "players": int(players), "channels": int(channels), "groupSize": int(group),
    "p99LimitMs": float(limit),
    "median": best_medians(out, ["deliveredPerS", "sentPerS", "deliveryP50Ms", "deliveryP99Ms",
                                   "deliveryP999Ms", "musterPeakRssKb",
                                   "deliveredPerMusterCpuS", "musterCpuUsPerDelivery"]),
    "targetDeliveredPerS": 200000,
    "runs": out,
}, indent=2))
PY
