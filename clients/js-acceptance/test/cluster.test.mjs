// Muster nodes over NATS (docs/cluster.md): nakama-js players connected to different nodes chat
// in one room, see each other's presence, and are told when a node dies; on one PostgreSQL
// database, they matchmake into one match, exchange match data and call server functions; a
// friend request made on one node reaches a socket on another; members of a group on two nodes
// chat in its channel and a kick on one node takes the other node's socket out of it; a status
// follower on one node sees a user on another appear, change status and go with a dead node;
// parties span nodes (a dead node's members leave, its parties close for the others); a match
// listing on one node finds every node's matches.
// Needs TEST_NATS_URL (the test command starts a private nats-server); without it the test is
// skipped, unless TEST_REQUIRE_NATS=1 makes that a failure.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, sleep, Inbox, PLAYERS_MAY_CALL_BUILTINS, LOAD_TEST_GRANT, POSTGRES, freshDatabase } from "./helpers.mjs";

const NATS = process.env.TEST_NATS_URL;
if (!NATS && process.env.TEST_REQUIRE_NATS === "1") {
  throw new Error("TEST_REQUIRE_NATS=1 but TEST_NATS_URL is not set");
}

const nodes = [];
const sockets = [];
after(async () => {
  for (const s of sockets) s.disconnect(false);
  for (const n of nodes) await n.stop();
});

async function clusterNodes(server) {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("muster_cluster_nodes "));
  return line ? Number(line.split(" ")[1]) : 0;
}

