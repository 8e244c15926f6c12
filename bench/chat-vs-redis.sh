#!/usr/bin/env bash
# Muster's chat fanout against Redis 7 pub/sub in one sitting: bench/chat.sh (Muster, swarm's
# WebSocket players) and bench/chat-redis.sh (Redis, the same load from
# examples/chat_reference.rs) alternately, RUNS pairs, the same LEVELS, players and rooms.
# Prints JSON: each pair's best delivered/s within P99_LIMIT_MS and their ratio, the server CPU
# per delivery of each at every level both ran (Muster's over the same window of its run), and
# the medians of the ratios.
#
# Usage: bench/chat-vs-redis.sh   (env: RUNS=3 LEVELS="1 1.5 2 3 4 5 6" and bench/chat.sh's
#                                   PLAYERS CHANNELS RAMP_S WAIT_S CHAT_S P99_LIMIT_MS)
set -euo pipefail
here=$(dirname "$0")
RUNS=${RUNS:-3}
export LEVELS=${LEVELS:-"1 1.5 2 3 4 5 6"}
work=$(mktemp -d /tmp/chat-vs-redis.XXXXXX)
trap 'rm -rf "$work"' EXIT

for pair in $(seq 1 "$RUNS"); do
  RUNS=1 "$here/chat.sh" >"$work/muster-$pair.json"
  RUNS=1 "$here/chat-redis.sh" >"$work/redis-$pair.json"
done

python3 - "$work" "$RUNS" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
pairs = []
for i in range(1, runs + 1):
    muster = json.load(open(f"{work}/muster-{i}.json"))["runs"][0]
    redis = json.load(open(f"{work}/redis-{i}.json"))["runs"][0]
    best = lambda run: run["best"]["deliveredPerS"] if run["best"] else None
    redis_levels = {l["ratePerSocket"]: l for l in redis["levels"]}
    per_level = []
    for level in muster["levels"]:
        other = redis_levels.get(level["ratePerSocket"])
        if not other or not level.get("musterCpuUsPerDelivery") or not other.get("serverCpuUsPerDelivery"):
            continue
        per_level.append({
            "ratePerSocket": level["ratePerSocket"],
            "musterCpuUsPerDelivery": level["musterCpuUsPerDelivery"],
            "redisCpuUsPerDelivery": other["serverCpuUsPerDelivery"],
            "cpuRatio": round(level["musterCpuUsPerDelivery"] / other["serverCpuUsPerDelivery"], 2),
            "musterP99Ms": level["deliveryP99Ms"], "redisP99Ms": other["deliveryP99Ms"],
        })
    m, r = best(muster), best(redis)
    pairs.append({
        "musterBestDeliveredPerS": m, "redisBestDeliveredPerS": r,
        "deliveredRatio": round(m / r, 2) if m and r else None,
        "levels": per_level,
    })
ratios = [p["deliveredRatio"] for p in pairs if p["deliveredRatio"]]
cpu = {}
for p in pairs:
    for l in p["levels"]:
        cpu.setdefault(l["ratePerSocket"], []).append(l)
print(json.dumps({
    "bench": "chat-vs-redis",
    "medianDeliveredRatio": statistics.median(ratios) if ratios else None,
    "medianPerLevel": {
        str(rate): {
            "musterCpuUsPerDelivery": statistics.median(l["musterCpuUsPerDelivery"] for l in ls),
            "redisCpuUsPerDelivery": statistics.median(l["redisCpuUsPerDelivery"] for l in ls),
            "cpuRatio": statistics.median(l["cpuRatio"] for l in ls),
            "pairs": len(ls),
        } for rate, ls in sorted(cpu.items())
    },
    "pairs": pairs,
}, indent=2))
PY
