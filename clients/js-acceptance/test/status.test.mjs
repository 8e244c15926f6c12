// Status through nakama-js (JSON and protobuf sockets), on SQLite and PostgreSQL: followUsers
// answered with the followed users' sessions online now, socket.onstatuspresence for each
// appearance, change and departure (connect with status=true, updateStatus, updateStatus() to
// appear offline, a socket that closes), unfollowUsers; Nakama's errors; the per-socket bound on
// follows.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServerOn, clientFor, uniqName, uniq, Inbox, ENGINES } from "./helpers.mjs";

const servers = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function serverWith(engine, env = {}) {
  const server = await startServerOn(engine, env);
  servers.push(server);
  return clientFor(server, { autoRefreshSession: false });
}

/** A player whose status events land in `inbox`; `online` connects with status=true. */
async function player(client, prefix, { online = false, protobuf = false } = {}) {
  const username = uniqName(prefix);
  const session = await client.authenticateDevice(uniq("device"), true, username);
  const adapter = protobuf ? new (await import("@heroiclabs/nakama-js-protobuf")).WebSocketAdapterPb() : undefined;
  const socket = client.createSocket(false, false, adapter);
  const inbox = new Inbox();
  socket.onstatuspresence = (e) => inbox.push(e);
  await socket.connect(session, online);
  return { session, username, socket, inbox, id: session.user_id };
}

const joinOf = (who, status) => (e) => e.joins?.some((p) => p.user_id === who.id && (status === undefined || (p.status ?? "") === status));
const leaveOf = (who, status) => (e) => e.leaves?.some((p) => p.user_id === who.id && (status === undefined || (p.status ?? "") === status));

for (const engine of ENGINES) {
  for (const protobuf of [false, true]) {
    const format = protobuf ? "protobuf" : "JSON";
    test(`${engine}, ${format}: a follower sees the followed user appear, change status, go offline and leave`, async () => {
      const client = await serverWith(engine, );
      const alice = await player(client, "alice", { protobuf });
      const bobSession = await client.authenticateDevice(uniq("device"), true, uniqName("bob"));
      const bob = { session: bobSession, id: bobSession.user_id };

      const none = await alice.socket.followUsers([bob.id]);
      assert.deepEqual(none.presences ?? [], [], "bob is not online yet");

      // Bob connects appearing online: alice is told, with his (empty) status.
      const bobSocket = client.createSocket(false, false);
      await bobSocket.connect(bob.session, true);
      const appeared = await alice.inbox.next(joinOf(bob), "bob appears");
      assert.equal(appeared.joins[0].username, bob.session.username);
      assert.ok(appeared.joins[0].session_id);

      await bobSocket.updateStatus("in a match");
      await alice.inbox.next(leaveOf(bob, ""), "bob's previous status leaves");
      await alice.inbox.next(joinOf(bob, "in a match"), "bob's new status");

      // Another follower is answered with bob's session and its status.
      const carol = await player(client, "carol", { protobuf });
      const status = await carol.socket.followUsers([bob.id]);
      assert.deepEqual(status.presences.map((p) => [p.user_id, p.status]), [[bob.id, "in a match"]]);

      await bobSocket.updateStatus();
      await alice.inbox.next(leaveOf(bob, "in a match"), "bob appears offline");
      await carol.inbox.next(leaveOf(bob), "bob appears offline, at carol");
      await bobSocket.updateStatus("back");
      await alice.inbox.next(joinOf(bob, "back"), "bob is back");
      await carol.inbox.next(joinOf(bob, "back"), "bob is back, at carol");

      // Alice unfollows: bob's next change reaches carol, not alice. Then dave's change reaches
      // alice: had bob's been queued for her, it would have arrived first.
      await alice.socket.unfollowUsers([bob.id]);
      await bobSocket.updateStatus("busy");
      await carol.inbox.next(joinOf(bob, "busy"), "bob busy, at carol");
      const dave = await player(client, "dave", { online: true });
      await alice.socket.followUsers([dave.id]);
      await dave.socket.updateStatus("here");
      await alice.inbox.next(joinOf(dave, "here"), "dave at alice");
      assert.ok(!alice.inbox.events.some((e) => joinOf(bob, "busy")(e)), "alice no longer follows bob");

      // Bob's socket closes: carol sees him leave.
      bobSocket.disconnect(false);
      await carol.inbox.next(leaveOf(bob, "busy"), "bob's socket closed");
      for (const p of [alice, carol, dave]) p.socket.disconnect(false);
    });
  }

  test(`${engine}: follows by username; oneself and unknown users are not followed; a chat request cannot reach a status channel`, async () => {
    const client = await serverWith(engine, );
    const alice = await player(client, "alice");
    const bob = await player(client, "bob", { online: true });
    const status = await alice.socket.send({ status_follow: { usernames: [bob.username, alice.username, uniqName("nobody")] } });
    assert.deepEqual(status.status.presences.map((p) => p.user_id), [bob.id]);
    await bob.socket.updateStatus("hi");
    await alice.inbox.next(joinOf(bob, "hi"), "bob, followed by username");
    await assert.rejects(alice.socket.writeChatMessage(`status.${bob.id}`, { text: "hello?" }), (e) => {
      assert.equal(e.context?.reason, "invalid_channel_id");
      return true;
    });
    await assert.rejects(alice.socket.leaveChat(`status.${bob.id}`), (e) => {
      assert.equal(e.context?.reason, "invalid_channel_id");
      return true;
    });
    for (const p of [alice, bob]) p.socket.disconnect(false);
  });

  test(`${engine}: bad requests get an error and change nothing; follows are bounded per socket`, async () => {
    const client = await serverWith(engine, { MUSTER_STATUS__MAX_FOLLOWS_PER_SESSION: "2", MUSTER_STATUS__MAX_STATUS_BYTES: "8" });
    const alice = await player(client, "alice");
    const others = [];
    for (let i = 0; i < 3; i++) others.push(await player(client, `o${i}`, { online: true }));
    await assert.rejects(alice.socket.followUsers(["not-a-uuid"]), (e) => {
      assert.match(e.message, /Invalid user ID/);
      return true;
    });
    await assert.rejects(alice.socket.updateStatus("far too long"), (e) => {
      assert.match(e.message, /at most 8 bytes/);
      return true;
    });
    await alice.socket.followUsers([others[0].id, others[1].id]);
    await assert.rejects(alice.socket.followUsers([others[2].id]), (e) => {
      assert.equal(e.context?.reason, "too_many_follows");
      return true;
    });
    await others[2].socket.updateStatus("x");
    await others[1].socket.updateStatus("y");
    await alice.inbox.next(joinOf(others[1], "y"), "a followed user");
    assert.ok(!alice.inbox.events.some(joinOf(others[2])), "the refused follow followed nobody");
    // Unfollowing makes room.
    await alice.socket.unfollowUsers([others[0].id]);
    await alice.socket.followUsers([others[2].id]);
    for (const p of [alice, ...others]) p.socket.disconnect(false);
  });
}
