#!/usr/bin/env bash
# The JavaScript runtime against Muster's Rust, in one sitting (bench/runtime/index.js is the
# module: the same work as the Rust built-ins, written as a Nakama module would be).
#
# PART=spend   wallet spends over the realtime socket, the Rust built-in `wallet_spend` against
#              the module's `wallet_spend_js` (nk.walletUpdate), on each of ENGINES, stepping the
#              offered rate up (RATES); fresh server and database per step; per function the
#              highest rate sustained with p95 <= 26.7 ms (the p95 of Nakama's economy test),
#              no errors and >= 95 % of the offered rate; and their ratio.
# PART=overhead  one caller, CALLS sequential calls over one keep-alive HTTP connection (HTTP
#              key): a near-empty Rust function (`notifications_send` of nothing) against the
#              module's `empty_js`; Muster's CPU per call and the latency, and their differences.
# PART=reload  the module reloaded RELOADS times (`muster runtime reload`) while players call
#              `wallet_spend_js` at RELOAD_RATE/s: calls that failed.
# PART=streams  LISTENERS sockets on the module's stream (each joined by the module's
#              `stream_join`), then CALLS sequential calls as in PART=overhead of the module's
#              `stream_send_js` (nk.streamSend to them all) against the same in Rust
#              (`stream_send_rust` of examples/stream_send.rs, which this part runs as the server),
#              and of `empty_js` against the near-empty Rust function; CPU per call, latency.
# PART=all     spend, overhead and reload (the matches are bench/matches.sh with
#              HANDLER=arena_js, below).
#
# JavaScript matches against the Rust arena: RUNS=3 TRANSPORTS=tcp PLAYERS=2000 bench/matches.sh
# and the same with HANDLER=arena_js MUSTER_RUNTIME__PATH=bench/runtime.
#
# Prints JSON. Env: PART=all RATES="2000 5000 10000 15000 20000" PLAYERS=4000 RAMP_S=8 HOLD_S=20
#   ENGINES="sqlite postgres" RUNS=3 WORKERS=2 CALLS=20000 RELOADS=5 RELOAD_RATE=2000
#   LISTENERS=10
#   JS_VMS (runtime.js_vms; default the server's) KEEP=0
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PART=${PART:-all}
RATES=${RATES:-"2000 5000 10000 15000 20000"}
PLAYERS=${PLAYERS:-4000}
RAMP_S=${RAMP_S:-8}
HOLD_S=${HOLD_S:-20}
ENGINES=${ENGINES:-"sqlite postgres"}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
CALLS=${CALLS:-20000}
RELOADS=${RELOADS:-5}
RELOAD_RATE=${RELOAD_RATE:-2000}
LISTENERS=${LISTENERS:-10}
P95_BAR_MS=26.7

build_release
work=$(mktemp -d /tmp/bench-runtime.XXXXXX)
cleanup() {
  stop_muster
  stop_postgres
  remove_work_dir "$work"
}
trap cleanup EXIT
cp "$root/bench/runtime/index.js" "$work/index.js"
export MUSTER_RUNTIME__PATH="$work"
export MUSTER_RUNTIME__PLAYER_BUILTIN_FUNCTIONS="[wallet_spend]"
# The players spend coins: they start with Nakama's economy test's 1,000,000 (default: none).
export MUSTER_ECONOMY__STARTING_WALLET="{coins=1000000}"
[ -n "${JS_VMS:-}" ] && export MUSTER_RUNTIME__JS_VMS="$JS_VMS"
from_s=$((RAMP_S + 2))
to_s=$((RAMP_S + HOLD_S - 1))

spend_scenario() { # FILE FUNCTION RATE [PLAYERS]
  ramp_and_hold "runtime-$2-$3" >"$1"
  cat >>"$1" <<TOML

[[steps]]
do = "connect"

[[steps]]
do = "rpc"
interval_s = $(paced_interval "$PLAYERS" "$3")
functions = [{ id = "$2", payload = '{"amount": \${rand:1:10}}' }]
TOML
}

run_spend() {
  for engine in $ENGINES; do
    for rate in $RATES; do
      for run in $(seq 1 "$RUNS"); do
        for function in wallet_spend wallet_spend_js; do
          tag="spend-$engine-$rate-$run-$function"
          port=$(free_port)
          start_muster_on "$engine" "$port" "$work/$tag"
          spend_scenario "$work/$tag.toml" "$function" "$rate"
          "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" \
            --workers "$WORKERS" --progress never --out "$work/$tag/out" \
            >"$work/$tag/swarm.log" 2>&1 &
          measure_hold "$port" $! "$work/$tag" "$from_s" "$to_s"
          "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
            >"$work/$tag/window.json"
          stop_muster
        done
      done
    done
  done
}

