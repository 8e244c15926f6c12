"""Muster's gRPC edge with grpcio's Python client, its stubs generated from Nakama's own protos
(run.sh generates them): the calls a native client makes answer as Nakama's do, the same as the
REST API for the same request, and the edge's reflection lists Nakama's service."""

import base64
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, wrappers_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from api import api_pb2
from apigrpc import apigrpc_pb2_grpc

SERVER_KEY = "Basic " + base64.b64encode(b"defaultkey:").decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.data = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.grpc_port = free_port()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "MUSTER_LIMITS__AUTH_PER_IP_PER_SEC": "0",
            "MUSTER_ROOMS__TCP_LISTEN": "127.0.0.1:0",
            "MUSTER_ENET__LISTEN": "127.0.0.1:0",
            "MUSTER_LINKS__LISTEN": "",
            "MUSTER_GRPC__LISTEN": f"127.0.0.1:{self.grpc_port}",
        }
        self.process = subprocess.Popen(
            [os.environ["SERVER_BIN"], "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", self.data.name, "--log", "warn"],
            env=env,
        )
        deadline = time.time() + 30
        while True:
            try:
                self.rest("GET", "/healthcheck")
                break
            except OSError:
                if time.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError("muster did not start")
                time.sleep(0.1)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.nakama = apigrpc_pb2_grpc.NakamaStub(self.channel)

    def rest(self, method, path, body=None, auth=None):
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

    def close(self):
        self.channel.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        self.data.cleanup()


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.close()


def session(server, device):
    return server.nakama.AuthenticateDevice(
        api_pb2.AuthenticateDeviceRequest(
            account=api_pb2.AccountDevice(id=device),
            create=wrappers_pb2.BoolValue(value=True),
        ),
        metadata=[("authorization", SERVER_KEY)],
    )


def bearer(token):
    return [("authorization", "Bearer " + token)]


def as_json(message):
    """A message as Nakama's gateway writes it: proto field names, enums as numbers."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, use_integers_for_enums=True
    )


def utc(value):
    """protobuf's JSON mapping writes UTC as Z; Python's may use +00:00."""
    if isinstance(value, dict):
        return {k: utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utc(v) for v in value]
    if isinstance(value, str) and value.endswith("+00:00"):
        return value[: -len("+00:00")] + "Z"
    return value


def test_a_device_signs_in_and_reads_its_account(server):
    first = session(server, "python-grpc-device-1")
    assert first.created
    again = session(server, "python-grpc-device-1")
    assert not again.created
    account = server.nakama.GetAccount(empty_pb2.Empty(), metadata=bearer(first.token))
    assert account.devices[0].id == "python-grpc-device-1"
    rest = server.rest("GET", "/v2/account", auth="Bearer " + first.token)
    assert utc(as_json(account)) == utc(rest)


def test_storage_round_trip_matches_rest(server):
    token = session(server, "python-grpc-device-2").token
    acks = server.nakama.WriteStorageObjects(
        api_pb2.WriteStorageObjectsRequest(objects=[api_pb2.WriteStorageObject(
            collection="saves", key="slot", value='{"hp": 10}',
            permission_read=wrappers_pb2.Int32Value(value=2),
        )]),
        metadata=bearer(token),
    )
    owner = acks.acks[0].user_id
    listed = server.nakama.ListStorageObjects(
        api_pb2.ListStorageObjectsRequest(collection="saves", user_id=owner,
                                          limit=wrappers_pb2.Int32Value(value=10)),
        metadata=bearer(token),
    )
    assert [o.key for o in listed.objects] == ["slot"]
    rest = server.rest("GET", f"/v2/storage/saves/{owner}?limit=10", auth="Bearer " + token)
    assert utc(as_json(listed)) == utc(rest)


def test_errors_carry_nakamas_codes(server):
    with pytest.raises(grpc.RpcError) as refused:
        server.nakama.GetAccount(empty_pb2.Empty(), metadata=bearer("forged"))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as no_key:
        server.nakama.AuthenticateDevice(
            api_pb2.AuthenticateDeviceRequest(account=api_pb2.AccountDevice(id="python-grpc-3")))
    assert no_key.value.code() == grpc.StatusCode.UNAUTHENTICATED
    token = session(server, "python-grpc-device-4").token
    # A purchase call of a store without its settings: Nakama's FailedPrecondition.
    with pytest.raises(grpc.RpcError) as unconfigured:
        server.nakama.ValidatePurchaseHuawei(
            api_pb2.ValidatePurchaseHuaweiRequest(purchase="{}", signature="c2ln"),
            metadata=bearer(token))
    assert unconfigured.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert unconfigured.value.details() == "Huawei IAP is not configured."
    with pytest.raises(grpc.RpcError) as unserved:
        server.nakama.ValidatePurchaseSamsung(api_pb2.ValidatePurchaseSamsungRequest(),
                                              metadata=bearer(token))
    assert unserved.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "ValidatePurchaseSamsung" in unserved.value.details()


def test_reflection_lists_nakamas_service(server):
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    answers = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    names = {s.name for answer in answers for s in answer.list_services_response.service}
    assert "nakama.api.Nakama" in names
