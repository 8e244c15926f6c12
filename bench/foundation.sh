#!/usr/bin/env bash
# Foundation figures, measured with swarm against ONE release Muster (SQLite) on
# 127.0.0.1, server and load generator on this machine. Prints one JSON object:
#   - accounts: ACCOUNTS players arrive at ACCOUNT_RATE per second, each creating a device account
#     (authenticate, create=true): the accounts created per second while they arrived (the report's
#     rate for that phase), with latency percentiles;
#   - sockets: SOCKETS players arrive at CONNECT_RATE per second, each authenticating (a new
#     account) and opening a realtime socket: sockets opened per second while they arrived, with
#     auth and upgrade latency percentiles; then every socket is held idle for HOLD s, pinging every
#     PING_MS: ping RTT over the hold;
#   - the server's RSS per idle socket: (RSS during the hold - RSS before the sockets) / sockets
#     held, RSS read from /proc/PID/status.
# Every latency is measured from the request's intended time (the player's scheduled arrival, the
# ping's slot on its fixed schedule), so stalls on either side count. The load is open loop: swarm
# offers the rate whatever the server does, so an achieved rate below the offered one, or latency
# climbing, means the server (or the machine) is saturated; raise ACCOUNT_RATE / CONNECT_RATE to
# find where. Each arrival phase lasts whole seconds (the rate is adjusted to fit: the JSON's
# offered_per_sec), so the report's rates by phase are exact. Latency percentiles come from the
# report's per-second sketches (within 1 %).
#
# Usage: bench/foundation.sh
#   env: ACCOUNTS=20000 ACCOUNT_RATE=5000 SOCKETS=18000 CONNECT_RATE=1000 HOLD=30 PING_MS=10000
#        WORKERS=2 KEEP=0 (KEEP=1: keep the work directory: swarm's reports, Muster's log)
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
ACCOUNTS=${ACCOUNTS:-20000}
ACCOUNT_RATE=${ACCOUNT_RATE:-5000}
SOCKETS=${SOCKETS:-18000}
CONNECT_RATE=${CONNECT_RATE:-1000}
HOLD=${HOLD:-30}
PING_MS=${PING_MS:-10000}
WORKERS=${WORKERS:-2}

build_release
work=$(mktemp -d /tmp/bench-foundation.XXXXXX)
SAMPLER_PID=""
trap '[ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null; stop_muster; remove_work_dir "$work"' EXIT

port=$(free_port)
target="http://127.0.0.1:$port"
start_muster "$port" "$work/muster"

# 1. Device accounts created per second.
accounts_s=$(whole_seconds "$ACCOUNTS" "$ACCOUNT_RATE")
accounts_scenario "$work/accounts.toml" "$ACCOUNTS" "$accounts_s"
"$swarm_bin" run "$work/accounts.toml" --target "$target" --workers "$WORKERS" \
  --progress never --out "$work/accounts" >"$work/accounts.log" 2>&1 || true
"$swarm_bin" window "$work/accounts/report.json" --from-s 0 --to-s 1000000000 >"$work/accounts-all.json"

# 2. Sockets: connect at CONNECT_RATE, then hold them all, pinging. The same server, after the
# accounts: RSS is measured from here, and once a second (with its time) during the run.
rss_before=$(rss_kb "$MUSTER_PID")
ramp_s=$(whole_seconds "$SOCKETS" "$CONNECT_RATE")
heartbeat_scenario "$work/sockets.toml" "$SOCKETS" "$ramp_s" "$HOLD" "$(python3 -c "print($PING_MS / 1000)")"
# Bounded: at most one hour of samples.
( for _ in $(seq 1 3600); do echo "$(date +%s%3N) $(rss_kb "$MUSTER_PID")"; sleep 1; done ) \
  >"$work/muster-rss" 2>/dev/null &
SAMPLER_PID=$!
"$swarm_bin" run "$work/sockets.toml" --target "$target" --workers "$WORKERS" \
  --progress never --out "$work/sockets" >"$work/sockets.log" 2>&1 || true