# One caller, CALLS calls of FUNCTION over one connection: "<seconds> <cpu ticks> <p50 µs> <p99 µs>".
sequential_calls() { # PORT FUNCTION PAYLOAD
  local port=$1 function=$2 payload=$3 before after
  before=$(cpu_ticks "$MUSTER_PID")
  python3 - "$port" "$function" "$payload" "$CALLS" >"$work/seq.out" <<'PY'
import http.client, json, sys, time
port, function, payload, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
connection = http.client.HTTPConnection("127.0.0.1", int(port))
body = json.dumps(payload)
took = []
started = time.perf_counter()
for _ in range(calls):
    t = time.perf_counter()
    connection.request("POST", f"/v2/rpc/{function}?http_key=defaulthttpkey", body,
                       {"content-type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 200:
        sys.exit(f"{function}: HTTP {answer.status}")
    took.append(time.perf_counter() - t)
elapsed = time.perf_counter() - started
took.sort()
print(elapsed, took[len(took) // 2] * 1e6, took[int(len(took) * 0.99)] * 1e6)
PY
  after=$(cpu_ticks "$MUSTER_PID")
  read -r seconds p50 p99 <"$work/seq.out"
  echo "$seconds $((after - before)) $p50 $p99"
}

run_overhead() {
  for run in $(seq 1 "$RUNS"); do
    port=$(free_port)
    start_muster_on sqlite "$port" "$work/overhead-$run"
    # Warm both paths first (connections, VMs, allocator).
    CALLS=1000 sequential_calls "$port" notifications_send '{"notifications": []}' >/dev/null
    CALLS=1000 sequential_calls "$port" empty_js '' >/dev/null
    echo "rust $(sequential_calls "$port" notifications_send '{"notifications": []}')" \
      >"$work/overhead-$run.txt"
    echo "js $(sequential_calls "$port" empty_js '')" >>"$work/overhead-$run.txt"
    stop_muster
  done
}

# hold_listeners PORT: LISTENERS sockets that join the module's stream and read what it sends
# until killed; their pid in LISTENERS_PID once every one has joined.
hold_listeners() {
  python3 - "$1" "$LISTENERS" >"$work/listeners.out" 2>&1 <<'PY' &
import base64, http.client, json, os, socket, struct, sys, threading, uuid
port, count = int(sys.argv[1]), int(sys.argv[2])

def session():
    c = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"id": "bench-listener-" + uuid.uuid4().hex})
    auth = base64.b64encode(b"defaultkey:").decode()
    c.request("POST", "/v2/account/authenticate/device?create=true", body,
              {"content-type": "application/json", "authorization": "Basic " + auth})
    return json.loads(c.getresponse().read())["token"]

def frame(text):
    # A client's text frame: masked (with a zero key, which leaves the bytes as they are).
    data = text.encode()
    head = bytes([0x81]) + (bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(data)))
    return head + b"\0\0\0\0" + data

sockets = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws?token={session()}&format=json HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(4096)
    s.sendall(frame(json.dumps({"cid": "1", "rpc": {"id": "stream_join", "payload": ""}})))
    got = answer.split(b"\r\n\r\n", 1)[1]
    while b'"rpc"' not in got:
        got += s.recv(65536)
    sockets.append(s)

def drain(s):
    while s.recv(1 << 16):
        pass

for s in sockets:
    threading.Thread(target=drain, args=(s,), daemon=True).start()
print("joined", flush=True)
threading.Event().wait()
PY
  LISTENERS_PID=$!
  for _ in $(seq 1 100); do
    grep -q joined "$work/listeners.out" 2>/dev/null && return 0
    kill -0 "$LISTENERS_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "the listeners did not join: $(cat "$work/listeners.out")" >&2
  return 1
}

run_streams() {
  local example="$root/target/release/examples/stream_send" plain=$muster_bin
  (cd "$root" && cargo build --release -q -p muster --example stream_send)
  # Not as a prefix of the call: that would put muster_bin in the server's environment, where
  # every MUSTER_* variable is a setting.
  muster_bin=$example
  for run in $(seq 1 "$RUNS"); do
    port=$(free_port)
    start_muster_on sqlite "$port" "$work/streams-$run"
    hold_listeners "$port"
    CALLS=1000 sequential_calls "$port" stream_send_rust '"warm"' >/dev/null
    CALLS=1000 sequential_calls "$port" stream_send_js '"warm"' >/dev/null
    CALLS=1000 sequential_calls "$port" notifications_send '{"notifications": []}' >/dev/null
    CALLS=1000 sequential_calls "$port" empty_js '' >/dev/null
    {
      echo "rust $(sequential_calls "$port" notifications_send '{"notifications": []}')"
      echo "js $(sequential_calls "$port" empty_js '')"
      echo "streamRust $(sequential_calls "$port" stream_send_rust '"a message to everyone"')"
      echo "streamJs $(sequential_calls "$port" stream_send_js '"a message to everyone"')"
    } >"$work/streams-$run.txt"
    kill "$LISTENERS_PID" 2>/dev/null || true
    wait "$LISTENERS_PID" 2>/dev/null || true
    stop_muster
  done
  muster_bin=$plain
}

run_reload() {
  for run in $(seq 1 "$RUNS"); do
    tag="reload-$run"
    port=$(free_port)
    start_muster_on sqlite "$port" "$work/$tag"
    PLAYERS=$((RELOAD_RATE / 2)) spend_scenario "$work/$tag.toml" wallet_spend_js "$RELOAD_RATE"
    "$swarm_bin" run "$work/$tag.toml" --target "http://127.0.0.1:$port" --workers "$WORKERS" \
      --progress never --out "$work/$tag/out" >"$work/$tag/swarm.log" 2>&1 &
    swarm_pid=$!
    sleep "$from_s"
    ok=0
    for _ in $(seq 1 "$RELOADS"); do
      if "$muster_bin" runtime reload --server "http://127.0.0.1:$port" >/dev/null; then
        ok=$((ok + 1))
      fi
      sleep 1
    done
    echo "$ok" >"$work/$tag/reloads"
    curl -s "http://127.0.0.1:$port/metrics" | awk '/^muster_js_reloads_total / {print $2}' \
      >"$work/$tag/reloads-metric"
    wait "$swarm_pid" || true
    "$swarm_bin" window "$work/$tag/out/report.json" --from-s "$from_s" --to-s "$to_s" \
      >"$work/$tag/window.json"
    stop_muster
  done
}

case "$PART" in
  spend | all) [ "$ENGINES" != "${ENGINES/postgres/}" ] && start_postgres ;;
