// Notifications through nakama-js, on SQLite and PostgreSQL: sent by server code (the HTTP key's
// notifications_send), delivered at once to the player's sockets (socket.onnotification, JSON
// and protobuf), the persistent ones listed oldest first with a cacheable cursor
// (listNotifications) and deleted (deleteNotifications).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServerOn, clientFor, uniq, expectHttpError, GRPC, ENGINES, Inbox } from "./helpers.mjs";

const HTTP_KEY = "defaulthttpkey";
const servers = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function serverOn(engine) {
  const server = await startServerOn(engine);
  servers.push(server);
  return clientFor(server, { autoRefreshSession: false });
}

function send(client, notifications) {
  return client.rpcHttpKey(HTTP_KEY, "notifications_send", { notifications });
}

async function listening(client, session, useProtobuf) {
  const socket = client.createSocket(false, false, useProtobuf ? new (await import("@heroiclabs/nakama-js-protobuf")).WebSocketAdapterPb() : undefined);
  const inbox = new Inbox();
  socket.onnotification = (n) => inbox.push(n);
  await socket.connect(session, false);
  return { socket, inbox };
}

for (const engine of ENGINES) {
  test(`${engine}: a notification reaches the player's socket at once; persistent ones are listed, paged and deleted`, async () => {
    const client = await serverOn(engine);
    const player = await client.authenticateDevice(uniq("device"), true);
    const sender = await client.authenticateDevice(uniq("device"), true);
    const { socket, inbox } = await listening(client, player, false);

    await send(client, [
      { user_id: player.user_id, subject: "Daily reward", content: { coins: 100 }, code: 101, persistent: true },
      { user_id: player.user_id, subject: "Typing…", content: {}, code: 102, persistent: false, sender_id: sender.user_id },
      { user_id: player.user_id, subject: "Season ends", content: { days: 3 }, code: 103, persistent: true },
    ]);
    const live = [];
    for (const code of [101, 102, 103]) {
      live.push(await inbox.next((n) => n.code === code, `notification ${code}`));
    }
    assert.deepEqual(live[0].content, { coins: 100 });
    assert.equal(live[0].persistent, true);
    assert.ok(!live[1].persistent, "a transient notification says so");
    assert.equal(live[1].sender_id, sender.user_id);
    assert.ok(Number.isFinite(Date.parse(live[0].create_time)));

    // Only the persistent ones are stored: oldest first, one page at a time.
    const first = await client.listNotifications(player, 1);
    assert.deepEqual(first.notifications.map((n) => n.subject), ["Daily reward"]);
    assert.equal(first.notifications[0].id, live[0].id, "the stored one is the one delivered");
    assert.ok(first.cacheable_cursor);
    const second = await client.listNotifications(player, 10, first.cacheable_cursor);
    assert.deepEqual(second.notifications.map((n) => [n.subject, n.code]), [["Season ends", 103]]);
    // The cacheable cursor finds only what is newer next time.
    const none = await client.listNotifications(player, 10, second.cacheable_cursor);
    assert.deepEqual(none.notifications, []);
    assert.equal(none.cacheable_cursor, second.cacheable_cursor);
    await send(client, [{ user_id: player.user_id, subject: "New quest", content: { quest: 7 }, code: 104, persistent: true }]);
    await inbox.next((n) => n.code === 104, "notification 104");
    const newer = await client.listNotifications(player, 10, second.cacheable_cursor);
    assert.deepEqual(newer.notifications.map((n) => n.subject), ["New quest"]);

    // Deleting: only the caller's own go; others' ids are ignored.
    const all = await client.listNotifications(player, 100);
    assert.equal(all.notifications.length, 3);
    assert.equal(await client.deleteNotifications(sender, all.notifications.map((n) => n.id)), true);
    assert.equal((await client.listNotifications(player, 100)).notifications.length, 3, "another player cannot delete them");
    assert.equal(await client.deleteNotifications(player, [all.notifications[0].id]), true);
    assert.deepEqual((await client.listNotifications(player, 100)).notifications.map((n) => n.subject), ["Season ends", "New quest"]);
    socket.disconnect(false);
  });

  test(`${engine}: bad requests get Nakama's errors and change nothing`, async () => {
    const client = await serverOn(engine);
    const player = await client.authenticateDevice(uniq("device"), true);
    let { body } = await expectHttpError(client.listNotifications(player, 101), 400);
    assert.equal(body.code, GRPC.INVALID_ARGUMENT);
    assert.match(body.message, /limit must be between 1 and 100/);
    ({ body } = await expectHttpError(client.listNotifications(player, 10, "not-a-cursor"), 400));
    assert.match(body.message, /Malformed cursor/);
    ({ body } = await expectHttpError(client.deleteNotifications(player, ["nope"]), 400));
    assert.equal(body.code, GRPC.INVALID_ARGUMENT);
    // Players cannot send them; server code cannot use the system's codes or a bad payload.
    ({ body } = await expectHttpError(client.rpc(player, "notifications_send", { notifications: [] }), 403));
    assert.equal(body.code, GRPC.PERMISSION_DENIED);
    for (const bad of [
      { user_id: player.user_id, subject: "x", content: {}, code: -2, persistent: true },
      { user_id: player.user_id, subject: "", content: {}, code: 1, persistent: true },
      { user_id: player.user_id, subject: "x", content: [1, 2], code: 1, persistent: true },
      { user_id: player.user_id, subject: "x", content: { big: "x".repeat(20000) }, code: 1, persistent: true },
    ]) {
      ({ body } = await expectHttpError(send(client, [bad]), 400));
      assert.equal(body.code, GRPC.INVALID_ARGUMENT, JSON.stringify(bad).slice(0, 80));
    }
    // A recipient that does not exist fails the whole send: nothing is stored.
    ({ body } = await expectHttpError(
      send(client, [
        { user_id: player.user_id, subject: "kept?", content: {}, code: 1, persistent: true },
        { user_id: "00000000-0000-4000-8000-000000000000", subject: "x", content: {}, code: 1, persistent: true },
      ]),
      404,
    ));
    assert.equal(body.code, GRPC.NOT_FOUND);
    assert.deepEqual((await client.listNotifications(player, 100)).notifications, []);
  });
}

test("the protobuf socket delivers notifications too", async () => {
  const client = await serverOn("sqlite");
  const player = await client.authenticateDevice(uniq("device"), true);
  const { socket, inbox } = await listening(client, player, true);
  await send(client, [{ user_id: player.user_id, subject: "pb", content: { n: 1 }, code: 7, persistent: false }]);
  const got = await inbox.next((n) => n.code === 7, "protobuf notification");
  assert.deepEqual(got.content, { n: 1 });
  assert.equal(got.subject, "pb");
  socket.disconnect(false);
});
