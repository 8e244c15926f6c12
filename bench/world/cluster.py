"""The driver of bench/world-cluster.sh: a world of two TDWorld-sized shards on two Muster nodes
(one PostgreSQL, one nats-server, one shared checkpoint folder). Prints JSON:

- takeover: KILLS times, the node running shard 0 is killed with -9; from the kill to the shard
  running (its first tick) on the other node, polled every 5 ms, with the restore's own time
  (`muster_world_shard_start_seconds`); then the killed node starts again and the time until
  the shards are one per node again (a handover) is measured too;
- views: RUNS pairs of swarm runs (SUBSCRIBERS players watching shard 0), one against the node
  that runs it (local) and one against the other (routed over NATS), alternating which goes
  first; update latency from the tick (`world_update`);
- actions: RUNS pairs of swarm runs (CLAIM_PLAYERS players claiming every CLAIM_EVERY_S), local
  and routed, each on a fresh world (swarm's players claim the same buildings every run); claims
  answered and applied per second over the hold, and the claims' latency at the node called.

Every process it starts is ended by its PID; every wait is bounded."""
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

env = os.environ
MUSTER, SWARM, WORK = env["SERVER_BIN"], env["SWARM_BIN"], env["WORK"]
PG_BASE, NATS, PSQL = env["PG_BASE"], env["NATS_URL"], env["PSQL"]
WORLD_TOML = open(f"{WORK}/world.toml").read()
KILLS, RUNS = int(env.get("KILLS", 3)), int(env.get("RUNS", 3))
SUBSCRIBERS = int(env.get("SUBSCRIBERS", 1000))
CLAIM_PLAYERS = int(env.get("CLAIM_PLAYERS", 2000))
CLAIM_EVERY_S = float(env.get("CLAIM_EVERY_S", 0.2))
RAMP_S, HOLD_S = float(env.get("RAMP_S", 10)), float(env.get("HOLD_S", 20))
CX, CY, SPREAD = float(env["CX"]), float(env["CY"]), float(env["SPREAD"])
BUILDINGS = int(env["BUILDINGS"])


