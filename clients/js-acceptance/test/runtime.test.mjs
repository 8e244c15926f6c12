// A game's JavaScript module, written as Nakama's documentation writes one (a global
// InitModule(ctx, logger, nk, initializer) registering RPCs), loaded from runtime.path: nakama-js
// calls its RPCs over HTTP and the socket; ctx carries the caller; an error thrown as
// {message, code} reaches the client with that code; a loop is interrupted at
// runtime.js_call_timeout_ms; nk.notificationSend reaches the player's socket; a module that does
// not load stops the start with its error and line.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, clientFor, uniq, expectHttpError, Inbox, SERVER_BIN } from "./helpers.mjs";

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

const HOSTILE = `
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("bomb", function () {
    const hoard = [];
    for (;;) hoard.push(new Array(1 << 16).fill(hoard.length));
  });
  initializer.registerRpc("throw_string", function () { throw "just a string"; });
  initializer.registerRpc("throw_number", function () { throw 42; });
  initializer.registerRpc("missing_nk", function (ctx, logger, nk) { return nk.storageIndexList("no_index", "*", 10); });
  initializer.registerRpc("no_fs", function () { return JSON.stringify([typeof require, typeof process, typeof fetch, typeof std, typeof os]); });
  initializer.registerRpc("reenter", function (ctx, logger, nk, payload) {
    const port = JSON.parse(payload).port;
    const answer = nk.httpRequest("http://127.0.0.1:" + port + "/v2/rpc/reenter?unwrap&http_key=defaulthttpkey", "post", {}, payload, 500);
    return answer.body;
  });
  initializer.registerRpc("ok", function () { return JSON.stringify("ok"); });
}
`;

test("hostile modules are contained: memory bombs, odd throws, missing nk functions, no system access, re-entrant calls", async () => {
  const dir = moduleDir(HOSTILE);
  const server = await startServer({
    MUSTER_RUNTIME__PATH: dir,
    MUSTER_RUNTIME__JS_MEMORY_MB: "16",
    MUSTER_RUNTIME__JS_CALL_TIMEOUT_MS: "2000",
    MUSTER_RUNTIME__JS_HTTP_TIMEOUT_MS: "500",
  });
  servers.push(server);
  const port = server.port;
  // The server's own address, allowed only now: a module calling back into its server.
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await client.authenticateDevice(uniq("device"), true);

  // Internal errors reach the client as Nakama's code 13, their detail the server's log.
  for (const id of ["bomb", "throw_string", "throw_number", "missing_nk"]) {
    const failed = await expectHttpError(client.rpc(session, id, {}), 500);
    assert.equal(failed.body.code, 13);
  }
  const log = server.logs.join("");
  assert.match(log, /out of memory/);
  assert.match(log, /just a string/);
  assert.match(log, /42/);
  assert.match(log, /nk\.storageIndexList is not supported by Muster/);
  assert.deepEqual((await client.rpc(session, "no_fs", {})).payload, ["undefined", "undefined", "undefined", "undefined", "undefined"]);
  // Not on the allow-list: refused, whatever the address.
  const reentered = await expectHttpError(client.rpc(session, "reenter", { port }), 403);
  assert.match(reentered.body.message, /js_http_allow/);
  assert.equal((await client.rpc(session, "ok", {})).payload, "ok", "the node serves throughout");
});

test("a module calling back into its own server is bounded by the HTTP timeout", async () => {
  const server = await startServer({
    MUSTER_RUNTIME__PATH: moduleDir(HOSTILE),
    MUSTER_RUNTIME__JS_HTTP_ALLOW: "[127.0.0.1]",
    MUSTER_RUNTIME__JS_HTTP_TIMEOUT_MS: "500",
  });
  servers.push(server);
  const client = clientFor(server, { autoRefreshSession: false, timeoutMs: 20000 });
  const session = await client.authenticateDevice(uniq("device"), true);
  // reenter → reenter → … : every VM ends up waiting on the next; the innermost wait times out
  // and every call unwinds with an error instead of holding the VMs forever.
  const started = Date.now();
  await expectHttpError(client.rpc(session, "reenter", { port: server.port }), 503);
  assert.ok(Date.now() - started < 15000, "bounded");
  assert.equal((await client.rpc(session, "ok", {})).payload, "ok", "the node serves throughout");
});

function versioned(version, { broken = false } = {}) {
  return `
function matchInit(ctx, logger, nk, params) { return { state: {}, tickRate: 5, label: "${version}" }; }
function keep(ctx, logger, nk, dispatcher, tick, state) { return { state: state }; }
function matchJoinAttempt(ctx, logger, nk, dispatcher, tick, state) { return { state: state, accept: true }; }
function matchSignal(ctx, logger, nk, dispatcher, tick, state, data) { return { state: state, data: "${version}" }; }
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("version", function () { return JSON.stringify("${version}"); });
  initializer.registerRpc("make", function () { return JSON.stringify(nk.matchCreate("m", {})); });
  initializer.registerRpc("ask", function (ctx, logger, nk, payload) { return JSON.stringify(nk.matchSignal(JSON.parse(payload), "?")); });
  initializer.registerMatch("m", { matchInit: matchInit, matchJoinAttempt: matchJoinAttempt, matchJoin: keep,
    matchLeave: keep, matchLoop: keep, matchTerminate: keep, matchSignal: matchSignal });
  ${broken ? "initializer.registerRpc(\"x\", notDefinedAnywhere);" : ""}
}
`;
}

