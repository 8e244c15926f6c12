// Expired session tokens, against a server whose tokens live 1 second.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, sleep, expectHttpError, GRPC } from "./helpers.mjs";

let server;
before(async () => {
  server = await startServer({ MUSTER_SESSION__TOKEN_EXPIRY_SEC: "1" });
});
after(async () => {
  await server?.stop();
});

/** A session whose token has expired (its refresh token has not). */
async function expiredSession(client) {
  const session = await client.authenticateDevice(uniq("device"), true);
  const now = Date.now() / 1000;
  assert.ok(session.expires_at <= Math.ceil(now) + 1, `token expiry honours token_expiry_sec=1 (exp ${session.expires_at}, now ${now})`);
  // Fresh token works before it expires.
  await sleep(2100);
  assert.equal(session.isexpired(Date.now() / 1000), true, "nakama-js sees the token as expired");
  assert.equal(session.isrefreshexpired(Date.now() / 1000), false, "the refresh token is still valid");
  return session;
}

test("getAccount with an expired token fails with 401 when auto-refresh is off", async () => {
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await client.authenticateDevice(uniq("device"), true);
  assert.equal((await client.getAccount(session)).user.id, session.user_id, "works while fresh");
  await sleep(2100);
  const { body } = await expectHttpError(client.getAccount(session), 401);
  assert.equal(body.code, GRPC.UNAUTHENTICATED);
  assert.match(body.message, /expired/i, `message says the token expired: ${body.message}`);
  await expectHttpError(client.updateAccount(session, { display_name: "late" }), 401);
});

test("socket connect with an expired token fails with 401", async () => {
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await expiredSession(client);
  const socket = client.createSocket(false, false);
  await assert.rejects(socket.connect(session, false, 5000), (evt) => {
    const text = String(evt?.message ?? evt?.error?.message ?? evt);
    assert.match(text, /401/, `connect failure names HTTP 401: ${text}`);
    return true;
  });
  assert.equal(socket.adapter.isOpen(), false);
});

test("with auto-refresh on (the default), nakama-js refreshes the expired session and the call succeeds", async () => {
  const client = clientFor(server); // autoRefreshSession = true
  const session = await expiredSession(client);
  const oldToken = session.token;
  const account = await client.getAccount(session);
  assert.equal(account.user.id, session.user_id);
  assert.notEqual(session.token, oldToken, "the client swapped in a refreshed token");

  // And an explicit refresh yields a token the socket accepts.
  await client.sessionRefresh(session);
  const socket = client.createSocket(false, false);
  await socket.connect(session, false, 5000);
  try {
    assert.ok("pong" in (await socket.send({ ping: {} }, 3000)));
  } finally {
    socket.disconnect(false);
  }
});