kill "$SAMPLER_PID" 2>/dev/null || true
wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=""
rss_end=$(rss_kb "$MUSTER_PID")
# The hold: the whole seconds after the last arrival, before the teardown.
hold_from=$ramp_s
hold_to=$(python3 -c "import math; print(math.floor($ramp_s + $HOLD))")
"$swarm_bin" window "$work/sockets/report.json" --from-s 0 --to-s 1000000000 >"$work/sockets-all.json"
"$swarm_bin" window "$work/sockets/report.json" --from-s "$hold_from" --to-s "$hold_to" \
  >"$work/sockets-hold.json"

python3 - "$work" "$ACCOUNTS" "$accounts_s" "$SOCKETS" "$ramp_s" "$HOLD" "$PING_MS" \
  "$rss_before" "$rss_end" "$hold_from" "$hold_to" <<'PY'
import json, statistics, sys
work = sys.argv[1]
accounts, accounts_s, sockets, ramp_s, hold, ping_ms = (float(x) for x in sys.argv[2:8])
rss_before, rss_end, hold_from, hold_to = (int(x) for x in sys.argv[8:12])

def load(name):
    return json.load(open(f"{work}/{name}"))

def latency(window, metric):
    m = window["metrics"].get(metric)
    if not m:
        return None
    return {"count": m["count"], "p50": m["p50"], "p95": m["p95"], "p99": m["p99"],
            "p999": m["p99point9"], "max": m["max"]}

def phase(report, name):
    return next((p for p in report.get("phases", []) if p["name"] == name), {})

acc = load("accounts/report.json")
acc_phase = phase(acc, "accounts")
out_accounts = {
    "bench": "accounts",
    "count": int(accounts),
    "offered_per_sec": round(accounts / accounts_s, 2),
    "seconds": acc_phase.get("durationS"),
    "accounts_per_sec": acc_phase.get("ratesPerS", {}).get("auth", 0.0),
    "successful": acc["successful"],
    "failed": acc["failed"],
    "errors": acc["errors"],
    "latency_ms": latency(load("accounts-all.json"), "auth"),
}

soc = load("sockets/report.json")
ramp = phase(soc, "ramp")
held_window = load("sockets-hold.json")
held = held_window["minCcu"]
# RSS with every socket open: the samples taken during the hold's seconds.
start_ms = soc["startedAtMs"]
samples = []
for line in open(f"{work}/muster-rss"):
    parts = line.split()
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        t_s = (int(parts[0]) - start_ms) / 1000
        if hold_from <= t_s < hold_to:
            samples.append(int(parts[1]))
rss_held = int(statistics.median(samples)) if samples else None
out_sockets = {
    "bench": "idle_sockets",
    "sockets_requested": int(sockets),
    "offered_per_sec": round(sockets / ramp_s, 2),
    "connect_seconds": ramp.get("durationS"),
    "connects_per_sec": ramp.get("ratesPerS", {}).get("connect", 0.0),
    "auths_per_sec": ramp.get("ratesPerS", {}).get("auth", 0.0),
    "connected": soc["counters"]["connects"],
    "successful": soc["successful"],
    "failed": soc["failed"],
    "errors": soc["errors"],
    # Measured separately: the authenticate request, then the socket (TCP + upgrade) from the
    # moment the session came back.
    "auth_latency_ms": latency(load("sockets-all.json"), "auth"),
    "upgrade_latency_ms": latency(load("sockets-all.json"), "connect"),
    "hold_secs": hold,
    "hold_window_s": [hold_from, hold_to],
    "held_sockets": held,
    "ping_interval_ms": ping_ms,
    "ping_rtt_ms": latency(held_window, "ping"),
    "errors_during_hold": held_window["errors"],
    "server_rss_before_kib": rss_before,
    "server_rss_held_kib": rss_held,
    "server_rss_end_kib": rss_end,
    "server_rss_per_socket_bytes":
        round((rss_held - rss_before) * 1024 / held) if rss_held is not None and held > 0 else None,
}
print(json.dumps({"accounts": out_accounts, "sockets": out_sockets}, indent=2))
PY
