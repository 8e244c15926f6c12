// A game's JavaScript module, written as Nakama's documentation writes one (a global
// InitModule(ctx, logger, nk, initializer) registering RPCs), loaded from runtime.path: nakama-js
// calls its RPCs over HTTP and the socket; ctx carries the caller; an error thrown as
// {message, code} reaches the client with that code; a loop is interrupted at
// runtime.js_call_timeout_ms; nk.notificationSend reaches the player's socket; a module that does
// not load stops the start with its error and line.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, clientFor, uniq, expectHttpError, Inbox } from "./helpers.mjs";

const servers = [];
const dirs = [];
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const MODULE = `
function rpcHello(ctx, logger, nk, payload) {
  const input = JSON.parse(payload || "{}");
  logger.info("hello %s", ctx.username);
  return JSON.stringify({ user: ctx.userId, name: ctx.username, doubled: (input.n ?? 0) * 2, id: nk.uuidv4() });
}
function rpcRefuse(ctx, logger, nk, payload) {
  throw { message: "not your castle", code: 7 };
}
function rpcSpin(ctx, logger, nk, payload) {
  for (;;) {}
}
function rpcNotifyMe(ctx, logger, nk, payload) {
  nk.notificationSend(ctx.userId, "from the module", { gift: "sword" }, 101, null, true);
  return "{}";
}
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("hello", rpcHello);
  initializer.registerRpc("refuse", rpcRefuse);
  initializer.registerRpc("spin", rpcSpin);
  initializer.registerRpc("notify_me", rpcNotifyMe);
}
`;

function moduleDir(source) {
  const dir = mkdtempSync(path.join(tmpdir(), "muster-module-"));
  dirs.push(dir);
  writeFileSync(path.join(dir, "index.js"), source);
  return dir;
}

test("a module's RPCs answer nakama-js over HTTP and the socket, as the caller", async () => {
  const server = await startServer({ MUSTER_RUNTIME__PATH: moduleDir(MODULE), MUSTER_RUNTIME__JS_CALL_TIMEOUT_MS: "300" });
  servers.push(server);
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await client.authenticateDevice(uniq("device"), true, uniq("hero").slice(0, 20));

  const answer = await client.rpc(session, "hello", { n: 21 });
  assert.equal(answer.payload.doubled, 42);
  assert.equal(answer.payload.user, session.user_id);
  assert.equal(answer.payload.name, session.username);
  assert.match(answer.payload.id, /^[0-9a-f-]{36}$/);

  const socket = client.createSocket(false, false);
  const inbox = new Inbox();
  socket.onnotification = (n) => inbox.push(n);
  await socket.connect(session, false);
  const viaSocket = await socket.rpc("hello", JSON.stringify({ n: 2 }));
  assert.equal(JSON.parse(viaSocket.payload).doubled, 4);

  const { body } = await expectHttpError(client.rpc(session, "refuse", {}), 403);
  assert.equal(body.message, "not your castle");
  assert.equal(body.code, 7);

  const started = Date.now();
  const spun = await expectHttpError(client.rpc(session, "spin", {}), 503);
  assert.match(spun.body.message, /300 ms/);
  assert.ok(Date.now() - started < 3000, "interrupted at its limit");
  assert.equal((await client.rpc(session, "hello", { n: 1 })).payload.doubled, 2, "the VM still answers");

  await client.rpc(session, "notify_me", {});
  const told = await inbox.next((n) => n.code === 101, "the module's notification");
  assert.equal(told.subject, "from the module");
  assert.deepEqual(told.content, { gift: "sword" });
  socket.disconnect(false);
});

test("a module that does not load stops the start with its error and line", async () => {
  const broken = "function InitModule(ctx, logger, nk, initializer) {\n  initializer.registerRpc(\"x\", missingFunction);\n}\n";
  await assert.rejects(startServer({ MUSTER_RUNTIME__PATH: moduleDir(broken) }), (e) => {
    assert.match(e.message, /missingFunction/);
    assert.match(e.message, /index\.js/);
    assert.match(e.message, /:2/);
    return true;
  });
});