esac
case "$PART" in
  spend) run_spend ;;
  overhead) run_overhead ;;
  reload) run_reload ;;
  streams) run_streams ;;
  all) run_spend; run_overhead; run_reload ;;
  *) echo "PART must be spend, overhead, reload, streams or all" >&2; exit 2 ;;
esac

PYTHONPATH="$root/bench" python3 - "$work" "$PART" "$ENGINES" "$RATES" "$RUNS" "$P95_BAR_MS" \
  "$(getconf CLK_TCK)" "$CALLS" <<'PY'
import json, os, sys
from benchlib import hold as hold_window, median as med
work, part, engines, rates, runs, bar, hz, calls = sys.argv[1:9]
engines, rates, runs, bar, hz, calls = engines.split(), [int(r) for r in rates.split()], int(runs), float(bar), int(hz), int(calls)
out = {"bench": "runtime", "part": part}

if part in ("spend", "all"):
    steps = []
    for engine in engines:
        for rate in rates:
            for run in range(1, runs + 1):
                for function in ("wallet_spend", "wallet_spend_js"):
                    tag = f"spend-{engine}-{rate}-{run}-{function}"
                    try:
                        w = json.load(open(f"{work}/{tag}/window.json"))
                    except Exception:
                        steps.append({"engine": engine, "function": function, "offered": rate, "run": run, "error": "no report"})
                        continue
                    m = w["metrics"].get(f"rpc_{function}", {})
                    secs = w["seconds"] or 1
                    report = json.load(open(f"{work}/{tag}/out/report.json"))
                    steps.append({"engine": engine, "function": function, "offered": rate, "run": run,
                                  "achieved": round(m.get("count", 0) / secs),
                                  "p50Ms": m.get("p50"), "p95Ms": m.get("p95"), "p99Ms": m.get("p99"),
                                  "errors": w["errors"] + report["failed"],
                                  **hold_window(f"{work}/{tag}", secs, m.get("count", 0))})
    summary = {}
    for engine in engines:
        summary[engine] = {}
        for function in ("wallet_spend", "wallet_spend_js"):
            per_rate = []
            for rate in rates:
                got = [s for s in steps if s["engine"] == engine and s["function"] == function and s["offered"] == rate and "achieved" in s]
                if got:
                    per_rate.append({"offered": rate, "achieved": med([s["achieved"] for s in got]),
                                     "p95Ms": med([s["p95Ms"] or 0 for s in got]),
                                     "errors": sum(s["errors"] for s in got)})
            ok = [r for r in per_rate if r["p95Ms"] <= bar and r["errors"] == 0 and r["achieved"] >= 0.95 * r["offered"]]
            best = max(ok, key=lambda r: r["achieved"]) if ok else None
            summary[engine][function] = {"bestSustainedPerS": best["achieved"] if best else 0,
                                         "p95MsThere": best["p95Ms"] if best else None, "byRate": per_rate}
        rust, js = summary[engine]["wallet_spend"]["bestSustainedPerS"], summary[engine]["wallet_spend_js"]["bestSustainedPerS"]
        summary[engine]["jsToRust"] = round(js / rust, 2) if rust else None
    out["spend"] = {"p95BarMs": bar, "summary": summary, "steps": steps}

