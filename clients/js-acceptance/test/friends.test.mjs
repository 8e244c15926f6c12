// Friends through nakama-js, on SQLite and PostgreSQL: addFriends (invite, accept), listFriends
// (states, pages), deleteFriends, blockFriends; the notifications each change sends
// (socket.onnotification, listNotifications); a block stops invites and direct chat; Nakama's
// errors; the per-user bound.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServerOn, clientFor, uniqName, uniq, expectHttpError, GRPC, ENGINES, Inbox } from "./helpers.mjs";

const servers = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

async function serverOn(engine, env = {}) {
  const server = await startServerOn(engine, env);
  servers.push(server);
  return clientFor(server, { autoRefreshSession: false });
}

async function player(client, prefix) {
  const username = uniqName(prefix);
  const session = await client.authenticateDevice(uniq("device"), true, username);
  const socket = client.createSocket(false, false);
  const inbox = new Inbox();
  socket.onnotification = (n) => inbox.push(n);
  await socket.connect(session, false);
  return { session, username, socket, inbox, id: session.user_id };
}

const states = async (client, who, state) =>
  Object.fromEntries((await client.listFriends(who.session, state)).friends.map((f) => [f.user.id, f.state]));

for (const engine of ENGINES) {
  test(`${engine}: an invite, its acceptance and a removal, each with its notification`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const bob = await player(client, "bob");

    assert.equal(await client.addFriends(alice.session, [], [bob.username]), true);
    const request = await bob.inbox.next((n) => n.code === -2, "bob's friend request");
    assert.equal(request.subject, `${alice.username} wants to add you as a friend`);
    assert.equal(request.sender_id, alice.id);
    assert.deepEqual(request.content, { username: alice.username });
    assert.deepEqual(await states(client, alice), { [bob.id]: 1 });
    assert.deepEqual(await states(client, bob), { [alice.id]: 2 });
    const stored = await client.listNotifications(bob.session, 10);
    assert.deepEqual(stored.notifications.map((n) => n.code), [-2], "the request is stored too");

    assert.equal(await client.addFriends(bob.session, [alice.id]), true);
    const accepted = await alice.inbox.next((n) => n.code === -3, "alice's acceptance");
    assert.equal(accepted.subject, `${bob.username} accepted your friend request`);
    assert.deepEqual(await states(client, alice), { [bob.id]: 0 });
    assert.deepEqual(await states(client, bob), { [alice.id]: 0 });
    const friend = (await client.listFriends(alice.session)).friends[0];
    assert.equal(friend.user.username, bob.username);
    assert.equal(friend.user.online, true, "bob has a socket open");

    // Adding again changes nothing and sends nothing.
    await client.addFriends(alice.session, [bob.id]);
    assert.deepEqual(await states(client, alice), { [bob.id]: 0 });

    assert.equal(await client.deleteFriends(alice.session, [bob.id]), true);
    const removed = await bob.inbox.next((n) => n.code === -9, "bob's removal");
    assert.equal(removed.subject, `${alice.username} removed you as a friend`);
    assert.deepEqual(await states(client, alice), {});
    assert.deepEqual(await states(client, bob), {});
    for (const p of [alice, bob]) p.socket.disconnect(false);
  });

  test(`${engine}: listFriends filters by state and pages with its cursor`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const others = [];
    for (let i = 0; i < 3; i++) others.push(await player(client, `o${i}`));
    const inviter = await player(client, "inviter");
    await client.addFriends(alice.session, others.map((o) => o.id));
    await client.addFriends(inviter.session, [alice.id]);
    await client.addFriends(others[0].session, [alice.id]); // accepts: others[0] is a friend

    assert.deepEqual(await states(client, alice), { [others[0].id]: 0, [others[1].id]: 1, [others[2].id]: 1, [inviter.id]: 2 });
    const all = await client.listFriends(alice.session);
    assert.deepEqual(all.friends.map((f) => f.state), [0, 1, 1, 2], "friends first, then invites sent, then received");
    const sent = [];
    let cursor;
    do {
      const page = await client.listFriends(alice.session, 1, 1, cursor);
      sent.push(...page.friends.map((f) => f.user.id));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(sent.sort(), [others[1].id, others[2].id].sort(), "two pages of one invite each");
    for (const p of [alice, inviter, ...others]) p.socket.disconnect(false);
  });

  test(`${engine}: listFriendsOfFriends names each friend's friends the caller does not have, with the referrer`, async () => {
    const client = await serverOn(engine);
    const [alice, bob, carol, dave, erin] = [
      await player(client, "alice"), await player(client, "bob"), await player(client, "carol"),
      await player(client, "dave"), await player(client, "erin"),
    ];
    const befriend = async (x, y) => {
      await client.addFriends(x.session, [y.id]);
      await client.addFriends(y.session, [x.id]);
    };
    await befriend(alice, bob);
    await befriend(alice, carol);
    await befriend(bob, carol); // carol is alice's friend already: not listed
    await befriend(bob, dave);
    await befriend(carol, erin);
    await client.addFriends(dave.session, [erin.id]); // an invite, not a friendship: not followed

    const all = await client.listFriendsOfFriends(alice.session, 100);
    const pairs = all.friends_of_friends.map((f) => [f.referrer, f.user.id]).sort();
    assert.deepEqual(pairs, [[bob.id, dave.id], [carol.id, erin.id]].sort());
    assert.ok(all.friends_of_friends.every((f) => f.user.username), "each with the user's public fields");
    const first = await client.listFriendsOfFriends(alice.session, 1);
    assert.equal(first.friends_of_friends.length, 1);
    assert.ok(first.cursor, "a next page");
    const second = await client.listFriendsOfFriends(alice.session, 1, first.cursor);
    assert.equal(second.friends_of_friends.length, 1);
    assert.notEqual(second.friends_of_friends[0].user.id, first.friends_of_friends[0].user.id);
    const { body } = await expectHttpError(client.listFriendsOfFriends(alice.session, 101), 400);
    assert.match(body.message, /limit must be between 1 and 100/);
    for (const p of [alice, bob, carol, dave, erin]) p.socket.disconnect(false);
  });

  test(`${engine}: a block ends the other's invite, stops their invites and direct chat; deleting lifts it`, async () => {
    const client = await serverOn(engine);
    const alice = await player(client, "alice");
    const carol = await player(client, "carol");
    await client.addFriends(alice.session, [carol.id]);
    await carol.inbox.next((n) => n.code === -2, "carol's request");

    assert.equal(await client.blockFriends(carol.session, [alice.id]), true);
    assert.deepEqual(await states(client, carol), { [alice.id]: 3 });
    assert.deepEqual(await states(client, alice), {}, "alice's invite is gone");
    await client.addFriends(alice.session, [carol.id]);
    assert.deepEqual(await states(client, alice), {}, "a blocked user's invite is skipped");
    await assert.rejects(alice.socket.joinChat(carol.id, 2, true, false), (e) => {
      assert.match(e.message, /blocked/);
      return true;
    });
    // Carol may still open a direct chat with alice; alice cannot with carol.
    await carol.socket.joinChat(alice.id, 2, true, false);

    assert.equal(await client.deleteFriends(carol.session, [alice.id]), true);
    assert.deepEqual(await states(client, carol), {});
    await alice.socket.joinChat(carol.id, 2, true, false);
    await client.addFriends(alice.session, [carol.id]);
    assert.deepEqual(await states(client, alice), { [carol.id]: 1 });
    const requests = (await client.listNotifications(carol.session, 10)).notifications.filter((n) => n.code === -2);
    assert.equal(requests.length, 2, "only the invites made while not blocked were sent");
    for (const p of [alice, carol]) p.socket.disconnect(false);
  });

  test(`${engine}: bad requests get Nakama's errors; the per-user bound refuses with 429`, async () => {
    const client = await serverOn(engine, { MUSTER_FRIENDS__MAX_PER_USER: "2" });
    const alice = await player(client, "alice");
    let { body } = await expectHttpError(client.addFriends(alice.session, [alice.id]), 400);
    assert.match(body.message, /Cannot add self as friend/);
    ({ body } = await expectHttpError(client.addFriends(alice.session, [], [alice.username]), 400));
    assert.match(body.message, /Cannot add self as friend/);
    ({ body } = await expectHttpError(client.addFriends(alice.session, ["not-a-uuid"]), 400));
    assert.match(body.message, /Invalid user ID/);
    ({ body } = await expectHttpError(client.addFriends(alice.session, [], ["nobody-" + uniqName()]), 400));
    assert.match(body.message, /No valid ID or username was provided/);
    ({ body } = await expectHttpError(client.listFriends(alice.session, undefined, 1001), 400));
    assert.match(body.message, /limit must be between 1 and 1000/);
    ({ body } = await expectHttpError(client.listFriends(alice.session, 5), 400));
    assert.match(body.message, /state must be between 0 and 3/);
    ({ body } = await expectHttpError(client.listFriends(alice.session, undefined, 10, "bad"), 400));
    assert.match(body.message, /Cursor is invalid/);
    assert.equal(body.code, GRPC.INVALID_ARGUMENT);

    const others = [];
    for (let i = 0; i < 3; i++) others.push(await player(client, `b${i}`));
    await client.addFriends(alice.session, [others[0].id, others[1].id]);
    ({ body } = await expectHttpError(client.addFriends(alice.session, [others[2].id]), 429));
    assert.match(body.message, /at most 2/);
    assert.equal(Object.keys(await states(client, alice)).length, 2, "the refused add changed nothing");
    for (const p of [alice, ...others]) p.socket.disconnect(false);
  });

  test(`${engine}: friend adds are rationed per user per minute`, async () => {
    const client = await serverOn(engine, { MUSTER_FRIENDS__ADDS_PER_USER_PER_MINUTE: "2" });
    const alice = await player(client, "alice");
    const others = [];
    for (let i = 0; i < 3; i++) others.push(await player(client, `r${i}`));
    await client.addFriends(alice.session, [others[0].id]);
    await client.addFriends(alice.session, [others[1].id]);
    const { body } = await expectHttpError(client.addFriends(alice.session, [others[2].id]), 429);
    assert.match(body.message, /Too many friend requests/);
    assert.deepEqual(await states(client, others[2]), {}, "the refused add invited nobody");
    // Another player is not held back by alice's rate.
    assert.equal(await client.addFriends(others[2].session, [alice.id]), true);
    for (const p of [alice, ...others]) p.socket.disconnect(false);
  });
}
