#!/usr/bin/env bash
# swarm across real interfaces: a Muster, a coordinator and two remote workers, each in its own
# network namespace, joined by veth pairs to a bridge (in a fifth namespace, so the host's own
# interfaces are never touched). The coordinator drives the workers over TCP (`--workers-at`),
# the workers' players reach Muster over the bridge, and the report must count every player.
#
#   scripts/netns-swarm.sh [MUSTER_BIN] [SWARM_BIN]      (as root; needs iproute2)
#
# Called by scripts/test. Everything it makes is named with its PID and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-$(pwd)/target}
muster_bin=${1:-$target_dir/debug/muster}
swarm_bin=${2:-$target_dir/debug/swarm}

if [ "$(id -u)" != 0 ]; then
  echo "netns-swarm: needs root (network namespaces)" >&2
  exit 1
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "netns-swarm: installing iproute2 from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq iproute2 >/dev/null
fi

tag=$$
hub=msw-hub-$tag
names=(srv crd w1 w2)
declare -A addr=([srv]=10.231.0.1 [crd]=10.231.0.2 [w1]=10.231.0.3 [w2]=10.231.0.4)
work=$(mktemp -d /tmp/netns-swarm.XXXXXX)
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # Whatever still runs inside a namespace (nothing, normally) goes with it.
  for n in "${names[@]}"; do
    for pid in $(ip netns pids "msw-$n-$tag" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "msw-$n-$tag" 2>/dev/null || true
  done
  ip netns del "$hub" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "netns-swarm: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

ip netns add "$hub"
ip -n "$hub" link add br0 type bridge
ip -n "$hub" link set br0 up
for n in "${names[@]}"; do
  ns=msw-$n-$tag
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # One end in the host's namespace first, then each moved where it belongs.
  ip link add "v$n$tag" type veth peer name "p$n$tag"
  ip link set "v$n$tag" netns "$ns"
  ip link set "p$n$tag" netns "$hub"
  ip -n "$ns" link set "v$n$tag" name eth0
  ip -n "$ns" addr add "${addr[$n]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$hub" link set "p$n$tag" master br0
  ip -n "$hub" link set "p$n$tag" up
done
in_ns() { local n=$1; shift; ip netns exec "msw-$n-$tag" "$@"; }
# spawn_in_ns NS OUT ERR CMD…: CMD in the background in NS; its PID (ip execs CMD) in pids.
spawn_in_ns() {
  local n=$1 out=$2 err=$3; shift 3
  ip netns exec "msw-$n-$tag" "$@" >"$out" 2>"$err" &
  pids+=($!)
}

# Muster on the server's interface, with its own SQLite database.
spawn_in_ns srv "$work/muster.log" "$work/muster.err" \
  env MUSTER_LIMITS__AUTH_PER_IP_PER_SEC=0 MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC=0 \
  MUSTER_LIMITS__MAX_CONNECTIONS_PER_IP=0 MUSTER_LIMITS__MAX_SOCKETS_PER_IP=0 MUSTER_ENET__LISTEN= MUSTER_LINKS__LISTEN= MUSTER_GRPC__LISTEN= \
  "$muster_bin" --listen 0.0.0.0:7350 --data-dir "$work/data"
for _ in $(seq 100); do
  in_ns crd bash -c "exec 3<>/dev/tcp/${addr[srv]}/7350" 2>/dev/null && break
  sleep 0.1
done

# Two workers, each on its own interface, exiting after one run.
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
for n in w1 w2; do
  spawn_in_ns "$n" "$work/$n.out" "$work/$n.log" \
    env SWARM_WORKER_TOKEN="$token" "$swarm_bin" worker --listen 0.0.0.0:7400 --once
done
for n in w1 w2; do
  for _ in $(seq 100); do grep -q '^listening' "$work/$n.out" 2>/dev/null && break; sleep 0.1; done
done

rx_before=$(in_ns srv cat /sys/class/net/eth0/statistics/rx_packets)
echo "netns-swarm: coordinator ${addr[crd]} → workers ${addr[w1]}, ${addr[w2]} → Muster ${addr[srv]}"
set +e
in_ns crd env SWARM_WORKER_TOKEN="$token" "$swarm_bin" run scenarios/smoke.toml \
  --target "http://${addr[srv]}:7350" --workers-at "${addr[w1]}:7400,${addr[w2]}:7400" \
  --progress never --out "$work/report"
code=$?
set -e
rx_after=$(in_ns srv cat /sys/class/net/eth0/statistics/rx_packets)

python3 - "$work/report/report.json" "$code" "$((rx_after - rx_before))" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
code, rx = int(sys.argv[2]), int(sys.argv[3])
problems = []
if code != 0: problems.append(f"swarm exited {code}")
if report["status"] != "completed": problems.append(f"status {report['status']}")
if report["players"] != 40 or report["successful"] != 40 or report["failed"] != 0:
    problems.append(f"players {report['players']} successful {report['successful']} failed {report['failed']}: {report['errors']}")
workers = {w.get("address"): w for w in report["workers"]}
for a in ("10.231.0.3:7400", "10.231.0.4:7400"):
    w = workers.get(a)
    if not w or not w["reported"] or w["successful"] != w["players"] or w["players"] == 0:
        problems.append(f"worker {a}: {w}")
if report.get("startSkewMs") is None: problems.append("no start skew")
# 40 players authenticating, upgrading and pinging every 0.5 s for seconds: hundreds of packets.
if rx < 400: problems.append(f"only {rx} packets reached the server's interface")
print(f"netns-swarm: {report['successful']}/{report['players']} players over the bridge, "
      f"{rx} packets into the server's interface, start skew {report.get('startSkewMs')} ms")
if problems:
    print("netns-swarm: FAILED: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
# --once: both workers end by themselves after the run.
for n in 1 2; do
  wait "${pids[$n]}" || { echo "netns-swarm: worker w$n exited with an error" >&2; exit 1; }
done
echo "netns-swarm: passed"
