// Matches and the matchmaker through nakama-js: addMatchmaker → onmatchmakermatched → joinMatch
// (token) → sendMatchState between two clients; createMatch / joinMatch by id; presence events;
// leaveMatch; removeMatchmaker; errors for unknown matches.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq } from "./helpers.mjs";

let server;
let client;
const sockets = [];
before(async () => {
  // A short matchmaker interval keeps the test fast.
  server = await startServer({ MUSTER_MATCHMAKER__INTERVAL_MS: "100" });
  client = clientFor(server);
});
after(async () => {
  for (const s of sockets) s.disconnect(false);
  await server?.stop();
});

/** An authenticated, connected player. */
async function player(name) {
  const session = await client.authenticateDevice(uniq(name), true);
  const socket = client.createSocket(false, false);
  sockets.push(socket);
  await socket.connect(session, false, 5000);
  return { session, socket };
}

/** Resolves with the next value given to `socket[handler]` (within 5 s). */
function next(socket, handler, accept = () => true) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${handler} within 5 s`)), 5000);
    socket[handler] = (value) => {
      if (!accept(value)) return;
      clearTimeout(timer);
      socket[handler] = () => {};
      resolve(value);
    };
  });
}

const text = (bytes) => new TextDecoder().decode(bytes);

test("addMatchmaker → onmatchmakermatched → joinMatch by token → sendMatchState", async () => {
  const a = await player("mm-a");
  const b = await player("mm-b");
  const matchedA = next(a.socket, "onmatchmakermatched");
  const matchedB = next(b.socket, "onmatchmakermatched");
  const ticketA = await a.socket.addMatchmaker("+properties.mode:duel", 2, 2, { mode: "duel" }, { skill: 12 });
  const ticketB = await b.socket.addMatchmaker("+properties.mode:duel", 2, 2, { mode: "duel" }, { skill: 30 });
  assert.equal(typeof ticketA.ticket, "string");
  assert.notEqual(ticketA.ticket, ticketB.ticket);

  const [mA, mB] = await Promise.all([matchedA, matchedB]);
  assert.equal(mA.ticket, ticketA.ticket);
  assert.equal(mB.ticket, ticketB.ticket);
  assert.equal(typeof mA.token, "string");
  assert.equal(mA.users.length, 2);
  assert.deepEqual(
    mA.users.map((u) => u.presence.user_id).sort(),
    [a.session.user_id, b.session.user_id].sort(),
  );
  assert.equal(mA.self.presence.user_id, a.session.user_id);
  assert.equal(mA.self.string_properties.mode, "duel");
  assert.equal(mB.self.numeric_properties.skill, 30);

  const joinedA = await a.socket.joinMatch(undefined, mA.token);
  assert.equal(joinedA.size ?? 0, 0, "the first to join sees nobody else, as on Nakama (0 is left out of JSON)");
  const joining = (who) => (e) => e.joins?.[0]?.user_id === who.session.user_id;
  const presenceAtA = next(a.socket, "onmatchpresence", joining(b));
  const ownAtB = next(b.socket, "onmatchpresence", joining(b));
  const joinedB = await b.socket.joinMatch(undefined, mB.token);
  assert.equal(joinedA.match_id, joinedB.match_id);
  // As Nakama: the answer lists the others and its size counts them; the joiner is told of
  // its own join too.
  assert.equal(joinedB.size, 1);
  assert.equal(joinedB.presences[0].user_id, a.session.user_id);
  assert.equal(joinedB.self.user_id, b.session.user_id);
  assert.equal((await ownAtB).match_id, joinedB.match_id);
  const event = await presenceAtA;
  assert.equal(event.match_id, joinedA.match_id);
  assert.equal(event.joins[0].user_id, b.session.user_id);

  // State both ways, as a string and as bytes.
  const atB = next(b.socket, "onmatchdata");
  await a.socket.sendMatchState(joinedA.match_id, 5, "move:1,2");
  const dataB = await atB;
  assert.equal(dataB.op_code, 5);
  assert.equal(text(dataB.data), "move:1,2");
  assert.equal(dataB.presence.user_id, a.session.user_id);
  const atA = next(a.socket, "onmatchdata");
  await b.socket.sendMatchState(joinedB.match_id, 6, new Uint8Array([1, 2, 3]));
  const dataA = await atA;
  assert.equal(dataA.op_code, 6);
  assert.deepEqual([...dataA.data], [1, 2, 3]);

  // A token is single-use: a second join is "match join rejected" (code 5).
  await assert.rejects(a.socket.joinMatch(undefined, mA.token), (e) => e.code === 5 && /already used/.test(e.message));
});

test("createMatch and joinMatch by id; leaveMatch tells the others", async () => {
  const host = await player("host");
  const guest = await player("guest");
  const own = next(host.socket, "onmatchpresence", (e) => e.joins?.[0]?.user_id === host.session.user_id);
  const created = await host.socket.createMatch();
  assert.match(created.match_id, /^[0-9a-f-]{36}\.$/);
  assert.equal(created.size, 1);
  assert.equal(created.self.user_id, host.session.user_id);
  assert.equal((await own).match_id, created.match_id, "the creator is told of its own join");

  const joinEvent = next(host.socket, "onmatchpresence", (e) => e.joins?.[0]?.user_id === guest.session.user_id);
  const joined = await guest.socket.joinMatch(created.match_id);
  assert.equal(joined.match_id, created.match_id);
  assert.equal(joined.presences.length, 1);
  assert.equal((await joinEvent).joins[0].user_id, guest.session.user_id);

  // Named matches: the same name is the same match.
  const name = uniq("room");
  const named = await host.socket.createMatch(name);
  const same = await guest.socket.createMatch(name);
  assert.equal(same.match_id, named.match_id);
  assert.equal(same.size, 2, "a named create's size counts the creator, as on Nakama");
  // Joining again lists everyone, the joiner included.
  const again = await guest.socket.joinMatch(created.match_id);
  assert.deepEqual(again.presences.map((p) => p.user_id).sort(), [host.session.user_id, guest.session.user_id].sort());
  assert.equal(again.size, 2);
  const fresh = await guest.socket.createMatch();
  assert.notEqual(fresh.match_id, named.match_id, "a nameless create is a new match");

  const data = next(host.socket, "onmatchdata");
  await guest.socket.sendMatchState(created.match_id, 1, "hi");
  assert.equal(text((await data).data), "hi");

  const leaveEvent = next(host.socket, "onmatchpresence", (e) => (e.leaves ?? []).length > 0);
  await guest.socket.leaveMatch(created.match_id);
  assert.equal((await leaveEvent).leaves[0].user_id, guest.session.user_id);
});

test("removeMatchmaker, and clear errors for unknown matches", async () => {
  const p = await player("errors");
  const ticket = await p.socket.addMatchmaker("*", 2, 4);
  await p.socket.removeMatchmaker(ticket.ticket);
  await assert.rejects(p.socket.removeMatchmaker(ticket.ticket), (e) => e.code === 3);
  const unknown = `${crypto.randomUUID()}.`;
  await assert.rejects(p.socket.joinMatch(unknown), (e) => e.code === 4 && /not found/i.test(e.message));
  await assert.rejects(p.socket.leaveMatch(unknown), (e) => e.code === 4);
  await assert.rejects(p.socket.joinMatch(undefined, "not-a-token"), (e) => e.code === 3);
  await assert.rejects(p.socket.addMatchmaker("*", 1, 2), (e) => e.code === 3);
});
