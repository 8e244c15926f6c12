"""Reads wrk's output (run with --latency) on stdin; prints {"rps", "p50_ms", "p99_ms", "errors"}."""
import json
import re
import sys

text = sys.stdin.read()
units = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def latency(pct):
    m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % pct, text, re.M)
    return round(float(m.group(1)) * units[m.group(2)], 3) if m else None


rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
errors = 0
for pattern in (r"Non-2xx or 3xx responses: (\d+)", r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)"):
    m = re.search(pattern, text)
    if m:
        errors += sum(int(g) for g in m.groups())
print(json.dumps({
    "rps": round(float(rps.group(1))) if rps else None,
    "p50_ms": latency(50),
    "p99_ms": latency(99),
    "errors": errors,
}))
