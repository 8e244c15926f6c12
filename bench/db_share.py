#!/usr/bin/env python3
"""The database's share of a durable call (bench/db-share.sh): for each kind of call, CALLS calls
at CONCURRENCY against a running Muster on PostgreSQL, and what PostgreSQL did for them, per
call — statements and rows (pg_stat_statements), WAL bytes (the WAL position before and after), and the
CPU of every PostgreSQL process (/proc). One JSON line per kind.

Usage: bench/db_share.py BASE_URL PG_PORT DB POSTMASTER_PID CALLS CONCURRENCY KINDS...
  KINDS: wallet (the built-in wallet_spend, 1 coin), storage (a 200-byte object written over),
         leaderboard (a score to the board `bench`, operator best).
Stdlib only: one keep-alive HTTP connection per caller thread.
"""
import base64
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")


def psql(port, db, sql):
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", db, "-Atc", sql],
        check=True, capture_output=True, text=True).stdout
    return [line.split("|") for line in out.strip().splitlines() if line]


def pg_ticks(postmaster):
    """CPU ticks of the postmaster and every process it started."""
    total = 0
    pids = [str(postmaster)]
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(postmaster)],
                              capture_output=True, text=True).stdout.split()
    for pid in pids + children:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


class Api:
    def __init__(self, base):
        url = urllib.parse.urlparse(base)
        self.host, self.port = url.hostname, url.port

    def connection(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=30)

    @staticmethod
    def call(conn, method, path, body, auth):
        conn.request(method, path, body=json.dumps(body), headers={
            "Authorization": auth, "Content-Type": "application/json"})
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{method} {path}: {answer.status} {data[:200]!r}")
        return json.loads(data or b"{}")


def players(api, count):
    conn = api.connection()
    basic = "Basic " + base64.b64encode(b"defaultkey:").decode()
    tokens = []
    for i in range(count):
        session = Api.call(conn, "POST", "/v2/account/authenticate/device?create=true",
                           {"id": f"db-share-player-{i:06d}"}, basic)
        tokens.append("Bearer " + session["token"])
    return tokens


def request(kind, i):
    if kind == "wallet":
        return "POST", "/v2/rpc/wallet_spend", json.dumps({"amount": 1})
    if kind == "storage":
        value = json.dumps({"level": i, "pad": "x" * 170})
        return "PUT", "/v2/storage", {"objects": [
            {"collection": "saves", "key": "slot", "value": value}]}
    if kind == "leaderboard":
        return "POST", "/v2/leaderboard/bench", {"score": str(i)}
    raise SystemExit(f"unknown kind {kind}")


def run(api, tokens, kind, calls, concurrency):
    per_thread = calls // concurrency
    errors = []

    def caller(t):
        conn = api.connection()
        try:
            for n in range(per_thread):
                i = t * per_thread + n
                method, path, body = request(kind, i)
                Api.call(conn, method, path, body, tokens[i % len(tokens)])
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(str(error))

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(concurrency)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{kind}: {errors[0]}")
    return per_thread * concurrency, time.monotonic() - started


def main():
    base, port, db, postmaster, calls, concurrency, *kinds = sys.argv[1:]
    port, postmaster, calls, concurrency = int(port), int(postmaster), int(calls), int(concurrency)
    api = Api(base)
    tokens = players(api, min(calls, 1000))
    for kind in kinds:
        # A warm-up so that every player's row exists and every statement is prepared.
        run(api, tokens, kind, len(tokens), min(concurrency, len(tokens)))
        psql(port, db, "SELECT pg_stat_statements_reset()")
        # The WAL's position: exact bytes (pg_stat_wal's counters are flushed lazily).
        wal_before = psql(port, db, "SELECT pg_current_wal_lsn()")[0][0]
        ticks_before = pg_ticks(postmaster)
        done, seconds = run(api, tokens, kind, calls, concurrency)
        ticks = pg_ticks(postmaster) - ticks_before
        wal_bytes = int(psql(port, db, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{wal_before}')")[0][0])
        rows = psql(port, db, f"""
            SELECT s.calls, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90)
            FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
            WHERE d.datname = '{db}' AND s.query !~* 'pg_stat' ORDER BY s.calls DESC""")
        statements = sum(int(r[0]) for r in rows)
        returned = sum(int(r[1]) for r in rows)
        print(json.dumps({
            "kind": kind, "calls": done, "seconds": round(seconds, 2),
            "calls_per_s": round(done / seconds, 1),
            "statements_per_call": round(statements / done, 3),
            "rows_per_call": round(returned / done, 3),
            "wal_bytes_per_call": round(wal_bytes / done, 1),
            "postgres_cpu_us_per_call": round(ticks * TICK_US / done, 1),
            "statements": [{"per_call": round(int(r[0]) / done, 3), "query": r[2]} for r in rows[:6]],
        }), flush=True)


if __name__ == "__main__":
    main()
