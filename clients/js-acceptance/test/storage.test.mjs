// Storage objects through nakama-js: writeStorageObjects, readStorageObjects,
// listStorageObjects (the collection's public objects, one user's, paged by cursor) and
// deleteStorageObjects, with Nakama's versions, conditional writes and permissions.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { startServer, clientFor, uniq, expectHttpError, GRPC } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
});

const md5 = (text) => createHash("md5").update(text).digest("hex");

test("a save is written, read back with its version, listed, and deleted", async () => {
  const alice = await client.authenticateDevice(uniq("device"), true);
  const bob = await client.authenticateDevice(uniq("device"), true);
  const save = { level: 3, inventory: ["sword"] };
  const acks = await client.writeStorageObjects(alice, [
    { collection: "saves", key: "slot1", value: save, permission_read: 2, permission_write: 1 },
    { collection: "saves", key: "settings", value: { music: false } },
  ]);
  assert.equal(acks.acks.length, 2);
  assert.equal(acks.acks[0].version, md5(JSON.stringify(save)), "the version is the MD5 of the value");
  assert.equal(acks.acks[0].user_id, alice.user_id);

  const read = await client.readStorageObjects(alice, {
    object_ids: [
      { collection: "saves", key: "slot1", user_id: alice.user_id },
      { collection: "saves", key: "settings", user_id: alice.user_id },
    ],
  });
  const byKey = Object.fromEntries(read.objects.map((o) => [o.key, o]));
  assert.deepEqual(byKey.slot1.value, save);
  assert.equal(byKey.slot1.permission_read, 2);
  assert.equal(byKey.settings.permission_read, 1, "read permission 1 by default");
  assert.deepEqual(byKey.settings.value, { music: false });

  // Bob sees only the public save, by read and by listing Alice's objects.
  const bobRead = await client.readStorageObjects(bob, {
    object_ids: [
      { collection: "saves", key: "slot1", user_id: alice.user_id },
      { collection: "saves", key: "settings", user_id: alice.user_id },
    ],
  });
  assert.deepEqual(bobRead.objects.map((o) => o.key), ["slot1"]);
  const listed = await client.listStorageObjects(bob, "saves", alice.user_id, 10);
  assert.deepEqual(listed.objects.map((o) => o.key), ["slot1"]);
  const own = await client.listStorageObjects(alice, "saves", alice.user_id, 10);
  assert.deepEqual(own.objects.map((o) => o.key).sort(), ["settings", "slot1"]);

  assert.equal(await client.deleteStorageObjects(alice, { object_ids: [{ collection: "saves", key: "slot1" }] }), true);
  const after = await client.readStorageObjects(alice, { object_ids: [{ collection: "saves", key: "slot1", user_id: alice.user_id }] });
  assert.deepEqual(after.objects, []);
});

test("conditional writes: '*' only if absent, a version only if unchanged; refusals are Nakama's", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const first = await client.writeStorageObjects(session, [{ collection: "progress", key: "quest", value: { step: 1 }, version: "*" }]);
  const v1 = first.acks[0].version;
  const again = await expectHttpError(client.writeStorageObjects(session, [{ collection: "progress", key: "quest", value: { step: 9 }, version: "*" }]), 400);
  assert.equal(again.body.code, GRPC.INVALID_ARGUMENT);
  assert.equal(again.body.message, "Storage write rejected - version check failed.");
  await client.writeStorageObjects(session, [{ collection: "progress", key: "quest", value: { step: 2 }, version: v1 }]);
  await expectHttpError(client.writeStorageObjects(session, [{ collection: "progress", key: "quest", value: { step: 3 }, version: v1 }]), 400);
  const now = await client.readStorageObjects(session, { object_ids: [{ collection: "progress", key: "quest", user_id: session.user_id }] });
  assert.deepEqual(now.objects[0].value, { step: 2 });
  const bad = await expectHttpError(client.writeStorageObjects(session, [{ collection: "", key: "k", value: {} }]), 400);
  assert.equal(bad.body.message, "Invalid collection or key value supplied. They must be set.");
});

test("listing a collection's public objects pages with the cursor nakama-js hands back", async () => {
  const collection = uniq("board");
  const keys = [];
  for (let i = 0; i < 3; i++) {
    const session = await client.authenticateDevice(uniq("device"), true);
    await client.writeStorageObjects(session, [
      { collection, key: `pub${i}`, value: { i }, permission_read: 2 },
      { collection, key: `pub${i}b`, value: { i }, permission_read: 2 },
      { collection, key: `private${i}`, value: { i } },
    ]);
    keys.push(`pub${i}`, `pub${i}b`);
  }
  const viewer = await client.authenticateDevice(uniq("device"), true);
  const seen = [];
  let cursor;
  for (let page = 0; page < 10; page++) {
    const result = await client.listStorageObjects(viewer, collection, undefined, 4, cursor);
    assert.ok(result.objects.length <= 4);
    seen.push(...result.objects.map((o) => o.key));
    cursor = result.cursor;
    if (!cursor) break;
  }
  assert.deepEqual(seen.sort(), keys.sort(), "every public object once, no private one");
  const forged = await expectHttpError(client.listStorageObjects(viewer, collection, viewer.user_id, 4, "bm90LWEtY3Vyc29y"), 400);
  assert.equal(forged.body.message, "Malformed cursor was used.");
});
