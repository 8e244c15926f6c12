// Authentication through nakama-js: device, email, custom; create flag; usernames; bad server key.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, uniqName, expectHttpError, GRPC } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
});

/** Checks every session field nakama-js decodes from the JWT. */
function assertSession(session, { created, username }) {
  assert.equal(session.created, created, "session.created");
  assert.equal(typeof session.token, "string");
  assert.equal(session.token.split(".").length, 3, "token is a JWT");
  assert.equal(typeof session.refresh_token, "string");
  assert.equal(session.refresh_token.split(".").length, 3, "refresh_token is a JWT");
  assert.match(session.user_id ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "user_id (uid claim) is a UUID");
  if (username !== undefined) assert.equal(session.username, username, "username (usn claim)");
  else assert.ok(session.username && session.username.length > 0, "server generated a username");
  const now = Date.now() / 1000;
  assert.ok(session.expires_at > now + 3000 && session.expires_at < now + 3700,
    `expires_at (exp claim) ~1 h ahead by default, got ${session.expires_at - now}s`);
  assert.ok(session.refresh_expires_at > session.expires_at, "refresh token outlives the session token");
  assert.equal(session.isexpired(now), false);
}

test("authenticateDevice creates the account first, then finds it", async () => {
  const deviceId = uniq("device");
  const username = uniqName("dev");
  const first = await client.authenticateDevice(deviceId, true, username);
  assertSession(first, { created: true, username });

  const second = await client.authenticateDevice(deviceId, true, username);
  assertSession(second, { created: false, username });
  assert.equal(second.user_id, first.user_id, "same device, same user");

  const account = await client.getAccount(second);
  assert.equal(account.user.id, first.user_id);
  assert.equal(account.user.username, username);
  assert.ok(account.devices.some((d) => d.id === deviceId), "device listed on the account");
});

test("authenticateDevice without a username gets a generated one; other devices get other users", async () => {
  const a = await client.authenticateDevice(uniq("device"), true);
  assertSession(a, { created: true });
  const b = await client.authenticateDevice(uniq("device"), true);
  assertSession(b, { created: true });
  assert.notEqual(a.user_id, b.user_id);
  assert.notEqual(a.username, b.username);
});

test("authenticateDevice with create=false on an unknown device is 404", async () => {
  const { body } = await expectHttpError(client.authenticateDevice(uniq("device"), false), 404);
  assert.equal(body.code, GRPC.NOT_FOUND);
});

test("authenticateEmail creates the account first, then logs in", async () => {
  const email = `${uniqName("mail")}@example.com`;
  const username = uniqName("em");
  const first = await client.authenticateEmail(email, "correct-horse-battery", true, username);
  assertSession(first, { created: true, username });

  const second = await client.authenticateEmail(email, "correct-horse-battery", false);
  assertSession(second, { created: false, username });
  assert.equal(second.user_id, first.user_id);

  const account = await client.getAccount(second);
  assert.equal(account.email, email);
  assert.equal(account.user.username, username);
});

test("authenticateEmail with a wrong password is rejected with 401 and no session", async () => {
  const email = `${uniqName("mail")}@example.com`;
  await client.authenticateEmail(email, "correct-horse-battery", true);
  for (const create of [false, true]) {
    const { body } = await expectHttpError(client.authenticateEmail(email, "wrong-password-123", create), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED);
    assert.doesNotMatch(body.message, /token/i, "a credentials error, not a token error");
  }
});

test("authenticateEmail with a too-short password is 400", async () => {
  const { body } = await expectHttpError(
    client.authenticateEmail(`${uniqName("mail")}@example.com`, "short", true), 400);
  assert.equal(body.code, GRPC.INVALID_ARGUMENT);
});

test("authenticateCustom creates the account first, then finds it; vars reach the token", async () => {
  const customId = uniq("custom");
  const username = uniqName("cu");
  const first = await client.authenticateCustom(customId, true, username, { level: "7", team: "red" });
  assertSession(first, { created: true, username });
  assert.deepEqual(first.vars, { level: "7", team: "red" }, "vars (vrs claim)");

  const second = await client.authenticateCustom(customId, true, username);
  assertSession(second, { created: false, username });
  assert.equal(second.user_id, first.user_id);

  const account = await client.getAccount(second);
  assert.equal(account.custom_id, customId);
});

test("a username already taken by another account is refused with 409 on create", async () => {
  const username = uniqName("taken");
  await client.authenticateCustom(uniq("custom"), true, username);
  const { body } = await expectHttpError(client.authenticateCustom(uniq("custom"), true, username), 409);
  assert.equal(body.code, GRPC.ALREADY_EXISTS);
});

test("a bad server key is a clear 401 from every authenticate call", async () => {
  const bad = clientFor(server, { serverKey: "not-the-server-key" });
  for (const call of [
    () => bad.authenticateDevice(uniq("device"), true),
    () => bad.authenticateEmail(`${uniqName("mail")}@example.com`, "correct-horse-battery", true),
    () => bad.authenticateCustom(uniq("custom"), true),
  ]) {
    const { body } = await expectHttpError(call(), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED);
    assert.match(body.message, /server key/i, `message names the server key: ${body.message}`);
  }
  // And nothing was created: the right key with create=false still finds no such device.
  const id = uniq("device");
  await expectHttpError(bad.authenticateDevice(id, true), 401);
  await expectHttpError(client.authenticateDevice(id, false), 404);
});
