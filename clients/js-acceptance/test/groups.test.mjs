// Groups through nakama-js, on SQLite and PostgreSQL: createGroup, updateGroup, deleteGroup,
// joinGroup (open: member; closed: a join request the admins are told of), leaveGroup,
// addGroupUsers, kickGroupUsers, banGroupUsers, promoteGroupUsers, demoteGroupUsers,
// listGroups, listGroupUsers, listUserGroups; the group's chat (joinChat type 3, JSON and
// protobuf sockets) for members only, left at once by whoever is kicked; Nakama's errors; the
// per-user bound.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServerOn, clientFor, uniqName, uniq, expectHttpError, GRPC, ENGINES, Inbox } from "./helpers.mjs";

const GROUP = 3;
const servers = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function serverOn(engine, env = {}) {
  const server = await startServerOn(engine, env);
  servers.push(server);
  return clientFor(server, { autoRefreshSession: false });
}

async function player(client, prefix, useProtobuf = false) {
  const username = uniqName(prefix);
  const session = await client.authenticateDevice(uniq("device"), true, username);
  const adapter = useProtobuf ? new (await import("@heroiclabs/nakama-js-protobuf")).WebSocketAdapterPb() : undefined;
  const socket = client.createSocket(false, false, adapter);
  const inbox = new Inbox();
  socket.onnotification = (n) => inbox.push({ kind: "notification", ...n });
  socket.onchannelmessage = (m) => inbox.push({ kind: "message", ...m });
  socket.onchannelpresence = (p) => inbox.push({ kind: "presence", ...p });
  await socket.connect(session, false);
  return { session, username, socket, inbox, id: session.user_id };
}

const members = async (client, who, groupId, state) =>
  Object.fromEntries((await client.listGroupUsers(who.session, groupId, state, 100)).group_users.map((g) => [g.user.id, g.state]));

