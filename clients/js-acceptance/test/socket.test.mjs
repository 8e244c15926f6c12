// Realtime socket through nakama-js: createSocket, connect, ping/pong by cid, errors, disconnect.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Session } from "@heroiclabs/nakama-js";
import { startServer, clientFor, uniq, sleep } from "./helpers.mjs";

let server;
let client;
const sockets = [];
before(async () => {
  server = await startServer();
  client = clientFor(server);
});
after(async () => {
  for (const s of sockets) s.disconnect(false);
  await server?.stop();
});

function newSocket(c = client) {
  const socket = c.createSocket(false, false);
  sockets.push(socket);
  return socket;
}

/** nakama-js rejects a failed connect with the WebSocket error event; `ws` names the HTTP status in it. */
const rejectedWith401 = (evt) => {
  const text = String(evt?.message ?? evt?.error?.message ?? evt);
  assert.match(text, /401/, `connect failure names HTTP 401: ${text}`);
  return true;
};

test("createSocket + connect opens an authenticated socket", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = newSocket();
  const result = await socket.connect(session, true, 5000);
  assert.equal(result, session, "connect resolves with the session");
  assert.equal(socket.adapter.isOpen(), true);
  socket.disconnect(false);
  assert.equal(socket.adapter.isOpen(), false);
});

test("ping round trip: the pong carries the ping's cid", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = newSocket();
  await socket.connect(session, false, 5000);

  // socket.send is nakama-js's own correlated send (the heartbeat uses exactly this message);
  // it resolves only when an envelope with the same cid arrives, and rejects on an error envelope.
  const started = performance.now();
  const reply = await socket.send({ ping: {} }, 3000);
  const rttMs = performance.now() - started;
  assert.ok(reply && typeof reply === "object", "a reply envelope");
  assert.ok("pong" in reply, `reply is a pong: ${JSON.stringify(reply)}`);
  assert.equal(typeof reply.cid, "string");
  assert.ok(rttMs < 1000, `local RTT ${rttMs} ms`);

  // Many pings in flight at once each get their own pong.
  const replies = await Promise.all(Array.from({ length: 20 }, () => socket.send({ ping: {} }, 3000)));
  const cids = replies.map((r) => r.cid);
  assert.equal(new Set(cids).size, 20, "20 distinct cids answered");
  for (const r of replies) assert.ok("pong" in r, JSON.stringify(r));
  socket.disconnect(false);
});

test("the nakama-js heartbeat keeps the socket alive", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = newSocket();
  let timedOut = false;
  let disconnected = false;
  socket.onheartbeattimeout = () => { timedOut = true; };
  socket.ondisconnect = () => { disconnected = true; };
  socket.setHeartbeatTimeoutMs(250); // heartbeat ping every 250 ms, each must be answered within 250 ms
  await socket.connect(session, false, 5000);
  await sleep(1500);
  assert.equal(timedOut, false, "no heartbeat timeout");
  assert.equal(disconnected, false, "not disconnected");
  assert.equal(socket.adapter.isOpen(), true);
  socket.disconnect(false);
});

test("an unknown envelope is answered with an error envelope for its cid; the socket stays usable", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = newSocket();
  await socket.connect(session, false, 5000);
  await assert.rejects(socket.send({ no_such_message: {} }, 3000), (err) => {
    assert.equal(typeof err, "object", `rejected with the error envelope, not a timeout: ${JSON.stringify(err)}`);
    assert.equal(typeof err.code, "number", JSON.stringify(err));
    assert.equal(typeof err.message, "string", JSON.stringify(err));
    return true;
  });
  assert.equal(socket.adapter.isOpen(), true, "still open");
  const reply = await socket.send({ ping: {} }, 3000);
  assert.ok("pong" in reply);
  socket.disconnect(false);
});

test("the same user may hold several sockets at once", async () => {
  const deviceId = uniq("device");
  const s1 = await client.authenticateDevice(deviceId, true);
  const s2 = await client.authenticateDevice(deviceId, true);
  const a = newSocket();
  const b = newSocket();
  await a.connect(s1, false, 5000);
  await b.connect(s2, false, 5000);
  const [ra, rb] = await Promise.all([a.send({ ping: {} }, 3000), b.send({ ping: {} }, 3000)]);
  assert.ok("pong" in ra && "pong" in rb);
  a.disconnect(false);
  b.disconnect(false);
});

test("socket connect with an invalid token fails with 401", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const [h, p] = session.token.split(".");
  const bad = Session.restore(`${h}.${p}.c2lnbmF0dXJlLW5vdC12YWxpZA`, session.refresh_token);
  const socket = newSocket();
  await assert.rejects(socket.connect(bad, false, 5000), rejectedWith401);
  assert.equal(socket.adapter.isOpen(), false);
});

test("socket connect with a refresh token in place of the session token fails with 401", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = newSocket();
  await assert.rejects(socket.connect(Session.restore(session.refresh_token, session.refresh_token), false, 5000),
    rejectedWith401);
});

test("server shutdown (SIGTERM) closes open sockets with a close frame", async () => {
  const own = await startServer();
  try {
    const c = clientFor(own);
    const session = await c.authenticateDevice(uniq("device"), true);
    const socket = newSocket(c);
    const closed = new Promise((resolve) => { socket.ondisconnect = resolve; });
    await socket.connect(session, false, 5000);
    assert.ok("pong" in (await socket.send({ ping: {} }, 3000)));
    await own.stop();
    const evt = await Promise.race([closed, sleep(5000).then(() => null)]);
    assert.ok(evt, "ondisconnect fired");
    assert.notEqual(evt.code, 1006, `a close frame was received (code ${evt.code}, not 1006 abnormal closure)`);
    assert.equal(evt.wasClean, true, "clean close");
  } finally {
    await own.stop();
  }
});
