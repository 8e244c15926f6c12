// listMatches through nakama-js: authoritative rooms with JSON labels (Muster's POST /v2/rooms,
// the arena's `label` param) and a relayed match, filtered by kind, exact label, size and a label
// query in Nakama's syntax; Nakama's refusals.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, expectHttpError, GRPC } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = clientFor(server, { autoRefreshSession: false });
});
after(async () => {
  await server?.stop();
});

async function room(session, label) {
  const answer = await fetch(`${server.base}/v2/rooms`, {
    method: "POST",
    headers: { Authorization: `Bearer ${session.token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ handler: "arena", capacity: 4, params: { label } }),
  });
  assert.equal(answer.status, 201, await answer.clone().text());
  return (await answer.json()).room_id;
}

test("listMatches filters by kind, label, size and a label query", async () => {
  const host = await client.authenticateDevice(uniq("device"), true);
  const ranked5 = '{"mode":"ranked","level":5,"team":{"size":3}}';
  const casual = '{"mode":"casual","level":1}';
  const ranked2 = '{"mode":"ranked","level":2}';
  const ids = { ranked5: await room(host, ranked5), casual: await room(host, casual), ranked2: await room(host, ranked2) };
  const socket = client.createSocket(false, false);
  await socket.connect(host, false);
  const relayed = await socket.createMatch();

  const idsOf = (list) => (list.matches ?? []).map((m) => m.match_id).sort();
  const all = await client.listMatches(host, 100);
  assert.deepEqual(idsOf(all), [ids.ranked5, ids.casual, ids.ranked2, relayed.match_id].sort());
  const first = all.matches.find((m) => m.match_id === ids.ranked5);
  assert.equal(first.authoritative, true);
  assert.equal(first.label, ranked5);
  assert.equal(first.handler_name, "arena");
  assert.ok(first.tick_rate > 0);

  assert.deepEqual(idsOf(await client.listMatches(host, 10, true, undefined, undefined, undefined, "+label.mode:ranked +label.level:>=3")), [ids.ranked5]);
  assert.deepEqual(idsOf(await client.listMatches(host, 10, true, undefined, undefined, undefined, "+label.mode:ranked -label.level:5")), [ids.ranked2]);
  assert.deepEqual(idsOf(await client.listMatches(host, 10, true, undefined, undefined, undefined, "+label.team.size:3")), [ids.ranked5]);
  assert.deepEqual(idsOf(await client.listMatches(host, 10, true, casual)), [ids.casual], "an exact label");
  assert.deepEqual(idsOf(await client.listMatches(host, 10, false)), [relayed.match_id], "relayed only");
  assert.deepEqual(idsOf(await client.listMatches(host, 10, undefined, undefined, 1)), [relayed.match_id], "at least one player");
  assert.equal((await client.listMatches(host, 2)).matches.length, 2, "at most limit");

  for (const [what, call, message] of [
    ["limit", () => client.listMatches(host, 101), /limit must be between 1 and 100/],
    ["relayed label", () => client.listMatches(host, 10, false, casual), /Label filtering is not supported/],
    ["relayed query", () => client.listMatches(host, 10, false, undefined, undefined, undefined, "+label.mode:x"), /Query filtering is not supported/],
    ["sizes", () => client.listMatches(host, 10, undefined, undefined, 3, 1), /greater than or equal to minimum size/],
    ["query", () => client.listMatches(host, 10, true, undefined, undefined, undefined, "+label.mode"), /Invalid query/],
    ["field", () => client.listMatches(host, 10, true, undefined, undefined, undefined, "+properties.mode:x"), /Invalid query/],
  ]) {
    const { body } = await expectHttpError(call(), 400);
    assert.equal(body.code, GRPC.INVALID_ARGUMENT, what);
    assert.match(body.message, message, what);
  }
  socket.disconnect(false);
});
