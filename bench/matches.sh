#!/usr/bin/env bash
# Players in 2-player authoritative matches at 15 Hz (Space Ape Games' match test): PLAYERS swarm
# players authenticate, find a match with the matchmaker (2 per match, the built-in "arena" handler
# at 15 ticks/s), join it over a native transport (TCP, or ENet over UDP) with their token and
# play, sending a movement input 15 times a second, tick-aligned (10 ms ahead of the server's
# tick). Swarm measures RTT (input's intended send → first state echoing it) and client-interval.
# Muster's CPU is read from /proc over the window when every player is playing, with its tick and
# late tick counters from /metrics, and for ENet its datagrams and system calls (recvmmsg,
# sendmmsg). With several TRANSPORTS each run plays them one after the other, so their figures come
# from the same sitting; the JSON gives each transport's medians.
#
# Prints JSON. Usage: bench/matches.sh   (env: PLAYERS=10000 RAMP_S=30 PLAY_S=90 WORKERS=2
#                                          RUNS=1 ALIGN=tick LEAD_MS=10 TRANSPORTS=tcp KEEP=0)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PLAYERS=${PLAYERS:-10000}
RAMP_S=${RAMP_S:-30}
PLAY_S=${PLAY_S:-90}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-1}
ALIGN=${ALIGN:-tick}
LEAD_MS=${LEAD_MS:-10}
TRANSPORTS=${TRANSPORTS:-tcp}

