#!/usr/bin/env bash
# What the console costs a node under load: bench/chat.sh (10,000 sockets in rooms of 5, one
# level of LEVEL messages per socket per second, a fresh node per run) with the console off, and
# with it on and one operator's status page open on it (a first load of the 5-minute view, then
# the page's poll every 2 s, as console.js does). Runs alternate off/on/on/off/… (PAIRS of each)
# so that a drift of the machine falls on both. Prints JSON: each run's Muster CPU seconds,
# deliveries and deliveries per CPU second, the medians by mode, and on/off's ratio of CPU per
# delivery (1.01 = the console costs 1 %).
#
# Usage: bench/console-chat.sh   (env: PAIRS=3 LEVEL=2, and bench/chat.sh's PLAYERS, CHANNELS, …)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-3}
LEVEL=${LEVEL:-2}
PASSWORD=bench-console-chat-pw
work=$(mktemp -d /tmp/bench-console-chat.XXXXXX)
POLLER_PID=""
cleanup() {
  [ -n "$POLLER_PID" ] && kill "$POLLER_PID" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# poll_console URL STOP_FILE: logs in when the console answers, loads the page's 5-minute view,
# then polls for what is new every 2 s until STOP_FILE exists (at most 30 minutes).
poll_console() {
  python3 - "$1" "$2" "$PASSWORD" <<'PY'
import http.client, json, os, sys, time, urllib.parse
base, stop, password = sys.argv[1:4]
host = urllib.parse.urlparse(base).netloc
deadline = time.time() + 1800

def request(method, path, body=None, headers=None):
    """One request on a fresh connection (the page's fetches need no keep-alive)."""
    conn = http.client.HTTPConnection(host, timeout=5)
    try:
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        return response, response.read()
    finally:
        conn.close()

cookie = None
while cookie is None and time.time() < deadline and not os.path.exists(stop):
    try:
        response, _ = request("POST", "/api/login",
                              json.dumps({"username": "admin", "password": password}),
                              {"content-type": "application/json"})
        if response.status == 200:
            cookie = response.getheader("set-cookie").split(";")[0]
            break
    except OSError:
        pass
    time.sleep(0.5)
view = "resolution=second&every=1&span=300"
after, polls, failures = 0, 0, 0
while cookie and time.time() < deadline and not os.path.exists(stop):
    try:
        response, body = request("GET", f"/api/status?{view}&after={after}", headers={"cookie": cookie})
        page = json.loads(body)
        after = max([after] + [n["window"]["end"] for n in page["nodes"] if "window" in n])
        polls += 1
    except (OSError, ValueError, KeyError):
        failures += 1
    time.sleep(2)
print(polls)
PY
}

: >"$work/runs"
order=()
for _ in $(seq 1 "$PAIRS"); do
  if [ $(( ${#order[@]} % 4 )) -eq 0 ]; then order+=(off on); else order+=(on off); fi
done
for mode in "${order[@]}"; do
  if [ "$mode" = on ]; then
    port=$(free_port)
    rm -f "$work/stop"
    poll_console "http://127.0.0.1:$port" "$work/stop" >"$work/polls" &
    POLLER_PID=$!
    MUSTER_CONSOLE__LISTEN="127.0.0.1:$port" MUSTER_CONSOLE__ADMIN_PASSWORD="$PASSWORD" \
      RUNS=1 LEVELS="$LEVEL" bench/chat.sh >"$work/chat.json" 2>/dev/null
    touch "$work/stop"
    wait "$POLLER_PID" || true
    POLLER_PID=""
    polls=$(cat "$work/polls")
  else
    MUSTER_CONSOLE__LISTEN="" RUNS=1 LEVELS="$LEVEL" bench/chat.sh >"$work/chat.json" 2>/dev/null
    polls=0
  fi
  python3 - "$work/chat.json" "$mode" "$polls" >>"$work/runs" <<'PY'
import json, sys
result, mode, polls = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3] or 0)
level = result["runs"][0]["levels"][0]
print(json.dumps({"console": mode, "polls": polls, "musterCpuS": level["musterCpuS"],
                  "chatDelivered": level["chatDelivered"], "deliveredPerS": level["deliveredPerS"],
                  "deliveryP99Ms": level["deliveryP99Ms"], "failed": level["failed"],
                  "deliveredPerMusterCpuS": level["deliveredPerMusterCpuS"]}))
PY
  tail -n 1 "$work/runs" >&2
done

python3 - "$work/runs" "$LEVEL" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def median(mode, key):
    values = [r[key] for r in runs if r["console"] == mode and r[key] is not None]
    return statistics.median(values) if values else None
medians = {mode: {k: median(mode, k) for k in ["musterCpuS", "deliveredPerS", "deliveryP99Ms",
                                                "deliveredPerMusterCpuS"]} for mode in ["off", "on"]}
off, on = medians["off"]["deliveredPerMusterCpuS"], medians["on"]["deliveredPerMusterCpuS"]
print(json.dumps({
    "bench": "console-chat",
    "levelPerSocket": float(sys.argv[2]),
    "median": medians,
    # CPU per delivery with the console on, over off.
    "cpuPerDeliveryRatio": round(off / on, 4) if off and on else None,
    "runs": runs,
}, indent=2))
PY
