"""What the stepping benches (bench/economy.sh, storage.sh, leaderboard.sh) read back from a step's
directory: the hold window measured by `measure_hold` (bench/swarm-common.sh) and the group-commit
batch sizes between its two /metrics snapshots; and the chat benches' level sweeps. Their summaries
import it (PYTHONPATH=bench)."""
import json
import re
import statistics


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def hold(step_dir, seconds, calls):
    """Muster's CPU (cores, and µs per call), swarm's CPU, how busy the machine was, Muster's
    bytes written per call and its RSS at the end, over a hold of `seconds` with `calls` calls."""
    (cf, ct, mf_busy, mf_total, mt_busy, mt_total, hz, sf, st, df, dt, rss) = map(
        float, open(f"{step_dir}/cpu").read().split())
    return {
        "musterCpuCores": round((ct - cf) / hz / seconds, 2),
        "musterCpuUsPerCall": round((ct - cf) / hz / max(1, calls) * 1e6, 1),
        "swarmCpuCores": round((st - sf) / hz / seconds, 2),
        "musterDiskBytesPerCall": round((dt - df) / max(1, calls)),
        "machineBusy": round((mt_busy - mf_busy) / max(1, mt_total - mf_total), 2),
        "musterRssMiB": round(rss / 1024),
    }


def _histogram(path):
    buckets, total, count = {}, 0.0, 0
    for line in open(path):
        m = re.match(r'muster_db_group_commit_size_bucket\{le="([^"]+)"\} (\S+)', line)
        if m:
            buckets[m.group(1)] = float(m.group(2))
        if line.startswith("muster_db_group_commit_size_sum "):
            total = float(line.split()[1])
        if line.startswith("muster_db_group_commit_size_count "):
            count = float(line.split()[1])
    return buckets, total, count


def group_commits(step_dir, hold_s):
    """Group commits over the hold: how many, per second (over `hold_s` less the 3 s left out),
    the mean batch, the smallest bucket bounds holding half and 99 % of them, and the buckets."""
    b1, s1, c1 = _histogram(f"{step_dir}/metrics-from")
    b2, s2, c2 = _histogram(f"{step_dir}/metrics-to")
    commits = c2 - c1
    if commits <= 0:
        return {"commits": 0}
    # Cumulative bucket counts over the window, and the smallest bound holding half / 99 %.
    cum = sorted(((float("inf") if k == "+Inf" else float(k), b2.get(k, 0) - b1.get(k, 0))
                  for k in b2))

    def bound(q):
        for le, n in cum:
            if n >= q * commits:
                return le
        return None
    return {"commits": int(commits), "commitsPerS": round(commits / max(1, hold_s - 3), 1),
            "meanBatch": round((s2 - s1) / commits, 1), "p50BatchAtMost": bound(0.5),
            "p99BatchAtMost": bound(0.99),
            "writesPerCommitBuckets": {("inf" if le == float("inf") else int(le)): int(n)
                                       for le, n in cum}}


def sweeps(work, runs):
    """The level sweeps of bench/chat.sh and bench/chat-redis.sh: each run's levels (one JSON line
    each in WORK/levels-N, with `pass` and `deliveredPerS`) and its best passing level."""
    out = []
    for i in range(1, int(runs) + 1):
        levels = [json.loads(l) for l in open(f"{work}/levels-{i}") if l.strip()]
        passing = [l for l in levels if l["pass"]]
        best = max(passing, key=lambda l: l["deliveredPerS"]) if passing else None
        out.append({"best": best, "levels": levels})
    return out


def best_medians(out, keys):
    """The median of each key over the runs' best levels (None where no run passed)."""
    bests = [r["best"] for r in out if r["best"]]
    return {k: median(b.get(k) for b in bests) for k in keys}