class World:
    """A world of its own: a cluster subject prefix, a database and a checkpoint volume."""
    count = 0

    def __init__(self):
        World.count += 1
        self.name = f"wb{os.getpid()}_{World.count}"
        self.config = f"{WORK}/{self.name}.toml"
        open(self.config, "w").write(
            WORLD_TOML.replace(f"{WORK}/volume", f"{WORK}/{self.name}-volume"))
        subprocess.run([PSQL, "-q", "-h", "127.0.0.1", "-p", PG_BASE.rsplit(":", 1)[1],
                        "-U", "postgres", "-c", f"CREATE DATABASE {self.name}"], check=True)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metrics(port, timeout=2):
    """Every sample of the node's /metrics, by its full name (labels included)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                      timeout=timeout).read().decode()
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


class Node:
    def __init__(self, name, world):
        self.name, self.world, self.port, self.proc = name, world, free_port(), None

    def start(self):
        data = f"{WORK}/{self.world.name}-{self.name}"
        os.makedirs(data, exist_ok=True)
        e = {k: v for k, v in env.items() if not k.startswith("MUSTER_")}
        e.update({
            "MUSTER_CLUSTER__NATS_URL": NATS, "MUSTER_CLUSTER__SUBJECT_PREFIX": self.world.name,
            "MUSTER_CLUSTER__NODE_NAME": self.name,
            "MUSTER_DATABASE_URL": f"{PG_BASE}/{self.world.name}",
            "MUSTER_LIMITS__AUTH_PER_IP_PER_SEC": "0", "MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC": "0",
            "MUSTER_LIMITS__MAX_SOCKETS_PER_IP": "0", "MUSTER_LIMITS__MAX_CONNECTIONS_PER_IP": "0",
            "MUSTER_ROOMS__TCP_LISTEN": "127.0.0.1:0", "MUSTER_ENET__LISTEN": "127.0.0.1:0",
            "MUSTER_LINKS__LISTEN": "",
            "MUSTER_GRPC__LISTEN": "",
        })
        log = open(f"{data}/muster.log", "a")
        self.proc = subprocess.Popen(
            [MUSTER, "serve", "--config", self.world.config, "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", data, "--log", "warn"], env=e, stdout=log, stderr=log)
        until(lambda: self.answers(), 60, f"{self.name} answering")

    def answers(self):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthcheck", timeout=1)
            return True
        except Exception:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited; see {WORK}/{self.world.name}-{self.name}")
            return False

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def epoch(self, shard):
        return metrics(self.port).get(f'muster_world_shard_epoch{{shard="{shard}"}}', 0.0)


def until(condition, seconds, what, every=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise SystemExit(f"timed out waiting for {what}")


def owner(nodes, shard):
    for n in nodes:
        if n.proc and n.epoch(shard) > 0:
            return n
    return None


def balanced(nodes):
    a, b = owner(nodes, 0), owner(nodes, 1)
    return a is not None and b is not None and a is not b


def takeovers(nodes):
    out = []
    for _ in range(KILLS):
        until(lambda: balanced(nodes), 120, "one shard per node")
        victim = owner(nodes, 0)
        survivor = next(n for n in nodes if n is not victim)
        # A checkpoint of the victim's shard on the volume first (the restore reads it).
        until(lambda: metrics(victim.port).get('muster_world_checkpoints_total{result="ok"}', 0) >= 1,
              60, "a checkpoint")
        before = metrics(survivor.port)
        epoch = victim.epoch(0)
        t0 = time.monotonic()
        victim.kill9()
        until(lambda: survivor.epoch(0) > epoch, 60, "shard 0 running on the survivor", every=0.005)
        took = time.monotonic() - t0
        after = metrics(survivor.port)
        restore = (after.get("muster_world_shard_start_seconds_sum", 0)
                   - before.get("muster_world_shard_start_seconds_sum", 0))
        t1 = time.monotonic()
        victim.start()
        answered = time.monotonic() - t1
        until(lambda: balanced(nodes), 120, "the shards one per node again")
        out.append({"killToRunningS": round(took, 3), "restoreS": round(restore, 3),
                    "restartAnsweredS": round(answered, 2),
                    "rebalancedAfterAnsweringS": round(time.monotonic() - t1 - answered, 2)})
    return out


def swarm(target, name, players, box_m, claim_every_s, sample=None):
    """One swarm run of `players` watching shard 0 through `target`; its report, and what
    `sample` read at the ramp's end and the hold's end."""
    d = f"{WORK}/{name}"
    os.makedirs(d, exist_ok=True)
    claims = f"claim_every_s = {claim_every_s}\nbuildings = {BUILDINGS}\n" if claim_every_s else ""
    open(f"{d}/scenario.toml", "w").write(f"""name = "{name}"
