// Chat channels through nakama-js: joinChat, presence events, writeChatMessage, updateChatMessage,
// removeChatMessage, leaveChat, direct chats, and listChannelMessages with cursors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, Inbox } from "./helpers.mjs";

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

/** A signed-in user with an open socket whose chat events land in `inbox`. */
async function player(name) {
  const session = await client.authenticateDevice(uniq(name), true);
  const socket = client.createSocket(false, false);
  sockets.push(socket);
  const inbox = new Inbox();
  socket.onchannelmessage = (m) => inbox.push({ kind: "message", ...m });
  socket.onchannelpresence = (p) => inbox.push({ kind: "presence", ...p });
  await socket.connect(session, false, 5000);
  return { session, socket, inbox };
}

const ROOM = 1;
const DIRECT = 2;

test("two clients join a room, see each other's presence, exchange messages and read history", async () => {
  const alice = await player("alice");
  const bob = await player("bob");
  const room = uniq("room").slice(0, 40);

  const aliceChannel = await alice.socket.joinChat(room, ROOM, true, false);
  assert.equal(aliceChannel.id, `2...${room}`);
  assert.equal(aliceChannel.self.user_id, alice.session.user_id);
  assert.deepEqual(aliceChannel.presences ?? [], [], "alone in the room");

  const bobChannel = await bob.socket.joinChat(room, ROOM, true, false);
  assert.equal(bobChannel.id, aliceChannel.id);
  assert.deepEqual((bobChannel.presences ?? []).map((p) => p.user_id), [alice.session.user_id]);
  const joined = await alice.inbox.next((e) => e.kind === "presence" && e.joins, "bob's join");
  assert.equal(joined.channel_id, aliceChannel.id);
  assert.equal(joined.joins[0].user_id, bob.session.user_id);
  assert.equal(joined.joins[0].username, bob.session.username);

  // Each sends one; both receive both, content parsed back into an object by the client.
  const ack = await alice.socket.writeChatMessage(aliceChannel.id, { text: "hello bob" });
  assert.equal(ack.channel_id, aliceChannel.id);
  assert.match(ack.message_id, /^[0-9a-f-]{36}$/);
  assert.equal(ack.code, 0);
  const atBob = await bob.inbox.next((e) => e.kind === "message" && e.message_id === ack.message_id, "alice's message");
  assert.deepEqual(atBob.content, { text: "hello bob" });
  assert.equal(atBob.sender_id, alice.session.user_id);
  assert.equal(atBob.username, alice.session.username);
  assert.equal(atBob.room_name, room);
  assert.equal(atBob.persistent, true);
  const reply = await bob.socket.writeChatMessage(bobChannel.id, { text: "hi alice" });
  const atAlice = await alice.inbox.next((e) => e.kind === "message" && e.message_id === reply.message_id, "bob's reply");
  assert.deepEqual(atAlice.content, { text: "hi alice" });

  // Edit and delete one's own message; the other member sees both.
  const edited = await alice.socket.updateChatMessage(aliceChannel.id, ack.message_id, { text: "hello, bob" });
  assert.equal(edited.code, 1);
  const update = await bob.inbox.next((e) => e.kind === "message" && e.code === 1, "the update");
  assert.deepEqual(update.content, { text: "hello, bob" });
  await assert.rejects(bob.socket.removeChatMessage(bobChannel.id, ack.message_id), (err) => {
    assert.equal(err.code, 3, JSON.stringify(err));
    return true;
  }, "bob cannot remove alice's message");

  // History, oldest first, one page at a time.
  const first = await client.listChannelMessages(alice.session, aliceChannel.id, 1, true);
  assert.equal(first.messages.length, 1);
  assert.deepEqual(first.messages[0].content, { text: "hello, bob" }, "the edit is stored");
  assert.equal(first.messages[0].sender_id, alice.session.user_id);
  assert.ok(first.next_cursor, "a next page");
  const second = await client.listChannelMessages(alice.session, aliceChannel.id, 1, true, first.next_cursor);
  assert.deepEqual(second.messages.map((m) => m.content), [{ text: "hi alice" }]);
  assert.ok(second.prev_cursor, "a way back");
  const back = await client.listChannelMessages(alice.session, aliceChannel.id, 1, true, second.prev_cursor);
  assert.equal(back.messages[0].message_id, ack.message_id);
  const newestFirst = await client.listChannelMessages(bob.session, aliceChannel.id, 10, false);
  assert.deepEqual(newestFirst.messages.map((m) => m.content.text), ["hi alice", "hello, bob"]);

  const removed = await alice.socket.removeChatMessage(aliceChannel.id, ack.message_id);
  assert.equal(removed.code, 2);
  await bob.inbox.next((e) => e.kind === "message" && e.code === 2 && e.message_id === ack.message_id, "the removal");
  const after = await client.listChannelMessages(alice.session, aliceChannel.id, 10, true);
  assert.deepEqual(after.messages.map((m) => m.content.text), ["hi alice"]);

  // Leaving tells the other member.
  await bob.socket.leaveChat(bobChannel.id);
  const left = await alice.inbox.next((e) => e.kind === "presence" && e.leaves, "bob's leave");
  assert.equal(left.leaves[0].user_id, bob.session.user_id);
});

test("a direct chat between two users", async () => {
  const alice = await player("dm-alice");
  const bob = await player("dm-bob");
  const channel = await alice.socket.joinChat(bob.session.user_id, DIRECT, true, false);
  const bobs = await bob.socket.joinChat(alice.session.user_id, DIRECT, true, false);
  assert.equal(bobs.id, channel.id, "both ends name the same channel");
  assert.match(channel.id, /^4\.[0-9a-f-]{36}\.[0-9a-f-]{36}\.$/);
  const ack = await bob.socket.writeChatMessage(bobs.id, { text: "psst" });
  const got = await alice.inbox.next((e) => e.kind === "message" && e.message_id === ack.message_id, "the DM");
  assert.deepEqual(got.content, { text: "psst" });
  const history = await client.listChannelMessages(alice.session, channel.id, 10, true);
  assert.deepEqual(history.messages.map((m) => m.content.text), ["psst"]);
  await assert.rejects(alice.socket.joinChat(alice.session.user_id, DIRECT, true, false), (err) => {
    assert.equal(err.code, 3, JSON.stringify(err));
    return true;
  }, "no direct chat with oneself");
});

test("content that is not a JSON object is refused with an error envelope", async () => {
  const alice = await player("bad-content");
  const channel = await alice.socket.joinChat(uniq("r").slice(0, 30), ROOM, false, false);
  // nakama-js JSON-encodes whatever it is given: a string becomes a JSON string, not an object.
  await assert.rejects(alice.socket.writeChatMessage(channel.id, "just text"), (err) => {
    assert.equal(err.code, 3, JSON.stringify(err));
    assert.match(err.message, /JSON object/);
    return true;
  });
  const ok = await alice.socket.writeChatMessage(channel.id, { text: "fine" });
  assert.equal(ok.code, 0);
});
