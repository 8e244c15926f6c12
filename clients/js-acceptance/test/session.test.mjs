// Session refresh and logout through nakama-js.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Session } from "@heroiclabs/nakama-js";
import { startServer, clientFor, uniq, uniqName, expectHttpError, sleep, GRPC } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
});

test("sessionRefresh gives a new, working session token for the same user", async () => {
  const username = uniqName("rf");
  const session = await client.authenticateDevice(uniq("device"), true, username, { tier: "gold" });
  const oldToken = session.token;
  const oldExpiry = session.expires_at;
  await sleep(1100); // a later iat/exp, so the new token cannot equal the old one

  const refreshed = await client.sessionRefresh(session);
  assert.notEqual(refreshed.token, oldToken, "a new token");
  assert.equal(refreshed.token.split(".").length, 3);
  assert.ok(refreshed.expires_at > oldExpiry, `later expiry: ${refreshed.expires_at} > ${oldExpiry}`);
  assert.equal(refreshed.user_id, session.user_id);
  assert.equal(refreshed.username, username);
  assert.ok(refreshed.refresh_token.length > 0, "a refresh token comes back");

  // The new token is accepted on its own (Session.restore drops everything but the two tokens).
  const restored = Session.restore(refreshed.token, refreshed.refresh_token);
  const account = await client.getAccount(restored);
  assert.equal(account.user.id, session.user_id);
  assert.equal(account.user.username, username);
});

test("a refresh leaves the old session token working, as Nakama does; the used refresh token is refused", async () => {
  const session = await client.authenticateDevice(uniq("device"), true, uniqName("rk"));
  const before = Session.restore(session.token, session.refresh_token);
  const refreshed = await client.sessionRefresh(Session.restore(session.token, session.refresh_token));
  // A request in flight with the old token still succeeds.
  const account = await client.getAccount(before);
  assert.equal(account.user.id, session.user_id);
  assert.notEqual(refreshed.refresh_token, before.refresh_token);
  // A refresh token works once (session.refresh_token_single_use, on by default).
  await expectHttpError(client.sessionRefresh(Session.restore(before.token, before.refresh_token)), 401);
  await client.sessionRefresh(Session.restore(refreshed.token, refreshed.refresh_token));
});

test("sessionRefresh carries new vars into the token", async () => {
  const session = await client.authenticateCustom(uniq("custom"), true, undefined, { a: "1" });
  assert.deepEqual(session.vars, { a: "1" });
  const refreshed = await client.sessionRefresh(session, { b: "2" });
  assert.deepEqual(refreshed.vars, { b: "2" });
});

test("sessionRefresh with a session token instead of a refresh token is refused", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const forged = Session.restore(session.token, session.token);
  const { body } = await expectHttpError(client.sessionRefresh(forged), 401);
  assert.equal(body.code, GRPC.UNAUTHENTICATED);
});

test("sessionRefresh with a bad server key is 401", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const bad = clientFor(server, { serverKey: "wrong-key" });
  await expectHttpError(bad.sessionRefresh(session), 401);
});

test("sessionLogout revokes the session token and the refresh token", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const { token, refresh_token } = session;
  assert.ok(await client.getAccount(session), "token works before logout");

  const ok = await client.sessionLogout(session, token, refresh_token);
  assert.equal(ok, true);

  const { body } = await expectHttpError(client.getAccount(Session.restore(token, refresh_token)), 401);
  assert.equal(body.code, GRPC.UNAUTHENTICATED);
  await expectHttpError(client.sessionRefresh(Session.restore(token, refresh_token)), 401);

  // The socket refuses the revoked token as well.
  const socket = client.createSocket(false, false);
  await assert.rejects(socket.connect(Session.restore(token, refresh_token), false, 5000),
    (evt) => /401/.test(String(evt?.message ?? evt)), "socket connect with a revoked token fails with 401");
});

test("sessionLogout of one session leaves the user's other sessions working", async () => {
  const deviceId = uniq("device");
  const a = await client.authenticateDevice(deviceId, true);
  await sleep(1100);
  const b = await client.authenticateDevice(deviceId, true);
  assert.notEqual(a.token, b.token);
  await client.sessionLogout(a, a.token, a.refresh_token);
  await expectHttpError(client.getAccount(Session.restore(a.token, a.refresh_token)), 401);
  const account = await client.getAccount(b);
  assert.equal(account.user.id, a.user_id);
});
