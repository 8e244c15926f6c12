"""Muster's ENet transport spoken by pyenet, the Python binding of ENet 1.3's C library.

Each test starts the real server binary (SERVER_BIN) on free ports, makes a player and a room
over HTTP, and plays through ENet: the ticket from the room's connection info in the first
packet, inputs on the reliable channel, the arena's state on the unreliable one.

The realtime envelopes are protobuf; the few fields used here are written and read by hand
below (field numbers from Nakama's realtime protocol, as Muster speaks it).
"""

import base64
import json
import os
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

import enet
import pytest

# Envelope fields.
CID, ERROR, MATCH, MATCH_DATA, MATCH_DATA_SEND, MATCH_JOIN, PING, PONG = 1, 11, 12, 14, 15, 16, 32, 33
# The arena game's op codes.
OP_INPUT, OP_STATE, OP_WELCOME = 1, 2, 3


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(tag, value):
    if isinstance(value, int):
        return varint(tag << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint((tag << 3) | 2) + varint(len(value)) + value


def read_varint(buf, i):
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def fields(buf):
    """The message's fields as {number: value}, the last one of each number winning."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        tag, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(buf, i)
        elif wire == 2:
            length, i = read_varint(buf, i)
            value, i = bytes(buf[i:i + length]), i + length
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        out[tag] = value
    return out


def envelope(cid, kind, body):
    return field(CID, cid) + field(kind, body)


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.data = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.enet_port = free_port(socket.SOCK_DGRAM)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "MUSTER_LIMITS__AUTH_PER_IP_PER_SEC": "0",
            "MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC": "0",
            "MUSTER_LIMITS__HANDSHAKE_TIMEOUT_MS": "1000",
            "MUSTER_ROOMS__TCP_LISTEN": "127.0.0.1:0",
            "MUSTER_LINKS__LISTEN": "127.0.0.1:0",
            "MUSTER_GRPC__LISTEN": "127.0.0.1:0",
            "MUSTER_ENET__LISTEN": f"127.0.0.1:{self.enet_port}",
        }
        self.process = subprocess.Popen(
            [os.environ["SERVER_BIN"], "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", self.data.name, "--log", "warn"],
            env=env,
        )
        deadline = time.time() + 30
        while True:
            try:
                self.http("GET", "/healthcheck")
                return
            except OSError:
                if time.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError("muster did not start")
                time.sleep(0.1)

    def http(self, method, path, body=None, auth=None):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        if auth:
            request.add_header("authorization", auth)
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return json.loads(text) if text else None

    def player(self, device):
        basic = "Basic " + base64.b64encode(b"defaultkey:").decode()
        session = self.http("POST", "/v2/account/authenticate/device?create=true",
                            {"id": device}, basic)
        return "Bearer " + session["token"]

    def metric(self, series):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(series + " "):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=15)
        self.data.cleanup()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


def room_connection(server, device="pyenet-owner-0001"):
    player = server.player(device)
    room = server.http("POST", "/v2/rooms",
                       {"handler": "arena", "capacity": 2, "params": {"tick_rate_hz": "20"}},
                       player)
    info = server.http("GET", f"/v2/rooms/{room['room_id']}/connection", auth=player)
    assert info["enet"]["port"] == server.enet_port
    return room["room_id"], info


class Player:
    """One pyenet host with one peer to the server."""

    def __init__(self, info):
        self.host = enet.Host(None, 1, 2, 0, 0)
        address = enet.Address(info["enet"]["host"].encode(), info["enet"]["port"])
        self.peer = self.host.connect(address, 2)
        self.pending = []
        event = self.wait(lambda e: e.type != enet.EVENT_TYPE_NONE)
        assert event.type == enet.EVENT_TYPE_CONNECT

    def wait(self, accept, timeout=10.0):
        """The first event `accept` takes (it sees every event until then)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            event = self.host.service(20)
            if event.type != enet.EVENT_TYPE_NONE and accept(event):
                return event
        raise AssertionError("nothing came in time")

    def send(self, data, channel=0, reliable=True):
        flags = enet.PACKET_FLAG_RELIABLE if reliable else 0
        self.peer.send(channel, enet.Packet(data, flags))
        self.host.flush()

    def envelope(self, kind, timeout=10.0):
        """(channel, envelope fields, message fields) of the next envelope of `kind`; envelopes
        of other kinds that come first are kept for later calls."""
        for i, (channel, env) in enumerate(self.pending):
            if kind in env:
                del self.pending[i]
                return channel, env, fields(env[kind])
        found = {}

        def accept(event):
            if event.type == enet.EVENT_TYPE_DISCONNECT:
                raise AssertionError(f"disconnected ({event.data}) waiting for {kind}")
            if event.type != enet.EVENT_TYPE_RECEIVE:
                return False
            env = fields(event.packet.data)
            if kind in env:
                found["it"] = (event.channelID, env, fields(env[kind]))
                return True
            self.pending.append((event.channelID, env))
            return False

        self.wait(accept, timeout)
        return found["it"]

    def disconnected(self):
        return self.wait(lambda e: e.type == enet.EVENT_TYPE_DISCONNECT).data


def test_a_pyenet_player_joins_plays_and_leaves(server):
    room, info = room_connection(server)
    player = Player(info)
    player.send(envelope("1", MATCH_JOIN, field(2, info["ticket"])))
    channel, env, joined = player.envelope(MATCH)
    assert (channel, env[CID], joined[1].decode()) == (0, b"1", room)

    # The welcome (reliable) and the first states (unreliable) travel on different channels:
    # either may come first.
    for _ in range(100):
        channel, _, welcome = player.envelope(MATCH_DATA)
        if welcome[3] == OP_WELCOME:
            assert channel == 0 and welcome[5] == 1, "an event travels reliably"
            break
    else:
        raise AssertionError("no welcome")
    slot = welcome[4][0]

    # Reliable inputs on channel 0, and one unreliable on channel 1.
    for seq in range(1, 6):
        data = struct.pack("<Ibb", seq, 1, 0)
        body = field(1, room) + field(2, OP_INPUT) + field(3, data) + field(5, 1)
        player.send(envelope("", MATCH_DATA_SEND, body))
    data = struct.pack("<Ibb", 6, 0, 1)
    player.send(envelope("", MATCH_DATA_SEND, field(1, room) + field(2, OP_INPUT) + field(3, data)),
                channel=1, reliable=False)

    deadline = time.time() + 10
    while True:
        assert time.time() < deadline, "the inputs were never applied"
        channel, _, state = player.envelope(MATCH_DATA)
        if state[3] != OP_STATE:
            continue
        assert channel == 1, "the state travels unreliable"
        assert 5 not in state or state[5] == 0, "and says so"
        tick, count = struct.unpack_from("<IB", state[4])
        players = [struct.unpack_from("<BffI", state[4], 5 + 13 * i) for i in range(count)]
        me = next(p for p in players if p[0] == slot)
        if me[3] >= 5:
            assert me[1] > 0
            break

    player.send(envelope("p", PING, b""))
    channel, env, _ = player.envelope(PONG)
    assert (channel, env[CID]) == (0, b"p")

    player.peer.disconnect()
    player.disconnected()
    deadline = time.time() + 10
    while server.metric('muster_sockets_closed_total{reason="enet_client_closed"}') != 1.0:
        assert time.time() < deadline, "the server never recorded the close"
        time.sleep(0.05)


def test_wrong_and_reused_tickets_are_refused(server):
    _, info = room_connection(server)
    forged = Player(info)
    forged.send(envelope("f", MATCH_JOIN, field(2, "not-a-ticket")))
    _, env, error = forged.envelope(ERROR)
    assert env[CID] == b"f" and error.get(1, 0) != 0
    assert forged.disconnected() == 5

    first = Player(info)
    first.send(envelope("1", MATCH_JOIN, field(2, info["ticket"])))
    first.envelope(MATCH)
    second = Player(info)
    second.send(envelope("2", MATCH_JOIN, field(2, info["ticket"])))
    second.envelope(ERROR)
    assert second.disconnected() == 5

    silent = Player(info)
    assert silent.disconnected() == 2, "no join within the handshake timeout"


def test_an_oversized_packet_gets_an_error_then_a_disconnect(server):
    """A reliable packet over twice socket.max_message_size_bytes (4096 by default) is more
    than ENet reassembles: the server says why and ends the peer, instead of leaving the
    sender's reliable channel stalled until ENet times it out."""
    _, info = room_connection(server)
    player = Player(info)
    player.send(envelope("1", MATCH_JOIN, field(2, info["ticket"])))
    player.envelope(MATCH)
    player.send(b"\x00" * 20000)
    _, _, error = player.envelope(ERROR)
    assert error.get(1, 0) == 3
    assert b"too big" in error.get(2, b"")
    assert player.disconnected() == 4
