// Users and an account's lifecycle through nakama-js, on SQLite and PostgreSQL: getUsers (public
// fields only), linkDevice / linkCustom / linkEmail and their unlinks (a credential another
// account holds is refused, the last one cannot go), deleteAccount (its tokens and sockets end,
// its storage objects and leaderboard records go with it).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServerOn, clientFor, uniq, uniqName, expectHttpError, GRPC, ENGINES } from "./helpers.mjs";

const servers = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function serverOn(engine) {
  const server = await startServerOn(engine, {
    MUSTER_LEADERBOARDS__BOARDS: '[{id="score", sort_order="desc", operator="best"}]',
  });
  servers.push(server);
  return clientFor(server, { autoRefreshSession: false });
}

for (const engine of ENGINES) {
  test(`${engine}: getUsers finds accounts by id and username, with public fields only`, async () => {
    const client = await serverOn(engine);
    const aliceName = uniqName("alice");
    const alice = await client.authenticateDevice(uniq("device"), true, aliceName);
    const bob = await client.authenticateEmail(`${uniqName("bob")}@example.com`, "a-long-password", true);
    await client.updateAccount(bob, { display_name: "Bob the Builder", location: "Helsinki" });

    const found = await client.getUsers(alice, [bob.user_id, alice.user_id], [aliceName]);
    const byId = Object.fromEntries(found.users.map((u) => [u.id, u]));
    assert.equal(found.users.length, 2, "each account once, whether named by id or username");
    assert.equal(byId[bob.user_id].display_name, "Bob the Builder");
    assert.equal(byId[bob.user_id].location, "Helsinki");
    assert.equal(byId[alice.user_id].username, aliceName);
    for (const user of found.users) {
      assert.ok(!("email" in user) && !("devices" in user) && !("wallet" in user), "no private fields");
      assert.ok(Number.isFinite(Date.parse(user.create_time)));
    }

    const none = await client.getUsers(alice, ["00000000-0000-4000-8000-000000000000"], ["nobody-" + uniqName()]);
    assert.deepEqual(none.users ?? [], [], "unknown ids and names are left out");
    const { body } = await expectHttpError(client.getUsers(alice, ["not-a-uuid"]), 400);
    assert.equal(body.code, GRPC.INVALID_ARGUMENT);
    assert.match(body.message, /not a valid system ID/);
  });

  test(`${engine}: link and unlink device, custom id and email; taken and last credentials are refused`, async () => {
    const client = await serverOn(engine);
    const firstDevice = uniq("device");
    const session = await client.authenticateDevice(firstDevice, true);
    const other = await client.authenticateDevice(uniq("device"), true);

    const secondDevice = uniq("device");
    const customId = uniq("custom");
    const email = `${uniqName("link")}@example.com`;
    assert.equal(await client.linkDevice(session, { id: secondDevice }), true);
    assert.equal(await client.linkCustom(session, { id: customId }), true);
    assert.equal(await client.linkEmail(session, { email, password: "correct-horse" }), true);
    let account = await client.getAccount(session);
    assert.deepEqual(account.devices.map((d) => d.id).sort(), [firstDevice, secondDevice].sort());
    assert.equal(account.custom_id, customId);
    assert.equal(account.email, email);
    // Each credential now logs in to the same account.
    assert.equal((await client.authenticateDevice(secondDevice, false)).user_id, session.user_id);
    assert.equal((await client.authenticateCustom(customId, false)).user_id, session.user_id);
    assert.equal((await client.authenticateEmail(email, "correct-horse", false)).user_id, session.user_id);

    // Another account cannot take them.
    for (const [what, call, message] of [
      ["device", () => client.linkDevice(other, { id: secondDevice }), /Device ID already in use/],
      ["custom", () => client.linkCustom(other, { id: customId }), /Custom ID is already in use/],
      ["email", () => client.linkEmail(other, { email, password: "whatever-long" }), /Email is already in use/],
    ]) {
      const { body } = await expectHttpError(call(), 409);
      assert.equal(body.code, GRPC.ALREADY_EXISTS, what);
      assert.match(body.message, message);
    }
    const { body: short } = await expectHttpError(client.linkDevice(other, { id: "short" }), 400);
    assert.equal(short.code, GRPC.INVALID_ARGUMENT);
    assert.deepEqual((await client.getAccount(other)).custom_id ?? "", "", "a refused link changes nothing");

    // Unlink all but one; the last is refused and stays.
    assert.equal(await client.unlinkEmail(session, { email, password: "" }), true);
    assert.equal(await client.unlinkCustom(session, { id: customId }), true);
    assert.equal(await client.unlinkDevice(session, { id: secondDevice }), true);
    const { body: last } = await expectHttpError(client.unlinkDevice(session, { id: firstDevice }), 403);
    assert.equal(last.code, GRPC.PERMISSION_DENIED);
    assert.match(last.message, /Cannot unlink last account identifier/);
    const { body: notMine } = await expectHttpError(client.unlinkDevice(other, { id: firstDevice }), 403);
    assert.equal(notMine.code, GRPC.PERMISSION_DENIED, "another account's device cannot be unlinked");
    account = await client.getAccount(session);
    assert.deepEqual(account.devices.map((d) => d.id), [firstDevice]);
    assert.ok(!account.email && !account.custom_id);
    await expectHttpError(client.authenticateCustom(customId, false), 404);
  });

  test(`${engine}: deleteAccount ends the account's tokens and sockets and removes what it owned`, async () => {
    const client = await serverOn(engine);
    const device = uniq("device");
    const doomed = await client.authenticateDevice(device, true);
    const watcher = await client.authenticateDevice(uniq("device"), true);
    await client.writeStorageObjects(doomed, [{ collection: "saves", key: "slot", value: { level: 9 }, permission_read: 2 }]);
    await client.writeLeaderboardRecord(doomed, "score", { score: 500 });
    await client.writeLeaderboardRecord(watcher, "score", { score: 100 });
    const socket = client.createSocket(false, false);
    await socket.connect(doomed, false);
    const closed = new Promise((resolve) => {
      socket.ondisconnect = resolve;
    });

    assert.equal(await client.deleteAccount(doomed), true);
    await closed;
    const { body } = await expectHttpError(client.getAccount(doomed), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED);
    const listed = await client.listStorageObjects(watcher, "saves", doomed.user_id);
    assert.deepEqual(listed.objects ?? [], [], "its storage objects are gone");
    const records = await client.listLeaderboardRecords(watcher, "score");
    assert.deepEqual(records.records.map((r) => r.owner_id), [watcher.user_id], "its record left the board");
    assert.equal(records.records[0].rank, 1, "the others moved up");
    assert.deepEqual((await client.getUsers(watcher, [doomed.user_id])).users ?? [], []);
    // The device is free again: it creates a new account.
    const again = await client.authenticateDevice(device, true);
    assert.notEqual(again.user_id, doomed.user_id);
  });
}