async function until(what, check, ms = 10000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Nodes named `names` in one cluster (a fresh subject prefix on the test's NATS), with `env`
 * added to each; waits until every one sees them all.
 */
async function startCluster(names, env = {}) {
  const prefix = uniq("c").replace(/-/g, "");
  const cluster = [];
  for (const name of names) {
    const n = await startServer({
      MUSTER_CLUSTER__NATS_URL: NATS,
      MUSTER_CLUSTER__SUBJECT_PREFIX: prefix,
      MUSTER_CLUSTER__NODE_NAME: name,
      MUSTER_CLUSTER__HEARTBEAT_MS: "100",
      MUSTER_CLUSTER__FAILURE_TIMEOUT_MS: "500",
      ...LOAD_TEST_GRANT,
      ...env,
    });
    nodes.push(n);
    cluster.push(n);
  }
  for (const n of cluster) await until(`${names.length} nodes`, async () => (await clusterNodes(n)) === names.length);
  return cluster;
}

/** A player on `server` whose chat events land in `inbox`. */
async function player(server, name) {
  const client = clientFor(server);
  const session = await client.authenticateDevice(uniq(name), true);
  const socket = client.createSocket(false, false);
  sockets.push(socket);
  const inbox = new Inbox();
  socket.onchannelmessage = (m) => inbox.push({ kind: "message", ...m });
  socket.onchannelpresence = (p) => inbox.push({ kind: "presence", ...p });
  await socket.connect(session, false, 5000);
  // Waits long enough for a dead node to be taken for dead (500 ms here) and told.
  const next = (match, what) => inbox.next(match, what, 10000);
  return { session, socket, next };
}

test("players on three nodes chat in one room and see a dead node's player leave", { skip: !NATS }, async () => {
  const [a, b, c] = await startCluster(["a", "b", "c"]);
  const alice = await player(a, "alice");
  const bob = await player(b, "bob");
  const carol = await player(c, "carol");
  const room = uniq("room").slice(0, 40);

  const aliceChannel = await alice.socket.joinChat(room, 1, false, false);
  await bob.socket.joinChat(room, 1, false, false);
  await alice.next((e) => e.kind === "presence" && e.joins?.[0]?.user_id === bob.session.user_id, "bob's join at alice");
  await carol.socket.joinChat(room, 1, false, false);
  await alice.next((e) => e.kind === "presence" && e.joins?.[0]?.user_id === carol.session.user_id, "carol's join at alice");
  // Carol's view of the room, asked again: everyone, wherever connected.
  const again = await carol.socket.joinChat(room, 1, false, false);
  assert.deepEqual(
    (again.presences ?? []).map((p) => p.user_id).sort(),
    [alice.session.user_id, bob.session.user_id].sort(),
  );

  const ack = await bob.socket.writeChatMessage(aliceChannel.id, { text: "from b" });
  for (const p of [alice, carol]) {
    const m = await p.next((e) => e.kind === "message" && e.message_id === ack.message_id, "bob's message");
    assert.deepEqual(m.content, { text: "from b" });
    assert.equal(m.sender_id, bob.session.user_id);
  }
  const ack2 = await alice.socket.writeChatMessage(aliceChannel.id, { text: "from a" });
  await bob.next((e) => e.kind === "message" && e.message_id === ack2.message_id, "alice's message at bob");
  await carol.next((e) => e.kind === "message" && e.message_id === ack2.message_id, "alice's message at carol");

  // Node b dies: alice and carol are told bob left once b is taken for dead.
  await b.kill9();
  for (const p of [alice, carol]) {
    const left = await p.next((e) => e.kind === "presence" && e.leaves?.[0]?.user_id === bob.session.user_id, "bob's leave");
    assert.equal(left.channel_id, aliceChannel.id);
  }
  // The others still chat.
  const ack3 = await carol.socket.writeChatMessage(aliceChannel.id, { text: "still here" });
  await alice.next((e) => e.kind === "message" && e.message_id === ack3.message_id, "carol's message after b died");
});

test("players on three nodes of one database matchmake into one match, play and call functions", { skip: !NATS || !POSTGRES }, async () => {
  const database = freshDatabase();
  const [a, b, c] = await startCluster(["a", "b", "c"], {
    MUSTER_DATABASE_URL: database,
    MUSTER_MATCHMAKER__INTERVAL_MS: "200",
    ...PLAYERS_MAY_CALL_BUILTINS,
  });
  const players = [await player(a, "mm-alice"), await player(b, "mm-bob"), await player(c, "mm-carol")];
  const matched = players.map(
    (p) => new Promise((resolve) => {
      p.socket.onmatchmakermatched = resolve;
    }),
  );
  for (const p of players) {
    await p.socket.addMatchmaker("+properties.mode:trio", 3, 3, { mode: "trio" }, { skill: 1 });
  }
  const tickets = await Promise.all(matched);
  const everyone = players.map((p) => p.session.user_id).sort();
  for (const t of tickets) assert.deepEqual(t.users.map((u) => u.presence.user_id).sort(), everyone);

  // Each joins with its token on its own node; all land in one match.
  const data = players.map(() => new Inbox());
  players.forEach((p, i) => {
    p.socket.onmatchdata = (d) => data[i].push(d);
  });
  const joined = [];
  for (const [i, p] of players.entries()) joined.push(await p.socket.joinMatch(undefined, tickets[i].token));
  assert.equal(new Set(joined.map((j) => j.match_id)).size, 1, "one match");
  assert.equal(joined[2].size, 2, "the others, as on Nakama");
  const matchId = joined[0].match_id;
  // Data from each node reaches the players on the two others.
  for (const [i, p] of players.entries()) {
    await p.socket.sendMatchState(matchId, 10 + i, `from ${i}`);
  }
  for (const [i] of players.entries()) {
    const seen = [];
    for (let k = 0; k < 2; k++) {
      const d = await data[i].next(() => true, `match data at player ${i}`, 10000);
      seen.push(new TextDecoder().decode(d.data));
    }
    assert.deepEqual(seen.sort(), [0, 1, 2].filter((j) => j !== i).map((j) => `from ${j}`));
  }

  // A server function on any node, with a session from another: one wallet for the cluster.
  const alice = players[0].session;
  const spent = await clientFor(b).rpc(alice, "wallet_spend", { amount: 7 });
  const again = await clientFor(c).rpc(alice, "wallet_spend", { amount: 3 });
  assert.equal(again.payload.wallet.coins, spent.payload.wallet.coins - 3, JSON.stringify(again));
});

test("a friend request made on one node reaches its target's socket on another, and both see the friendship", { skip: !NATS || !POSTGRES }, async () => {
  const [a, b] = await startCluster(["a", "b"], { MUSTER_DATABASE_URL: freshDatabase() });
  const alice = await player(a, "friend-alice");
  const bob = await player(b, "friend-bob");
  const told = new Inbox();
  bob.socket.onnotification = (n) => told.push(n);
  const aliceTold = new Inbox();
  alice.socket.onnotification = (n) => aliceTold.push(n);
  // Bob's socket is on node b; the request is made on node a.
  const clientA = clientFor(a);
  const clientB = clientFor(b);
  await until("bob online as node a sees it", async () => {
    const users = await clientA.getUsers(alice.session, [bob.session.user_id]);
    return users.users?.[0]?.online === true;
  });
  await clientA.addFriends(alice.session, [bob.session.user_id]);
  const request = await told.next((n) => n.code === -2, "bob's friend request on node b", 10000);
  assert.equal(request.sender_id, alice.session.user_id);
  await clientB.addFriends(bob.session, [alice.session.user_id]);
  await aliceTold.next((n) => n.code === -3, "alice's acceptance on node a", 10000);
  const list = await clientB.listFriends(bob.session);
  assert.deepEqual(list.friends.map((f) => [f.user.id, f.state, f.user.online]), [[alice.session.user_id, 0, true]]);
});

test("a group's chat spans nodes, and a kick made on one node takes the member's socket on another out of it", { skip: !NATS || !POSTGRES }, async () => {
  const [a, b] = await startCluster(["a", "b"], { MUSTER_DATABASE_URL: freshDatabase() });
  const alice = await player(a, "group-alice");
  const bob = await player(b, "group-bob");
  const clientA = clientFor(a);
  const clientB = clientFor(b);
  const group = await clientA.createGroup(alice.session, { name: uniq("span"), open: true });
  await clientB.joinGroup(bob.session, group.id);
  const channel = await alice.socket.joinChat(group.id, 3, true, false);
  await bob.socket.joinChat(group.id, 3, true, false);
  await alice.next((p) => p.kind === "presence" && p.joins?.some((j) => j.user_id === bob.session.user_id), "bob joins, seen on node a");
  await bob.socket.writeChatMessage(channel.id, { text: "from b" });
  const heard = await alice.next((m) => m.kind === "message" && m.content?.text === "from b", "bob's message on node a");
  assert.equal(heard.group_id, group.id);

  await clientA.kickGroupUsers(alice.session, group.id, [bob.session.user_id]);
  await alice.next((p) => p.kind === "presence" && p.leaves?.some((l) => l.user_id === bob.session.user_id), "bob leaves, seen on node a");
  await assert.rejects(bob.socket.writeChatMessage(channel.id, { text: "still here?" }), (e) => {
    assert.equal(e.context?.reason, "not_joined");
    return true;
  });
});

test("a status follower on one node sees a user on another appear, change status, and go when that node dies", { skip: !NATS || !POSTGRES }, async () => {
  const [a, b] = await startCluster(["a", "b"], { MUSTER_DATABASE_URL: freshDatabase() });
  const alice = await player(a, "status-alice");
  const told = new Inbox();
  alice.socket.onstatuspresence = (e) => told.push(e);
  const clientB = clientFor(b);
  const bobSession = await clientB.authenticateDevice(uniq("status-bob"), true);
  const bobId = bobSession.user_id;
  const none = await alice.socket.followUsers([bobId]);
  assert.deepEqual(none.presences ?? [], []);
  const bobSocket = clientB.createSocket(false, false);
  sockets.push(bobSocket);
  await bobSocket.connect(bobSession, true);
  await told.next((e) => e.joins?.some((p) => p.user_id === bobId), "bob appears, on node a", 10000);
  await bobSocket.updateStatus("raiding");
  await told.next((e) => e.joins?.some((p) => p.user_id === bobId && p.status === "raiding"), "bob's status, on node a", 10000);
  // A second follower on node a is answered from node a's copy of node b's members.
  const carol = await player(a, "status-carol");
  const status = await carol.socket.followUsers([bobId]);
  assert.deepEqual(status.presences.map((p) => [p.user_id, p.status]), [[bobId, "raiding"]]);

  await b.kill9();
  await told.next((e) => e.leaves?.some((p) => p.user_id === bobId), "bob gone with node b", 10000);
});

test("parties span nodes; a dead node's members leave the others' parties and its own parties close", { skip: !NATS }, async () => {
  const [a, b] = await startCluster(["a", "b"]);
  const partyPlayer = async (node, name) => {
    const p = await player(node, name);
    p.events = new Inbox();
    for (const kind of ["party", "partypresence", "partydata", "partyleader", "partyclose", "partyjoinrequest"]) {
      p.socket[`on${kind}`] = (e) => p.events.push({ kind, ...e });
    }
    return p;
  };
  const alice = await partyPlayer(a, "party-alice");
  const bob = await partyPlayer(b, "party-bob");
  const bobId = bob.session.user_id;

  // Alice's party lives on node a; bob, on node b, asks to join and is let in.
  const own = await alice.socket.createParty(false, 4);
  await bob.socket.joinParty(own.party_id);
  const asked = await alice.events.next((e) => e.kind === "partyjoinrequest", "bob's request, on node a", 10000);
  await alice.socket.acceptPartyMember(own.party_id, asked.presences[0]);
  const joined = await bob.events.next((e) => e.kind === "party", "bob's party, on node b", 10000);
  assert.deepEqual(joined.presences.map((p) => p.user_id).sort(), [alice.session.user_id, bobId].sort());
  await bob.socket.sendPartyData(own.party_id, 3, "from b");
  const data = await alice.events.next((e) => e.kind === "partydata", "bob's data, on node a", 10000);
  assert.equal(new TextDecoder().decode(data.data), "from b");
  await alice.socket.sendPartyData(own.party_id, 4, "from a");
  await bob.events.next((e) => e.kind === "partydata" && e.op_code === 4, "alice's data, on node b", 10000);

  // Bob's party lives on node b; alice joins it from node a.
  const theirs = await bob.socket.createParty(true, 4);
  await alice.socket.joinParty(theirs.party_id);
  await alice.events.next((e) => e.kind === "party" && e.party_id === theirs.party_id, "alice in bob's party", 10000);

  await b.kill9();
  const left = await alice.events.next((e) => e.kind === "partypresence" && e.party_id === own.party_id && e.leaves?.some((p) => p.user_id === bobId), "bob leaves alice's party", 10000);
  assert.equal(left.party_id, own.party_id);
  await alice.events.next((e) => e.kind === "partyclose" && e.party_id === theirs.party_id, "bob's party closes for alice", 10000);
});

test("a party spread over two nodes is matched as one by the cluster's matchmaker", { skip: !NATS || !POSTGRES }, async () => {
  const [a, b] = await startCluster(["a", "b"], { MUSTER_DATABASE_URL: freshDatabase(), MUSTER_MATCHMAKER__INTERVAL_MS: "100" });
  const withEvents = async (node, name) => {
    const p = await player(node, name);
    p.events = new Inbox();
    for (const kind of ["party", "partymatchmakerticket", "matchmakermatched"]) {
      p.socket[`on${kind}`] = (e) => p.events.push({ kind, ...e });
    }
    return p;
  };
  const alice = await withEvents(a, "pm-alice");
  const bob = await withEvents(b, "pm-bob");
  const carol = await withEvents(b, "pm-carol");
  const party = await alice.socket.createParty(true, 4);
  await bob.socket.joinParty(party.party_id);
  await bob.events.next((e) => e.kind === "party", "bob in alice's party", 10000);
  const ticket = await alice.socket.addMatchmakerParty(party.party_id, "*", 3, 3);
  await bob.events.next((e) => e.kind === "partymatchmakerticket" && e.ticket === ticket.ticket, "bob told of the ticket", 10000);
  await carol.socket.addMatchmaker("*", 3, 3);
  const everyone = [alice, bob, carol].map((p) => p.session.user_id).sort();
  for (const p of [alice, bob, carol]) {
    const m = await p.events.next((e) => e.kind === "matchmakermatched", "matched", 15000);
    assert.deepEqual(m.users.map((u) => u.presence.user_id).sort(), everyone);
  }
});

test("listMatches on one node lists the matches of every node", { skip: !NATS }, async () => {
  const cluster = await startCluster(["a", "b"]);
  const created = [];
  for (const [n, label] of [[cluster[0], '{"mode":"ranked","node":"a"}'], [cluster[1], '{"mode":"ranked","node":"b"}'], [cluster[1], '{"mode":"casual","node":"b"}']]) {
    const session = await clientFor(n).authenticateDevice(uniq("lister"), true);
    const answer = await fetch(`${n.base}/v2/rooms`, {
      method: "POST",
      headers: { Authorization: `Bearer ${session.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ handler: "arena", capacity: 2, params: { label } }),
    });
    assert.equal(answer.status, 201);
    created.push((await answer.json()).room_id);
  }
  const clientA = clientFor(cluster[0]);
  const session = await clientA.authenticateDevice(uniq("lister"), true);
  const ranked = await clientA.listMatches(session, 10, true, undefined, undefined, undefined, "+label.mode:ranked");
  assert.deepEqual(ranked.matches.map((m) => m.match_id).sort(), [created[0], created[1]].sort(), "node a finds node b's ranked room");
  const all = await clientA.listMatches(session, 10);
  assert.equal(all.matches.length, 3);
  assert.equal((await clientA.listMatches(session, 2)).matches.length, 2, "the limit holds across nodes");
});
