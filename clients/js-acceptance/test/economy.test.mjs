// Wallets and server functions through nakama-js: client.rpc, client.rpcHttpKey, socket.rpc,
// and the wallet as getAccount shows it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, expectHttpError, GRPC, PLAYERS_MAY_CALL_BUILTINS, LOAD_TEST_GRANT } from "./helpers.mjs";

// These tests call the built-in functions as players, which the studio must opt in to.
let server;
let client;
const sockets = [];
before(async () => {
  server = await startServer({ ...PLAYERS_MAY_CALL_BUILTINS, ...LOAD_TEST_GRANT });
  client = clientFor(server);
});
after(async () => {
  for (const s of sockets) s.disconnect(false);
  await server?.stop();
});

test("by default a player cannot call the built-in value functions: 403 (code 7), nothing changes; rpcHttpKey still can", async () => {
  const closed = await startServer(LOAD_TEST_GRANT);
  try {
    const c = clientFor(closed);
    const session = await c.authenticateDevice(uniq("device"), true);
    const mint = await expectHttpError(c.rpc(session, "inventory_grant", { item: "legendary", count: 1000000000 }), 403);
    assert.equal(mint.body.code, GRPC.PERMISSION_DENIED);
    await expectHttpError(c.rpc(session, "wallet_spend", { amount: 1 }), 403);
    const socket = c.createSocket(false, false);
    await socket.connect(session, false);
    await assert.rejects(socket.rpc("inventory_grant", JSON.stringify({ item: "legendary" })), (e) => e.code === 7);
    socket.disconnect(false);
    assert.deepEqual(JSON.parse((await c.getAccount(session)).wallet), { coins: 1000000 });
    const granted = await c.rpcHttpKey("defaulthttpkey", "inventory_grant", { item: "gift", user_id: session.user_id });
    assert.deepEqual(granted.payload.items, { gift: 1 });
  } finally {
    await closed.stop();
  }
});

const walletOf = async (session) => JSON.parse((await client.getAccount(session)).wallet);

test("a new account starts with the configured wallet, visible in getAccount", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const account = await client.getAccount(session);
  assert.equal(typeof account.wallet, "string", "Nakama's wallet is a JSON string");
  assert.deepEqual(JSON.parse(account.wallet), { coins: 1000000 });
});

test("client.rpc spends coins and grants items; getAccount shows the new balance", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const spent = await client.rpc(session, "wallet_spend", { amount: 250 });
  assert.equal(spent.payload.wallet.coins, 999750, JSON.stringify(spent));
  assert.equal(typeof spent.payload.ledger_id, "string");
  const granted = await client.rpc(session, "inventory_grant", { item: "sword", kind: "weapon", count: 2 });
  assert.deepEqual(granted.payload.items, { sword: 2 });
  assert.deepEqual(await walletOf(session), { coins: 999750 });

  // The same idempotency key twice: applied once, same answer.
  const once = await client.rpc(session, "wallet_spend", { amount: 50, idempotency_key: "buy-1" });
  const twice = await client.rpc(session, "wallet_spend", { amount: 50, idempotency_key: "buy-1" });
  assert.deepEqual(twice, once);
  assert.deepEqual(await walletOf(session), { coins: 999700 });
});

test("client.rpc errors: unknown function 404, overdraw 400 (code 9), negative amount 400 (code 3); nothing changes", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const unknown = await expectHttpError(client.rpc(session, "no_such_function", {}), 404);
  assert.equal(unknown.body.code, GRPC.NOT_FOUND);
  const overdraw = await expectHttpError(client.rpc(session, "wallet_spend", { amount: 1000001 }), 400);
  assert.equal(overdraw.body.code, 9);
  assert.match(overdraw.body.message, /Insufficient coins/);
  const negative = await expectHttpError(client.rpc(session, "wallet_spend", { amount: -5 }), 400);
  assert.equal(negative.body.code, GRPC.INVALID_ARGUMENT);
  assert.deepEqual(await walletOf(session), { coins: 1000000 });
});

test("client.rpcHttpKey calls a function server-to-server for a named user", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const granted = await client.rpcHttpKey("defaulthttpkey", "inventory_grant", { item: "gift", user_id: session.user_id });
  assert.deepEqual(granted.payload.items, { gift: 1 });
  const wrong = await expectHttpError(client.rpcHttpKey("wrong-key", "inventory_grant", { item: "gift", user_id: session.user_id }), 401);
  assert.equal(wrong.body.code, GRPC.UNAUTHENTICATED);
  const again = await client.rpcHttpKey("defaulthttpkey", "inventory_grant", { item: "gift", user_id: session.user_id });
  assert.deepEqual(again.payload.items, { gift: 2 }, "the wrong key granted nothing");
});

test("socket.rpc answers with the result payload; errors are error envelopes and change nothing", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = client.createSocket(false, false);
  sockets.push(socket);
  await socket.connect(session, false, 5000);

  const answer = await socket.rpc("wallet_spend", JSON.stringify({ amount: 10 }));
  assert.equal(answer.id, "wallet_spend");
  assert.equal(JSON.parse(answer.payload).wallet.coins, 999990);

  await assert.rejects(socket.rpc("no_such_function", "{}"), (err) => {
    assert.equal(err.code, 6, JSON.stringify(err));
    return true;
  });
  await assert.rejects(socket.rpc("wallet_spend", JSON.stringify({ amount: 2000000 })), (err) => {
    assert.equal(err.code, 7, JSON.stringify(err));
    assert.match(err.message, /Insufficient coins/);
    return true;
  });
  await assert.rejects(socket.rpc("wallet_spend", "{not json"), (err) => {
    assert.equal(err.code, 3, JSON.stringify(err));
    return true;
  });
  assert.deepEqual(await walletOf(session), { coins: 999990 });
  socket.disconnect(false);
});