test("reload: new calls use the new bundle, running matches keep theirs, a broken bundle is refused", async () => {
  const dir = moduleDir(versioned("v1"));
  const server = await startServer({ MUSTER_RUNTIME__PATH: dir });
  servers.push(server);
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await client.authenticateDevice(uniq("device"), true);
  const rpc = async (id, payload) => (await client.rpc(session, id, payload)).payload;
  assert.equal(await rpc("version", {}), "v1");
  const old = await rpc("make", {});

  // muster runtime reload, against the running server.
  writeFileSync(path.join(dir, "index.js"), versioned("v2"));
  const reload = () =>
    spawnSync(SERVER_BIN, ["runtime", "reload", "--server", server.base], { encoding: "utf8", env: { ...process.env } });
  const done = reload();
  assert.equal(done.status, 0, done.stderr);
  assert.deepEqual(JSON.parse(done.stdout).rpcs, ["ask", "make", "version"]);
  assert.equal(await rpc("version", {}), "v2");
  const fresh = await rpc("make", {});
  assert.equal(await client.rpc(session, "ask", old).then((r) => r.payload), "v1", "a running match keeps its VM");
  assert.equal(await client.rpc(session, "ask", fresh).then((r) => r.payload), "v2");

  // A bundle that does not load: refused with its error; the old one stays.
  writeFileSync(path.join(dir, "index.js"), versioned("v3", { broken: true }));
  const refused = reload();
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /notDefinedAnywhere/);
  assert.equal(await rpc("version", {}), "v2");

  // SIGHUP does the same.
  writeFileSync(path.join(dir, "index.js"), versioned("v4"));
  process.kill(server.pid, "SIGHUP");
  const deadline = Date.now() + 10000;
  let seen = await rpc("version", {});
  while (seen !== "v4" && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    seen = await rpc("version", {});
  }
  assert.equal(seen, "v4");
});

const SCHEDULED = `
function tell(nk, tournament, what, end, reset, ctx) {
  nk.notificationSend(tournament.metadata.player, what, {
    id: tournament.id, title: tournament.title, end: end, reset: reset, endTime: tournament.endTime,
    mode: ctx.executionMode, size: tournament.size,
  }, 200, null, false);
}
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("make_cup", function (ctx, logger, nk, payload) {
    const p = JSON.parse(payload);
    // tournamentCreate(id, authoritative, sortOrder, operator, duration, resetSchedule, metadata,
    //   title, description, category, startTime, endTime, maxSize, maxNumScore, joinRequired)
    nk.tournamentCreate(p.id, true, "descending", "best", p.duration, "", { player: ctx.userId },
      "Cup", "", 1, p.start, p.end, 0, 0, false);
    nk.tournamentRecordWrite(p.id, ctx.userId, ctx.username, 7);
    return "{}";
  });
  initializer.registerTournamentEnd(function (ctx, logger, nk, tournament, end, reset) {
    tell(nk, tournament, "ended", end, reset, ctx);
  });
  initializer.registerTournamentReset(function (ctx, logger, nk, tournament, end, reset) {
    tell(nk, tournament, "reset", end, reset, ctx);
  });
  initializer.registerLeaderboardReset(function (ctx, logger, nk, leaderboard, reset) {});
}
`;

test("registerTournamentEnd and registerTournamentReset are told when a tournament closes and expires", async () => {
  const server = await startServer({ MUSTER_RUNTIME__PATH: moduleDir(SCHEDULED) });
  servers.push(server);
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await client.authenticateDevice(uniq("device"), true);
  const socket = client.createSocket(false, false);
  const inbox = new Inbox();
  socket.onnotification = (n) => inbox.push(n);
  await socket.connect(session, false);

  // Open for scores 2 s from now, its records expiring at its end 3 s from now.
  const start = Math.floor(Date.now() / 1000);
  const id = uniq("cup");
  await client.rpc(session, "make_cup", { id, start, end: start + 3, duration: 2 });
  const ended = await inbox.next((n) => n.subject === "ended", "the tournament's end", 10000);
  assert.deepEqual(ended.content, {
    id, title: "Cup", end: start + 2, reset: start + 3, endTime: start + 3, mode: "tournament_end", size: 1,
  });
  const reset = await inbox.next((n) => n.subject === "reset", "the tournament's reset", 10000);
  assert.deepEqual(reset.content, {
    id, title: "Cup", end: start + 2, reset: start + 3, endTime: start + 3, mode: "tournament_reset", size: 1,
  });
  socket.disconnect(false);
});