build_release
work=$(mktemp -d /tmp/bench-matches.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT

# Ticks, late ticks, ENet datagrams out and in, sendmmsg and recvmmsg calls.
ticks_and_late() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '
    /^muster_match_ticks_total / {t=$2} /^muster_match_late_ticks_total / {l=$2}
    /^muster_enet_datagrams_total\{direction="out"\} / {o=$2}
    /^muster_enet_datagrams_total\{direction="in"\} / {i=$2}
    /^muster_enet_syscalls_total\{call="sendmmsg"\} / {s=$2}
    /^muster_enet_syscalls_total\{call="recvmmsg"\} / {r=$2}
    END {printf "%d %d %d %d %d %d\n", t, l, o, i, s, r}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for run in $(seq 1 "$RUNS"); do
for transport in $TRANSPORTS; do
  tag="$transport-$run"
  port=$(free_port)
  tcp_port=$(free_port)
  enet_port=$(free_port)
  MUSTER_MATCHMAKER__MATCH_HANDLER="${HANDLER:-arena}" MUSTER_MATCHMAKER__INTERVAL_MS=200 \
  MUSTER_ROOMS__TCP_LISTEN="127.0.0.1:$tcp_port" MUSTER_ENET__LISTEN="127.0.0.1:$enet_port" \
    start_muster "$port" "$work/muster-$tag"
  cat >"$work/scenario-$tag.toml" <<TOML
name = "bench-matches-$transport"
timeout_s = 10
grace_s = 10
[[phases]]
name = "ramp"
duration_s = $RAMP_S
players = $PLAYERS
[[phases]]
name = "play"
duration_s = $((PLAY_S + 5))
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
[[steps]]
do = "matchmake"
count = 2
timeout_s = 30
[[steps]]
do = "disconnect"
[[steps]]
do = "join_match"
transport = "$transport"
tcp_port = $tcp_port
enet_port = $enet_port
[[steps]]
do = "play"
rate_hz = 15
duration_s = $PLAY_S
align = "$ALIGN"
lead_ms = $LEAD_MS
TOML
  "$swarm_bin" run "$work/scenario-$tag.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
    --progress never --out "$work/run-$tag" >/dev/null 2>"$work/swarm-$tag.log" &
  swarm_pid=$!
  # Window: every player is playing from about RAMP_S + 3 s until the first ones stop at PLAY_S.
  sleep $((RAMP_S + 5))
  read -r t1 l1 o1 i1 s1x r1 < <(ticks_and_late "$port")
  c1=$(cpu_ticks "$MUSTER_PID"); s1=$(date +%s.%N)
  sleep $((PLAY_S - RAMP_S - 8))
  read -r t2 l2 o2 i2 s2x r2 < <(ticks_and_late "$port")
  c2=$(cpu_ticks "$MUSTER_PID"); s2=$(date +%s.%N)
  players_now=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^muster_match_players / {print $2}')
  rss=$(rss_kb "$MUSTER_PID")
  wait "$swarm_pid" || true
  echo "$t1 $l1 $c1 $s1 $t2 $l2 $c2 $s2 $players_now $rss $((o2 - o1)) $((i2 - i1)) $((s2x - s1x)) $((r2 - r1))" \
    >"$work/window-$tag"
  stop_muster
done
done

python3 - "$work" "$RUNS" "$(getconf CLK_TCK)" "$TRANSPORTS" <<'PY'
import json, statistics, sys
work, runs, hz, transports = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
out = []
for transport in transports:
  for i in range(1, runs + 1):
    tag = f"{transport}-{i}"
    r = json.load(open(f"{work}/run-{tag}/report.json"))
    (t1, l1, c1, s1, t2, l2, c2, s2, players_now, rss,
     out_dgrams, in_dgrams, sendmmsg, recvmmsg) = open(f"{work}/window-{tag}").read().split()
    secs = float(s2) - float(s1)
    cpu = (int(c2) - int(c1)) / hz
    ticks = int(t2) - int(t1)
    m = r["metrics"]
    rtt, ci = m.get("RTT", {}), m.get("client-interval", {})
    player_ticks = float(players_now) * ticks / max(1, float(players_now) / 2)  # ticks × players per match
    enet = None
    if transport == "enet":
        enet = {
            "datagramsOutPerS": round(int(out_dgrams) / secs),
            "datagramsInPerS": round(int(in_dgrams) / secs),
            "sendmmsgPerS": round(int(sendmmsg) / secs),
            "recvmmsgPerS": round(int(recvmmsg) / secs),
            "datagramsPerSendmmsg": round(int(out_dgrams) / max(1, int(sendmmsg)), 1),
            "datagramsPerRecvmmsg": round(int(in_dgrams) / max(1, int(recvmmsg)), 1),
        }
    out.append({
        "transport": transport, "enet": enet,
        "status": r["status"], "players": r["players"], "successful": r["successful"],
        "failed": r["failed"], "errors": r["errors"],
        "playersInMatchesDuringWindow": int(float(players_now)),
        "windowS": round(secs, 1),
        "RTT": rtt, "clientInterval": ci,
        "rttP99Ms": rtt.get("percentile99"), "rttP999Ms": rtt.get("percentile99point9"),
        "ticksInWindow": ticks, "lateTicksInWindow": int(l2) - int(l1),
        "musterCpuPercent": round(100 * cpu / secs, 1),
        "musterCpuPerPlayerTickUs": round(1e6 * cpu / player_ticks, 2) if ticks else None,
        "musterRssKb": int(rss),
        "workerCpuS": [w["cpuS"] for w in r["workers"]],
    })
keys = ["playersInMatchesDuringWindow", "rttP99Ms", "lateTicksInWindow",
        "musterCpuPercent", "musterCpuPerPlayerTickUs", "failed"]
medians = {}
for transport in transports:
    mine = [x for x in out if x["transport"] == transport]
    medians[transport] = {k: statistics.median(x[k] for x in mine if x[k] is not None) for k in keys}
    if transport == "enet":
        for k in ["sendmmsgPerS", "datagramsOutPerS", "datagramsPerSendmmsg", "datagramsPerRecvmmsg"]:
            medians[transport][k] = statistics.median(x["enet"][k] for x in mine)
print(json.dumps({"bench": "matches", "median": medians, "runs": out}, indent=2))
PY
