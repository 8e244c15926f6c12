#!/usr/bin/env bash
# The edge under a slow-connection attack, printed as JSON:
#   - device-auth latency of an honest client (p50, p99 over AUTHS sequential calls) with the
#     node idle, then while SILENT connections that never send a byte are held against it from
#     SOURCES local addresses (reopened as the server closes them at its head timeout);
#   - the server's open files at their peak during the attack, against its open-file limit;
#   - how many attack connections the server turned away or timed out (its own metrics).
# Server and clients run on this machine over 127.0.0.0/8. Settings (environment): SILENT (5000),
# SOURCES (20), AUTHS (300), HOLD_S (20).
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
SILENT=${SILENT:-5000}
SOURCES=${SOURCES:-20}
AUTHS=${AUTHS:-300}
HOLD_S=${HOLD_S:-20}

build_release
work=$(mktemp -d /tmp/edge-bench.XXXXXX)
trap 'stop_muster; remove_work_dir "$work"' EXIT
port=$(free_port)
mkdir -p "$work/muster"
# Only the honest client's authentication rate limit is lifted (it signs in AUTHS times in a
# row); every connection limit stays at its default: they are what is measured.
MUSTER_LIMITS__AUTH_PER_IP_PER_SEC=0 MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 MUSTER_ENET__LISTEN=127.0.0.1:0 \
  MUSTER_GRPC__LISTEN= "$muster_bin" serve --listen "127.0.0.1:$port" --data-dir "$work/muster" --log warn \
  >"$work/muster/muster.log" 2>&1 &
MUSTER_PID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthcheck" && break; sleep 0.1; done

# The attacker holds thousands of sockets: take the whole open-file allowance.
ulimit -n "$(ulimit -Hn)"
python3 - "$port" "$MUSTER_PID" "$SILENT" "$SOURCES" "$AUTHS" "$HOLD_S" <<'PY'
import asyncio, json, os, sys, time, urllib.request

port, pid, silent, sources, auths, hold_s = map(int, sys.argv[1:7])
base = f"http://127.0.0.1:{port}"

def open_files():
    return len(os.listdir(f"/proc/{pid}/fd"))

def file_limit():
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return None

def metric(name):
    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0

def auth_latencies(tag):
    samples, failures = [], 0
    for i in range(auths):
        body = json.dumps({"id": f"edge-bench-{tag}-{i:06d}"}).encode()
        request = urllib.request.Request(
            f"{base}/v2/account/authenticate/device?create=true", data=body,
            headers={"Authorization": "Basic ZGVmYXVsdGtleTo=", "Content-Type": "application/json"})
        started = time.perf_counter()
        try:
            urllib.request.urlopen(request, timeout=10).read()
            samples.append((time.perf_counter() - started) * 1000)
        except Exception:
            failures += 1
    samples.sort()
    pick = lambda q: round(samples[min(len(samples) - 1, int(q * len(samples)))], 3) if samples else None
    return {"count": len(samples), "failed": failures, "p50_ms": pick(0.50), "p99_ms": pick(0.99)}

async def hold(stop, peak):
    """Keeps `silent` connections open from `sources` addresses, reopening closed ones."""
    async def one(source):
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
                await reader.read(1)  # returns when the server closes the connection
                writer.close()
            except OSError:
                await asyncio.sleep(0.05)
    tasks = [asyncio.create_task(one(f"127.0.1.{1 + i % sources}")) for i in range(silent)]
    while not stop.is_set():
        peak[0] = max(peak[0], open_files())
        await asyncio.sleep(0.2)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

async def main():
    idle = auth_latencies("idle")
    stop, peak = asyncio.Event(), [open_files()]
    holder = asyncio.create_task(hold(stop, peak))
    await asyncio.sleep(3)  # the flood reaches its size
    held_at_start = metric("muster_http_connections_open")
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + hold_s
    attacked = await loop.run_in_executor(None, auth_latencies, "attacked")
    remaining = deadline - time.monotonic()
    if remaining > 0:
        await asyncio.sleep(remaining)
    stop.set()
    await holder
    ratio = (attacked["p99_ms"] / idle["p99_ms"]) if attacked["p99_ms"] and idle["p99_ms"] else None
    print(json.dumps({
        "bench": "edge",
        "silent_connections": silent, "sources": sources,
        "auth_idle": idle, "auth_attacked": attacked,
        "p99_ratio_attacked_to_idle": round(ratio, 2) if ratio else None,
        "http_connections_open_during_attack": held_at_start,
        "server_open_files_peak": peak[0], "server_open_file_limit": file_limit(),
        "refused_per_ip": metric('muster_connections_refused_total{limit="per_ip"}'),
        "refused_total": metric('muster_connections_refused_total{limit="total"}'),
        "closed_header_timeout": metric('muster_http_connections_closed_total{reason="header_timeout"}'),
    }, indent=2))

asyncio.run(main())
PY