if part in ("overhead", "all"):
    runs_out = []
    for run in range(1, runs + 1):
        rows = {}
        for line in open(f"{work}/overhead-{run}.txt"):
            kind, seconds, ticks, p50, p99 = line.split()
            rows[kind] = {"callsPerS": round(calls / float(seconds)), "cpuUsPerCall": round(1e6 * int(ticks) / hz / calls, 1),
                          "p50Us": round(float(p50), 1), "p99Us": round(float(p99), 1)}
        rows["jsMinusRust"] = {"cpuUsPerCall": round(rows["js"]["cpuUsPerCall"] - rows["rust"]["cpuUsPerCall"], 1),
                               "p50Us": round(rows["js"]["p50Us"] - rows["rust"]["p50Us"], 1)}
        runs_out.append(rows)
    out["overhead"] = {"calls": calls, "runs": runs_out, "median": {
        k: {x: med([r[k][x] for r in runs_out]) for x in runs_out[0][k]} for k in runs_out[0]}}

if part == "streams":
    runs_out = []
    for run in range(1, runs + 1):
        rows = {}
        for line in open(f"{work}/streams-{run}.txt"):
            kind, seconds, ticks, p50, p99 = line.split()
            rows[kind] = {"callsPerS": round(calls / float(seconds)), "cpuUsPerCall": round(1e6 * int(ticks) / hz / calls, 1),
                          "p50Us": round(float(p50), 1), "p99Us": round(float(p99), 1)}
        rows["jsToRust"] = {"emptyCpu": round(rows["js"]["cpuUsPerCall"] / rows["rust"]["cpuUsPerCall"], 2),
                            "streamSendCpu": round(rows["streamJs"]["cpuUsPerCall"] / rows["streamRust"]["cpuUsPerCall"], 2)}
        runs_out.append(rows)
    out["streams"] = {"calls": calls, "listeners": int(os.environ.get("LISTENERS", "10")), "runs": runs_out, "median": {
        k: {x: med([r[k][x] for r in runs_out]) for x in runs_out[0][k]} for k in runs_out[0]}}

if part in ("reload", "all"):
    rows = []
    for run in range(1, runs + 1):
        tag = f"reload-{run}"
        w = json.load(open(f"{work}/{tag}/window.json"))
        report = json.load(open(f"{work}/{tag}/out/report.json"))
        m = w["metrics"].get("rpc_wallet_spend_js", {})
        rows.append({"reloadsAccepted": int(open(f"{work}/{tag}/reloads").read()),
                     "reloadsCounted": float(open(f"{work}/{tag}/reloads-metric").read() or 0),
                     "calls": m.get("count", 0), "p95Ms": m.get("p95"), "p99Ms": m.get("p99"),
                     "errors": w["errors"], "failedPlayers": report["failed"], "errorKinds": report["errors"]})
    out["reload"] = {"runs": rows, "failedCalls": sum(r["errors"] for r in rows)}
print(json.dumps(out, indent=2))
PY
