#!/usr/bin/env python3
"""A small headless game server for Muster's fleet tests (docs/fleet.md), written against the
Agones SDK's REST API only — no Muster code — the way a studio's own server would be.

It listens for players on TCP, marks itself Ready, sends health pings, and relays each player's
lines to the others. A player's first line is `TICKET <ticket>`: the ticket is redeemed through
the SDK port (`POST /muster/ticket`), the player is tracked (`/alpha/player/connect`) and
answered `WELCOME <user_id>` (or `DENIED <why>`, then closed). Every later line is sent to every
other player as `<user_id> <line>`. When the last player leaves it asks to shut down, or with
--reuse calls Ready again and waits for another room (Agones' GameServer reuse).

Flags for tests: --no-health (never pings), --crash-after S (exits with 3, S seconds after the
first player arrives), --ready-delay S, --pid-dir DIR (writes DIR/<pid> while running).
Only the standard library: runs on any Python 3.8+.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

SDK = "http://127.0.0.1:%s" % os.environ.get("AGONES_SDK_HTTP_PORT", "9358")


def sdk(method, path, body=None):
    """Calls the SDK; returns (status, parsed JSON)."""
    data = json.dumps(body).encode() if body is not None else b"{}"
    request = urllib.request.Request(SDK + path, data=data if method != "GET" else None, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


class Relay:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.players = {}  # socket -> user id
        self.ever = False

    def broadcast(self, sender, line):
        with self.lock:
            others = [s for s in self.players if s is not sender]
        for other in others:
            try:
                other.sendall(line)
            except OSError:
                pass

    def serve_player(self, conn):
        reader = conn.makefile("rb")
        user = None
        try:
            first = reader.readline(8192).decode(errors="replace").strip()
            if not first.startswith("TICKET "):
                conn.sendall(b"DENIED say TICKET <ticket> first\n")
                return
            status, answer = sdk("POST", "/muster/ticket", {"ticket": first[7:]})
            if status != 200:
                conn.sendall(("DENIED %s\n" % answer.get("message", status)).encode())
                return
            user = answer["user_id"]
            sdk("POST", "/alpha/player/connect", {"playerID": user})
            with self.lock:
                self.players[conn] = user
                first_player = not self.ever
                self.ever = True
            conn.sendall(("WELCOME %s\n" % user).encode())
            if first_player and self.args.crash_after is not None:
                threading.Thread(target=self.crash, daemon=True).start()
            for line in reader:
                self.broadcast(conn, ("%s %s" % (user, line.decode(errors="replace"))).encode())
        except OSError:
            pass
        finally:
            conn.close()
            if user is not None:
                sdk("POST", "/alpha/player/disconnect", {"playerID": user})
                with self.lock:
                    self.players.pop(conn, None)
                    empty = not self.players
                if empty and self.args.reuse:
                    with self.lock:
                        self.ever = False
                    sdk("POST", "/ready")
                elif empty:
                    sdk("POST", "/shutdown")

    def crash(self):
        time.sleep(self.args.crash_after)
        os._exit(3)


def health(every):
    while True:
        sdk("POST", "/health")
        time.sleep(every)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=int(os.environ.get("MUSTER_GAME_PORT", "7654")))
    parser.add_argument("--no-health", action="store_true")
    parser.add_argument("--crash-after", type=float)
    parser.add_argument("--ready-delay", type=float, default=0.0)
    parser.add_argument("--pid-dir")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.pid_dir:
        open(os.path.join(args.pid_dir, str(os.getpid())), "w").close()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", args.port))
    listener.listen(64)
    time.sleep(args.ready_delay)
    if not args.no_health:
        threading.Thread(target=health, args=(0.5,), daemon=True).start()
    status, _ = sdk("POST", "/ready")
    if status != 200:
        print("ready refused: %s" % status, file=sys.stderr)
        return 1
    print("ready on port %d" % args.port, flush=True)
    relay = Relay(args)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=relay.serve_player, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
