// getAccount / updateAccount through nakama-js.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Session } from "@heroiclabs/nakama-js";
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

test("getAccount returns the authenticated user's account", async () => {
  const deviceId = uniq("device");
  const username = uniqName("ga");
  const before = Date.now();
  const session = await client.authenticateDevice(deviceId, true, username);
  const account = await client.getAccount(session);

  assert.equal(account.user.id, session.user_id);
  assert.equal(account.user.username, username);
  assert.deepEqual(account.devices.map((d) => d.id), [deviceId]);
  const created = Date.parse(account.user.create_time);
  assert.ok(Number.isFinite(created), `create_time is a timestamp: ${account.user.create_time}`);
  assert.ok(Math.abs(created - before) < 60_000, "create_time is now");
  assert.ok(Number.isFinite(Date.parse(account.user.update_time)), "update_time is a timestamp");
  // Nakama clients JSON.parse these two strings. The wallet holds the starting grant
  // (economy.starting_wallet, empty by default as on Nakama; economy.test.mjs covers wallets).
  assert.equal(account.wallet, "{}");
  assert.deepEqual(JSON.parse(account.user.metadata ?? "{}"), {});
});

test("getAccount with a forged, tampered or missing token is 401", async () => {
  const victim = await client.authenticateDevice(uniq("device"), true);
  const session = await client.authenticateDevice(uniq("device"), true);
  const [h, p, s] = session.token.split(".");
  const withToken = (token) => {
    const copy = Session.restore(session.token, session.refresh_token);
    copy.token = token;
    return copy;
  };
  // Claims rewritten to another user's id, original signature kept.
  const claims = JSON.parse(Buffer.from(p, "base64url").toString());
  claims.uid = victim.user_id;
  const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${s}`;
  // Signature altered.
  const flipped = s[0] === "A" ? "B" + s.slice(1) : "A" + s.slice(1);
  for (const [what, token] of [["forged", forged], ["tampered", `${h}.${p}.${flipped}`], ["garbage", "not.a.jwt"], ["missing", ""]]) {
    const { body } = await expectHttpError(client.getAccount(withToken(token)), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED, what);
  }
  // The genuine token still works.
  assert.equal((await client.getAccount(session)).user.id, session.user_id);
});

test("updateAccount changes every profile field, visible in getAccount", async () => {
  const session = await client.authenticateDevice(uniq("device"), true, uniqName("old"));
  const newName = uniqName("new");
  const update = {
    username: newName,
    display_name: "Ünïcode Player 🎮",
    avatar_url: "https://cdn.example.com/avatars/42.png",
    lang_tag: "fr-CA",
    location: "Montréal",
    timezone: "America/Toronto",
  };
  assert.equal(await client.updateAccount(session, update), true);

  const account = await client.getAccount(session);
  assert.equal(account.user.id, session.user_id);
  assert.equal(account.user.username, newName);
  assert.equal(account.user.display_name, update.display_name);
  assert.equal(account.user.avatar_url, update.avatar_url);
  assert.equal(account.user.lang_tag, update.lang_tag);
  assert.equal(account.user.location, update.location);
  assert.equal(account.user.timezone, update.timezone);
});

test("updateAccount leaves fields it does not mention unchanged", async () => {
  const username = uniqName("keep");
  const session = await client.authenticateDevice(uniq("device"), true, username);
  await client.updateAccount(session, { display_name: "First", location: "Oslo" });
  await client.updateAccount(session, { timezone: "Europe/Oslo" });
  const account = await client.getAccount(session);
  assert.equal(account.user.username, username);
  assert.equal(account.user.display_name, "First");
  assert.equal(account.user.location, "Oslo");
  assert.equal(account.user.timezone, "Europe/Oslo");
});

test("a new username is used by later authentication, and the old one is freed", async () => {
  const deviceId = uniq("device");
  const oldName = uniqName("was");
  const newName = uniqName("now");
  const session = await client.authenticateDevice(deviceId, true, oldName);
  await client.updateAccount(session, { username: newName });

  const again = await client.authenticateDevice(deviceId, false);
  assert.equal(again.created, false);
  assert.equal(again.username, newName, "the session token carries the new username");

  const other = await client.authenticateDevice(uniq("device"), true);
  assert.equal(await client.updateAccount(other, { username: oldName }), true, "old username can be taken");
  assert.equal((await client.getAccount(other)).user.username, oldName);
});

test("updateAccount to a username another account holds is 409, and changes nothing", async () => {
  const takenName = uniqName("holder");
  await client.authenticateDevice(uniq("device"), true, takenName);
  const myName = uniqName("mine");
  const session = await client.authenticateDevice(uniq("device"), true, myName);

  const { body } = await expectHttpError(
    client.updateAccount(session, { username: takenName, display_name: "Should Not Stick" }), 409);
  assert.equal(body.code, GRPC.ALREADY_EXISTS);

  const account = await client.getAccount(session);
  assert.equal(account.user.username, myName);
  assert.notEqual(account.user.display_name, "Should Not Stick", "a refused update is not half-applied");
});

test("updateAccount keeping one's own username is not a conflict", async () => {
  const name = uniqName("self");
  const session = await client.authenticateDevice(uniq("device"), true, name);
  assert.equal(await client.updateAccount(session, { username: name, display_name: "Same" }), true);
  const account = await client.getAccount(session);
  assert.equal(account.user.username, name);
  assert.equal(account.user.display_name, "Same");
});

test("updateAccount with an empty username is 400", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const { body } = await expectHttpError(client.updateAccount(session, { username: "" }), 400);
  assert.equal(body.code, GRPC.INVALID_ARGUMENT);
});
