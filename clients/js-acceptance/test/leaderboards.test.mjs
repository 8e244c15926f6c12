// Leaderboards through nakama-js: writeLeaderboardRecord, listLeaderboardRecords (pages, owner
// records, cursors), listLeaderboardRecordsAroundOwner and the API client's deleteLeaderboardRecord, on boards
// created from configuration; Nakama's errors for unknown and authoritative boards.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, expectHttpError, GRPC } from "./helpers.mjs";

let server;
let client;
before(async () => {
  server = await startServer({
    MUSTER_LEADERBOARDS__BOARDS:
      '[{id="weekly", sort_order="desc", operator="best", reset_schedule="0 0 * * 1"}, {id="laps", sort_order="asc"}, {id="ranked", authoritative=true}]',
  });
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
});

test("records are written and listed with ranks, pages and owner records", async () => {
  const players = [];
  for (let i = 0; i < 5; i++) players.push(await client.authenticateDevice(uniq("device"), true));
  for (const [i, session] of players.entries()) {
    const record = await client.writeLeaderboardRecord(session, "weekly", { score: 100 + i * 10, metadata: { i } });
    assert.equal(record.score, 100 + i * 10);
    assert.equal(record.owner_id, session.user_id);
    assert.ok(record.expiry_time, "a resetting board's record says when its period ends");
  }
  // A worse score keeps the best; a better one replaces it.
  const kept = await client.writeLeaderboardRecord(players[4], "weekly", { score: 1 });
  assert.equal(kept.score, 140);
  assert.equal(kept.rank, 1);

  const first = await client.listLeaderboardRecords(players[0], "weekly", [players[0].user_id], 2);
  assert.deepEqual(first.records.map((r) => [r.owner_id, r.score, r.rank]), [
    [players[4].user_id, 140, 1],
    [players[3].user_id, 130, 2],
  ]);
  assert.deepEqual(first.owner_records.map((r) => [r.score, r.rank]), [[100, 5]]);
  assert.equal(first.rank_count, 5);
  assert.deepEqual(first.records[0].metadata, { i: 4 });
  const second = await client.listLeaderboardRecords(players[0], "weekly", undefined, 2, first.next_cursor);
  assert.deepEqual(second.records.map((r) => r.rank), [3, 4]);
  const back = await client.listLeaderboardRecords(players[0], "weekly", undefined, 2, second.prev_cursor);
  assert.deepEqual(back.records.map((r) => r.rank), [1, 2]);

  const around = await client.listLeaderboardRecordsAroundOwner(players[0], "weekly", players[2].user_id, 3);
  assert.deepEqual(around.records.map((r) => r.rank), [2, 3, 4]);

  // The Client class has no delete; nakama-js's generated API client does.
  await client.apiClient.deleteLeaderboardRecord(players[4].token, "weekly");
  const after = await client.listLeaderboardRecords(players[0], "weekly", undefined, 10);
  assert.deepEqual(after.records.map((r) => r.rank), [1, 2, 3, 4]);
  assert.equal(after.records[0].owner_id, players[3].user_id);
});

test("an ascending board ranks the lowest first; errors are Nakama's", async () => {
  const a = await client.authenticateDevice(uniq("device"), true);
  const b = await client.authenticateDevice(uniq("device"), true);
  await client.writeLeaderboardRecord(a, "laps", { score: 61 });
  await client.writeLeaderboardRecord(b, "laps", { score: 59 });
  const list = await client.listLeaderboardRecords(a, "laps", undefined, 10);
  assert.deepEqual(list.records.map((r) => r.owner_id), [b.user_id, a.user_id]);

  const missing = await expectHttpError(client.writeLeaderboardRecord(a, "nope", { score: 1 }), 404);
  assert.equal(missing.body.message, "Leaderboard not found.");
  const locked = await expectHttpError(client.writeLeaderboardRecord(a, "ranked", { score: 1 }), 403);
  assert.equal(locked.body.code, GRPC.PERMISSION_DENIED);
  assert.equal(locked.body.message, "Leaderboard only allows authoritative score submissions.");
});