for (const engine of ENGINES) {
  test(`${engine}: an open group: create, join, list, update, roles, leave, delete`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const bob = await player(client, "bob");
    const carol = await player(client, "carol");
    const name = uniqName("clan");
    const group = await client.createGroup(alice.session, { name, description: "the first", lang_tag: "en", open: true, max_count: 10 });
    assert.equal(group.name, name);
    assert.equal(group.creator_id, alice.id);
    assert.equal(group.open, true);
    assert.equal(group.edge_count, 1);
    assert.equal(group.max_count, 10);

    assert.equal(await client.joinGroup(bob.session, group.id), true);
    await client.joinGroup(carol.session, group.id);
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0, [bob.id]: 2, [carol.id]: 2 });
    const listed = await client.listGroupUsers(alice.session, group.id);
    assert.equal(listed.group_users[0].user.username, alice.username, "the superadmin first");
    assert.equal(listed.group_users[1].user.online, true);
    const mine = await client.listUserGroups(bob.session, bob.id);
    assert.deepEqual(mine.user_groups.map((u) => [u.group.id, u.state]), [[group.id, 2]]);
    assert.equal(mine.user_groups[0].group.edge_count, 3);

    const found = await client.listGroups(bob.session, name.slice(0, 8) + "%", undefined, 10);
    assert.deepEqual(found.groups.map((g) => g.id), [group.id], "a name prefix finds it");
    const exact = await client.listGroups(bob.session, name.toUpperCase());
    assert.deepEqual(exact.groups.map((g) => g.id), [group.id], "names match without case");

    // A member may not update; an admin may.
    await expectHttpError(client.updateGroup(bob.session, group.id, { description: "mine now" }), 404);
    await client.promoteGroupUsers(alice.session, group.id, [bob.id]);
    assert.deepEqual(await members(client, alice, group.id, 1), { [bob.id]: 1 });
    assert.equal(await client.updateGroup(bob.session, group.id, { description: "the best", open: false }), true);
    const updated = (await client.listUserGroups(alice.session, alice.id)).user_groups[0].group;
    assert.equal(updated.description, "the best");
    assert.equal(updated.open, false);
    assert.equal(updated.name, name, "fields not given stay");

    // An admin may kick members, not the superadmin; the superadmin may demote the admin.
    assert.equal(await client.kickGroupUsers(bob.session, group.id, [alice.id, carol.id]), true);
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0, [bob.id]: 1 });
    await client.demoteGroupUsers(alice.session, group.id, [bob.id]);
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0, [bob.id]: 2 });

    // The last superadmin cannot leave members behind; a member can leave.
    let { body } = await expectHttpError(client.leaveGroup(alice.session, group.id), 400);
    assert.match(body.message, /last superadmin/);
    assert.equal(await client.leaveGroup(bob.session, group.id), true);
    assert.deepEqual((await client.listUserGroups(bob.session, bob.id)).user_groups, []);

    // Only a superadmin deletes.
    await client.joinGroup(carol.session, group.id);
    ({ body } = await expectHttpError(client.deleteGroup(carol.session, group.id), 404));
    assert.equal(await client.deleteGroup(alice.session, group.id), true);
    assert.deepEqual((await client.listGroups(alice.session, name)).groups ?? [], []);
    for (const p of [alice, bob, carol]) p.socket.disconnect(false);
  });

  test(`${engine}: a closed group takes join requests; its admins are told; add and promote accept them`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const bob = await player(client, "bob");
    const carol = await player(client, "carol");
    const dave = await player(client, "dave");
    const group = await client.createGroup(alice.session, { name: uniqName("closed"), open: false });
    assert.equal(group.open, false);
    assert.equal(group.max_count, 100, "the server's default max_count");

    await client.joinGroup(bob.session, group.id);
    const request = await alice.inbox.next((n) => n.kind === "notification" && n.code === -5, "alice's join request");
    assert.equal(request.subject, `User ${bob.username} wants to join your group`);
    assert.deepEqual(request.content, { group_id: group.id, username: bob.username });
    assert.equal(request.sender_id, bob.id);
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0, [bob.id]: 3 });

    await client.addGroupUsers(alice.session, group.id, [bob.id, carol.id]);
    const added = await carol.inbox.next((n) => n.kind === "notification" && n.code === -4, "carol's addition");
    assert.equal(added.subject, `You've been added to group ${group.name}`);
    assert.deepEqual(added.content, { group_id: group.id, name: group.name });
    await bob.inbox.next((n) => n.kind === "notification" && n.code === -4, "bob's acceptance");
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0, [bob.id]: 2, [carol.id]: 2 });

    await client.joinGroup(dave.session, group.id);
    await client.promoteGroupUsers(alice.session, group.id, [dave.id]);
    assert.deepEqual(await members(client, alice, group.id, 2), { [bob.id]: 2, [carol.id]: 2, [dave.id]: 2 });
    const edge = (await client.listUserGroups(alice.session, alice.id)).user_groups[0].group.edge_count;
    assert.equal(edge, 4);
    for (const p of [alice, bob, carol, dave]) p.socket.disconnect(false);
  });

  test(`${engine}: a group's chat is for members (JSON and protobuf sockets); the kicked leave it at once; bans stick`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const bob = await player(client, "bob", true);
    const mallory = await player(client, "mallory");
    const group = await client.createGroup(alice.session, { name: uniqName("chat"), open: true });
    await assert.rejects(mallory.socket.joinChat(group.id, GROUP, true, false), (e) => {
      assert.match(e.message, /member/);
      return true;
    });
    await client.joinGroup(bob.session, group.id);
    const channel = await alice.socket.joinChat(group.id, GROUP, true, false);
    assert.equal(channel.group_id, group.id);
    assert.equal(channel.id, `3.${group.id}..`);
    const bobs = await bob.socket.joinChat(group.id, GROUP, true, false);
    assert.equal(bobs.id, channel.id);
    await alice.socket.writeChatMessage(channel.id, { text: "welcome" });
    const got = await bob.inbox.next((m) => m.kind === "message" && m.content?.text === "welcome", "bob reads alice");
    assert.equal(got.group_id, group.id);
    const history = await client.listChannelMessages(bob.session, channel.id, 10, true);
    assert.deepEqual(history.messages.map((m) => m.content.text), ["welcome"]);
    await expectHttpError(client.listChannelMessages(mallory.session, channel.id, 10, true), 403);

    // Kicked: bob's socket leaves the channel at once (alice sees him go) and may not rejoin
    // through the chat; he may join the open group again, unless banned.
    await client.kickGroupUsers(alice.session, group.id, [bob.id]);
    const gone = await alice.inbox.next((p) => p.kind === "presence" && p.leaves?.some((l) => l.user_id === bob.id), "bob's leave");
    assert.equal(gone.channel_id, channel.id);
    await assert.rejects(bob.socket.writeChatMessage(channel.id, { text: "still here?" }));
    await assert.rejects(bob.socket.joinChat(group.id, GROUP, true, false));
    await client.joinGroup(bob.session, group.id);
    await client.banGroupUsers(alice.session, group.id, [bob.id]);
    assert.deepEqual(await members(client, alice, group.id, 4), { [bob.id]: 4 }, "listed as banned when asked");
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0 }, "bans not listed otherwise");
    const { body } = await expectHttpError(client.joinGroup(bob.session, group.id), 403);
    assert.match(body.message, /banned/);
    for (const p of [alice, bob, mallory]) p.socket.disconnect(false);
  });

  test(`${engine}: bad requests get Nakama's errors and change nothing; the per-user bound refuses with 429`, async () => {
    const client = await serverOn(engine, { MUSTER_GROUPS__MAX_PER_USER: "2" });
    const alice = await player(client, "alice");
    const bob = await player(client, "bob");
    const name = uniqName("taken");
    const group = await client.createGroup(alice.session, { name, open: true, max_count: 2 });
    const refusals = [
      [() => client.createGroup(alice.session, { name: "" }), 400, /Group name must be set/],
      [() => client.createGroup(bob.session, { name }), 409, /Group name is in use/],
      [() => client.createGroup(bob.session, { name: "x".repeat(256) }), 400, /at most 255/],
      [() => client.createGroup(bob.session, { name: uniqName("n"), max_count: -1 }), 400, /max count/],
      [() => client.joinGroup(bob.session, "not-a-uuid"), 400, /Group ID must be a valid ID/],
      [() => client.joinGroup(bob.session, "00000000-0000-4000-8000-000000000000"), 404, /Group not found/],
      [() => client.kickGroupUsers(bob.session, group.id, [alice.id]), 404, /permission denied/],
      [() => client.addGroupUsers(alice.session, group.id, ["00000000-0000-4000-8000-000000000000"]), 400, /users not found/],
      [() => client.addGroupUsers(alice.session, group.id, ["nope"]), 400, /User ID must be a valid ID/],
      [() => client.updateGroup(alice.session, group.id, { name: "" }), 400, /cannot be empty/],
      [() => client.updateGroup(alice.session, group.id, {}), 400, /at least one field/],
      [() => client.listGroups(alice.session, undefined, undefined, 101), 400, /limit must be between 1 and 100/],
      [() => client.listGroupUsers(alice.session, group.id, 5), 400, /state must be between 0 and 4/],
      [() => client.listGroupUsers(alice.session, group.id, undefined, 10, "bad"), 400, /Cursor is invalid/],
      [() => client.listGroups(alice.session, undefined, "bad", 10), 400, /Malformed cursor/],
    ];
    for (const [call, status, message] of refusals) {
      const { body } = await expectHttpError(call(), status);
      assert.match(body.message, message);
    }
    assert.deepEqual(await members(client, alice, group.id), { [alice.id]: 0 }, "nothing changed");

    await client.joinGroup(bob.session, group.id);
    const carol = await player(client, "carol");
    let { body } = await expectHttpError(client.joinGroup(carol.session, group.id), 400);
    assert.match(body.message, /Group is full/);
    assert.equal(body.code, GRPC.INVALID_ARGUMENT);

    await client.createGroup(carol.session, { name: uniqName("c1") });
    await client.createGroup(carol.session, { name: uniqName("c2") });
    ({ body } = await expectHttpError(client.createGroup(carol.session, { name: uniqName("c3") }), 429));
    assert.match(body.message, /Too many groups/);
    assert.equal((await client.listUserGroups(carol.session, carol.id)).user_groups.length, 2);
    for (const p of [alice, bob, carol]) p.socket.disconnect(false);
  });

  test(`${engine}: listGroups pages with its cursor, filters by language, members and openness`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const tag = uniqName("l").slice(0, 12);
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await client.createGroup(alice.session, { name: uniqName(`p${i}`), lang_tag: tag, open: i !== 1 })).id);
    }
    const seen = [];
    let cursor;
    do {
      const page = await client.apiClient.listGroups(alice.session.token, undefined, cursor, 1, tag);
      seen.push(...(page.groups ?? []).map((g) => g.id));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(seen.sort(), [...ids].sort(), "three pages of one");
    const open = await client.apiClient.listGroups(alice.session.token, undefined, undefined, 10, tag, undefined, true);
    assert.equal(open.groups.length, 2);
    const { body } = await expectHttpError(client.apiClient.listGroups(alice.session.token, "x", undefined, 10, tag), 400);
    assert.match(body.message, /cannot be combined/);
    alice.socket.disconnect(false);
  });
}