timeout_s = 20
grace_s = 10
[[phases]]
name = "ramp"
duration_s = {RAMP_S}
players = {players}
[[phases]]
name = "hold"
duration_s = {HOLD_S}
[[steps]]
do = "authenticate"
[[steps]]
do = "connect"
[[steps]]
do = "world"
duration_s = {HOLD_S + RAMP_S / 2}
center = [{CX}, {CY}]
spread_m = {SPREAD}
box_m = {box_m}
pan_every_s = 5
{claims}""")
    proc = subprocess.Popen([SWARM, "run", f"{d}/scenario.toml", "--target",
                             f"http://127.0.0.1:{target.port}", "--progress", "never",
                             "--out", f"{d}/report"],
                            stdout=open(f"{d}/swarm.out", "w"), stderr=subprocess.STDOUT)
    samples = []
    if sample:
        time.sleep(RAMP_S)
        samples.append((time.monotonic(), sample()))
        time.sleep(HOLD_S - 2)
        samples.append((time.monotonic(), sample()))
    proc.wait(timeout=RAMP_S + HOLD_S + 120)
    report = json.load(open(f"{d}/report/report.json"))
    return report, samples


def views(nodes):
    out = {"local": [], "routed": []}
    for run in range(RUNS):
        local = owner(nodes, 0)
        routed = next(n for n in nodes if n is not local)
        order = [("local", local), ("routed", routed)]
        if run % 2:
            order.reverse()
        for kind, target in order:
            report, _ = swarm(target, f"views-{run}-{kind}", SUBSCRIBERS, 600, 0)
            wu = report["metrics"].get("world_update", {})
            out[kind].append({"players": report["players"], "failed": report["failed"],
                              "updateP50Ms": wu.get("percentile50"),
                              "updateP99Ms": wu.get("percentile99"),
                              "updates": wu.get("count")})
    return out


def claims(m):
    ok = m.get('muster_rpc_calls_total{function="world_claim",outcome="ok"}', 0)
    taken = m.get('muster_rpc_calls_total{function="world_claim",outcome="already_exists"}', 0)
    return ok, taken


def actions():
    out = {"local": [], "routed": []}
    for run in range(RUNS):
        order = ["local", "routed"] if run % 2 == 0 else ["routed", "local"]
        for kind in order:
            nodes = [Node("a", World()), None]
            nodes[1] = Node("b", nodes[0].world)
            try:
                for n in nodes:
                    n.start()
                until(lambda: balanced(nodes), 180, "one shard per node")
                shard_node = owner(nodes, 0)
                target = shard_node if kind == "local" else next(
                    n for n in nodes if n is not shard_node)

                def sample():
                    # A node under load may take a while to answer; a failed sample is None.
                    m = metrics(target.port, timeout=20)
                    return claims(m) if m else None
                report, samples = swarm(target, f"actions-{run}-{kind}", CLAIM_PLAYERS, 20,
                                        CLAIM_EVERY_S, sample=sample)
                m = metrics(target.port, timeout=20)
            finally:
                for n in nodes:
                    n.stop()
            (t0, a), (t1, b) = samples
            seconds = t1 - t0
            rates = {}
            if a and b:
                rates = {"appliedPerS": round((b[0] - a[0]) / seconds),
                         "answeredPerS": round((b[0] + b[1] - a[0] - a[1]) / seconds)}
            out[kind].append({"players": report["players"], "failed": report["failed"],
                              "errors": report.get("errors", {}),
                              "offeredPerS": round(CLAIM_PLAYERS / CLAIM_EVERY_S),
                              **rates, "claimP99Ms": p99(m)})
    return out


def p99(m):
    """The world_claim latency's p99 at the node called, from its histogram (bucket bound)."""
    buckets = sorted(
        (float("inf") if k.split('le="')[1].rstrip('"}') == "+Inf" else
         float(k.split('le="')[1].rstrip('"}')), v)
        for k, v in m.items()
        if k.startswith('muster_rpc_duration_seconds_bucket{function="world_claim"'))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    for le, n in buckets:
        if n >= 0.99 * total:
            return le * 1000
    return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    world = World()
    nodes = [Node("a", world), Node("b", world)]
    try:
        for n in nodes:
            n.start()
        until(lambda: balanced(nodes), 180, "one shard per node")
        kills = takeovers(nodes) if KILLS else []
        seen_views = views(nodes) if RUNS else {"local": [], "routed": []}
    finally:
        for n in nodes:
            n.stop()
    seen_actions = actions() if CLAIM_PLAYERS else {"local": [], "routed": []}
    print(json.dumps({
        "bench": "world-cluster",
        "leaseMs": int(env.get("LEASE_MS", 5000)),
        "takeover": kills,
        "views": seen_views,
        "actions": seen_actions,
        "median": {
            "killToRunningS": med([k["killToRunningS"] for k in kills]),
            "restoreS": med([k["restoreS"] for k in kills]),
            "rebalancedAfterAnsweringS": med([k["rebalancedAfterAnsweringS"] for k in kills]),
            "viewP99LocalMs": med([v["updateP99Ms"] for v in seen_views["local"]]),
            "viewP99RoutedMs": med([v["updateP99Ms"] for v in seen_views["routed"]]),
            "viewP50LocalMs": med([v["updateP50Ms"] for v in seen_views["local"]]),
            "viewP50RoutedMs": med([v["updateP50Ms"] for v in seen_views["routed"]]),
            "claimsAppliedPerSLocal": med([a.get("appliedPerS") for a in seen_actions["local"]]),
            "claimsAppliedPerSRouted": med([a.get("appliedPerS") for a in seen_actions["routed"]]),
            "claimsAnsweredPerSLocal": med([a.get("answeredPerS") for a in seen_actions["local"]]),
            "claimsAnsweredPerSRouted": med([a.get("answeredPerS")
                                             for a in seen_actions["routed"]]),
        },
    }, indent=2))


if __name__ == "__main__":
    sys.exit(main())
