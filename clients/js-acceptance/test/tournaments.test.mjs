// Tournaments through nakama-js: listTournaments, joinTournament, writeTournamentRecord,
// listTournamentRecords and listTournamentRecordsAroundOwner, on tournaments created from
// configuration; Nakama's refusals for a score before joining and past max_num_score.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, expectHttpError } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer({
    MUSTER_LEADERBOARDS__TOURNAMENTS:
      '[{id="cup", title="The Cup", category=2, duration=3600, join_required=true, max_num_score=2, max_size=100}, {id="open", category=5, duration=3600}]',
  });
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
});

test("tournaments are listed with their window and state", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const list = await client.listTournaments(session, 0, 127, undefined, undefined, 10);
  const cup = list.tournaments.find((t) => t.id === "cup");
  assert.ok(cup, JSON.stringify(list));
  assert.equal(cup.title, "The Cup");
  assert.equal(cup.category, 2);
  assert.equal(cup.can_enter, true);
  assert.equal(cup.duration, 3600);
  assert.ok(cup.end_active > cup.start_active);
  const five = await client.listTournaments(session, 5, 5, undefined, undefined, 10);
  assert.deepEqual(five.tournaments.map((t) => t.id), ["open"]);
});

test("players join, score within their attempts, and are ranked", async () => {
  const players = [];
  for (let i = 0; i < 3; i++) players.push(await client.authenticateDevice(uniq("device"), true));
  const notJoined = await expectHttpError(client.writeTournamentRecord(players[0], "cup", { score: 5 }), 400);
  assert.equal(notJoined.body.message, "Must join tournament before attempting to write value.");
  for (const [i, session] of players.entries()) {
    assert.equal(await client.joinTournament(session, "cup"), true);
    const record = await client.writeTournamentRecord(session, "cup", { score: 10 * (i + 1), metadata: { i } });
    assert.equal(record.score, 10 * (i + 1));
    assert.equal(record.num_score, 1);
  }
  await client.writeTournamentRecord(players[0], "cup", { score: 100 });
  const spent = await expectHttpError(client.writeTournamentRecord(players[0], "cup", { score: 200 }), 400);
  assert.equal(spent.body.message, "Reached allowed max number of score attempts.");

  const records = await client.listTournamentRecords(players[1], "cup", [players[1].user_id], 10);
  assert.deepEqual(records.records.map((r) => [r.owner_id, r.score, r.rank]), [
    [players[0].user_id, 100, 1],
    [players[2].user_id, 30, 2],
    [players[1].user_id, 20, 3],
  ]);
  assert.deepEqual(records.owner_records.map((r) => r.rank), [3]);
  const around = await client.listTournamentRecordsAroundOwner(players[1], "cup", players[2].user_id, 1);
  assert.deepEqual(around.records.map((r) => r.owner_id), [players[2].user_id]);

  // A tournament without join_required takes scores at once.
  const open = await client.writeTournamentRecord(players[0], "open", { score: 7 });
  assert.equal(open.rank, 1);
});
