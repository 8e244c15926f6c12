// A module written for Nakama — TypeScript against Nakama's own declarations (nakama-common's
// index.d.ts, fetched by the test command), compiled by tsc to ES5 as Nakama's documentation
// builds one — runs unchanged: its RPCs over HTTP and the socket with Nakama's ctx, every nk
// family from one call (on SQLite and PostgreSQL), and its authoritative match played by nakama-js
// clients on JSON and protobuf sockets.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, copyFileSync, writeFileSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { execFileSync } from "node:child_process";
import http from "node:http";
import crypto from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocketAdapterPb } from "@heroiclabs/nakama-js-protobuf";
import { ENGINES, startServerOn, clientFor, uniq, uniqName, Inbox, LOAD_TEST_GRANT } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const suite = path.resolve(here, "..");
const fixture = path.join(here, "fixtures", "ts-module");

/** Nakama's runtime declarations: from the test command's nakama-common, or the Go cache. */
function nakamaTypes() {
  const dirs = [
    process.env.NAKAMA_COMMON_DIR,
    path.join(homedir(), "go/pkg/mod/github.com/heroiclabs/nakama-common@v1.44.0"),
  ].filter(Boolean);
  const found = dirs.map((d) => path.join(d, "index.d.ts")).find((f) => existsSync(f));
  if (!found) throw new Error("nakama-common's index.d.ts not found: set NAKAMA_COMMON_DIR (scripts/test does)");
  return found;
}

/** Compiles the fixture with tsc; the folder holding build/index.js. */
function compile() {
  const dir = mkdtempSync(path.join(tmpdir(), "muster-ts-"));
  copyFileSync(path.join(fixture, "main.ts"), path.join(dir, "main.ts"));
  copyFileSync(nakamaTypes(), path.join(dir, "nakama.d.ts"));
  const config = JSON.parse(readFileSync(path.join(fixture, "tsconfig.json"), "utf8"));
  config.files = ["./main.ts", "./nakama.d.ts"];
  writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify(config));
  execFileSync(process.execPath, [path.join(suite, "node_modules/typescript/bin/tsc"), "-p", dir], { stdio: "pipe" });
  return dir;
}

let built;
let echo;
const servers = [];
before(async () => {
  built = compile();
  // A local HTTP service the module may call (and the only one: runtime.js_http_allow).
  echo = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ method: req.method, got: JSON.parse(body || "{}") }));
    });
  });
  await new Promise((r) => echo.listen(0, "127.0.0.1", r));
});
after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  echo?.close();
  if (built) rmSync(built, { recursive: true, force: true });
});

async function start(engine) {
  const server = await startServerOn(engine, {
    ...LOAD_TEST_GRANT,
    MUSTER_RUNTIME__PATH: path.join(built, "build"),
    MUSTER_RUNTIME__ENV__REGION: "eu",
    MUSTER_RUNTIME__JS_HTTP_ALLOW: `[127.0.0.1:${echo.address().port}]`,
  });
  servers.push(server);
  return server;
}

async function player(client, vars) {
  return client.authenticateDevice(uniq("device"), true, uniqName("ts"), vars);
}

test("tsc's ES5 output loads: RPCs over HTTP and the socket get Nakama's ctx", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });
  const session = await player(client, { tier: "gold" });

  const viaHttp = (await client.rpc(session, "context", {})).payload;
  assert.equal(viaHttp.userId, session.user_id);
  assert.equal(viaHttp.username, session.username);
  assert.deepEqual(viaHttp.vars, { tier: "gold" });
  assert.deepEqual(viaHttp.env, { region: "eu" });
  assert.equal(viaHttp.executionMode, "rpc");
  assert.equal(viaHttp.clientIp, "127.0.0.1");
  assert.ok(viaHttp.node, "ctx.node");

  // Headers and query parameters, as a raw HTTP caller sends them.
  const raw = await fetch(`${server.base}/v2/rpc/context?unwrap&lang=pt&lang=en`, {
    method: "POST",
    headers: { authorization: `Bearer ${session.token}`, "x-game-version": "1.2" },
    body: "{}",
  });
  assert.equal(raw.status, 200);
  const context = await raw.json();
  assert.deepEqual(context.header, ["1.2"]);
  assert.deepEqual(context.queryParams.lang, ["pt", "en"]);
  assert.equal(context.queryParams.unwrap !== undefined, true);

  const socket = client.createSocket(false, false);
  await socket.connect(session, false);
  const viaSocket = JSON.parse((await socket.rpc("context", "{}")).payload);
  assert.equal(viaSocket.userId, session.user_id);
  assert.match(viaSocket.sessionId, /^[0-9a-f-]{36}$/);
  socket.disconnect(false);

  const spent = (await client.rpc(session, "wallet_spend_js", { amount: 30 })).payload;
  assert.equal(spent.previous - spent.coins, 30);
  const account = await client.getAccount(session);
  assert.equal(JSON.parse(account.wallet).coins, spent.coins, "the spend is the account's wallet");
});

for (const engine of ENGINES) {
  test(`every nk family answers a module, as Nakama's runtime does (${engine})`, async () => {
    const server = await start(engine);
    const client = clientFor(server, { autoRefreshSession: false });
    const me = await player(client);
    const friend = await player(client);
    const suffix = uniqName("x");
    const out = (
      await client.rpc(me, "families", {
        friend: friend.user_id,
        suffix,
        http: `http://127.0.0.1:${echo.address().port}/hook`,
      })
    ).payload;

    assert.equal(out.account.userId, me.user_id);
    assert.equal(out.account.coins, 1000000);
    assert.equal(out.account.displayName, `Display ${me.username}`);
    assert.equal(out.account.location, "Lisbon");
    assert.deepEqual(out.account.metadata, { level: 7 });
    assert.deepEqual(out.users, [me.username, friend.username].sort());
    assert.deepEqual(out.byName, [me.user_id]);

    assert.deepEqual(out.storage.versions, [32, 32]);
    assert.equal(out.storage.hp, 10);
    assert.deepEqual(out.storage.listed, ["slot1", "slot2"]);
    assert.equal(out.storage.after, 1, "slot2 deleted");
    assert.match(out.storage.stale, /version check failed/);

    assert.deepEqual(out.leaderboard.order, [70, 50]);
    assert.deepEqual(out.leaderboard.mine, [2]);
    assert.deepEqual(out.tournament.score, [11], "increment: 5 + 6");
    assert.equal(out.tournament.listed, true);
    // By id: the leaderboard alone (an unknown id and a tournament left out), the tournament alone.
    assert.deepEqual(out.leaderboard.found.slice(1), [true, "best", 1]);
    assert.match(out.leaderboard.found[0], /^ts_board_/);
    assert.equal(out.tournament.found.length, 1);
    assert.deepEqual(out.tournament.found[0].slice(1), ["The Cup", 1, 100]);
    assert.deepEqual(out.notifications, ["hello from ts"]);
    assert.deepEqual(out.friends, [[friend.user_id, 1]], "an invite sent");

    assert.equal(out.group.name, `ts group ${suffix}`);
    assert.equal(out.group.members, 2);
    assert.deepEqual(out.group.mine, [true]);
    assert.equal(out.group.found, 1);

    assert.equal(out.chat.channel, `2...ts-lobby-${suffix}`);
    assert.equal(out.chat.channelId, out.chat.channel);
    assert.equal(out.chat.persistent, true);
    assert.equal(out.ledger, true);

    assert.deepEqual(out.utils, {
      b64: "aGk/",
      back: "hi?",
      sha256: "ba7816bf",
      hmac: 64,
      next: 86400,
      uuid: 36,
    });
    assert.equal(out.http.code, 200);
    assert.deepEqual(JSON.parse(out.http.body), { method: "POST", got: { q: 1 } });
    assert.match(out.httpRefused, /not in runtime\.js_http_allow/);

    // What the module did is what clients see.
    const notifications = await client.listNotifications(me, 10);
    assert.deepEqual(notifications.notifications.map((n) => n.subject), ["hello from ts"]);
    const invites = await client.listFriends(friend);
    assert.deepEqual(invites.friends.map((f) => [f.user.id, f.state]), [[me.user_id, 2]]);
    const history = await client.listChannelMessages(me, out.chat.channel, 10);
    assert.deepEqual(history.messages.map((m) => m.content), [{ text: "from the server" }]);
  });
}

function inboxOf(socket) {
  const inbox = new Inbox();
  socket.onmatchdata = (m) => inbox.push({ kind: "data", ...m, text: new TextDecoder().decode(m.data) });
  socket.onmatchpresence = (p) => inbox.push({ kind: "presence", ...p });
  return inbox;
}

test("a JavaScript authoritative match is played by nakama-js clients (JSON and protobuf sockets)", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });
  const [ana, bea, eve] = [await player(client), await player(client), await player(client)];

  const made = (await client.rpc(ana, "matches", {})).payload;
  assert.match(made.matchId, /\./);
  assert.equal(made.label, JSON.stringify({ mode: "ts" }));
  assert.ok(made.listed.includes(made.matchId), "matchList finds it by its label");
  assert.equal(made.signal, "ping pong 0");

  const a = client.createSocket(false, false);
  const b = client.createSocket(false, false, new WebSocketAdapterPb());
  const e = client.createSocket(false, false);
  const [atA, atB] = [inboxOf(a), inboxOf(b)];
  await a.connect(ana, false);
  await b.connect(bea, false);
  await e.connect(eve, false);

  await assert.rejects(e.joinMatch(made.matchId, undefined, { team: "cheaters" }), (err) => {
    assert.match(err.message, /no cheaters/);
    return true;
  });
  await a.joinMatch(made.matchId);
  await atA.next((m) => m.kind === "data" && m.op_code === 100, "the join broadcast");
  await b.joinMatch(made.matchId);
  const welcome = await atB.next((m) => m.kind === "data" && m.op_code === 100, "bea's join broadcast");
  assert.deepEqual(JSON.parse(welcome.text), { joined: [bea.username] });

  await a.sendMatchState(made.matchId, 1, "e4");
  const move = await atB.next((m) => m.kind === "data" && m.op_code === 101, "ana's move at bea");
  assert.deepEqual(JSON.parse(move.text), { from: ana.username, text: "e4", moves: 1 });
  await b.sendMatchState(made.matchId, 1, "e5");
  const reply = await atA.next((m) => m.kind === "data" && m.op_code === 101 && JSON.parse(m.text).text === "e5", "bea's move at ana");
  assert.equal(JSON.parse(reply.text).moves, 2);

  // matchLabelUpdate: the listing sees the new label.
  const listed = await client.listMatches(ana, 10, true, undefined, 0, 10, "+label.moves:2");
  assert.deepEqual(listed.matches.map((m) => m.match_id), [made.matchId]);

  // matchKick: bea leaves, ana is told.
  await b.sendMatchState(made.matchId, 1, "kick me");
  const left = await atA.next((m) => m.kind === "presence" && (m.leaves || []).length > 0, "bea kicked");
  assert.equal(left.leaves[0].user_id, bea.user_id);

  // null from matchLoop ends the match; its last broadcast still arrives.
  await a.sendMatchState(made.matchId, 1, "quit");
  const bye = await atA.next((m) => m.kind === "data" && m.op_code === 199, "the last broadcast");
  assert.equal(bye.text, "bye");
  const after = await client.listMatches(ana, 10, true, undefined, 0, 10, "+label.mode:ts");
  assert.ok(!(after.matches || []).some((m) => m.match_id === made.matchId), "the match ended");
  for (const s of [a, b, e]) s.disconnect(false);
});

test("before and after hooks change and refuse API calls and realtime messages", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });

  await assert.rejects(client.authenticateDevice(uniq("banned-"), true), (res) => {
    assert.equal(res.status, 403);
    return true;
  });
  const me = await player(client);
  const socket = client.createSocket(false, false);
  const notes = new Inbox();
  socket.onnotification = (n) => notes.push(n);
  await socket.connect(me, false);

  // A before hook changes the body; the after hook sees answer and request.
  await client.writeStorageObjects(me, [{ collection: "saves", key: "one", value: { hp: 3 } }]);
  const [stored] = (await client.readStorageObjects(me, { object_ids: [{ collection: "saves", key: "one", user_id: me.user_id }] })).objects;
  assert.deepEqual(stored.value, { hp: 3, stamped: me.user_id });
  const note = await notes.next((n) => n.subject === "stored", "the after hook's notification");
  assert.deepEqual(note.content, { acks: 1, keys: ["one"] });

  // A throw refuses the call with its code; nothing is written.
  const refused = await client
    .writeStorageObjects(me, [{ collection: "forbidden", key: "x", value: {} }])
    .then(() => null, (res) => res);
  assert.equal(refused.status, 403);
  assert.equal((await refused.json()).message, "no writing there");
  const none = await client.listStorageObjects(me, "forbidden", me.user_id, 10);
  assert.equal((none.objects || []).length, 0);

  // Answering nothing refuses the call, as Nakama does.
  const hidden = await client.listMatches(me, 10, true, "hidden").then(() => null, (res) => res);
  assert.equal(hidden.status, 404);
  assert.equal((await hidden.json()).message, "Requested resource was not found.");

  // Realtime: a before hook rewrites the channel joined, or refuses the join.
  const joined = await socket.joinChat("lobby", 1, false, false);
  assert.equal(joined.id, "2...lobby-eu");
  await assert.rejects(socket.joinChat("secret", 1, false, false), (err) => {
    assert.equal(err.message, "Requested resource was not found.");
    return true;
  });
  await socket.writeChatMessage(joined.id, { text: "hi" });
  const echoed = await notes.next((n) => n.subject === "you said", "the realtime after hook's notification");
  assert.deepEqual(echoed.content, { content: JSON.stringify({ text: "hi" }) });
  socket.disconnect(false);
});

test("registerMatchmakerMatched: the matchmaker's group plays the match the module made", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });
  const [ana, bea] = [await player(client), await player(client)];
  const sockets = [client.createSocket(false, false), client.createSocket(false, false)];
  const matched = sockets.map((s) => new Promise((resolve) => (s.onmatchmakermatched = resolve)));
  await sockets[0].connect(ana, false);
  await sockets[1].connect(bea, false);
  const inbox = inboxOf(sockets[0]);
  for (const s of sockets) await s.addMatchmaker("*", 2, 2, {}, { skill: 7 });
  const [first, second] = await Promise.all(matched);
  // As Nakama: the hook's match is announced by its id, not a token.
  assert.equal(first.token, undefined);
  assert.equal(first.match_id, second.match_id);
  const joined = await sockets[0].joinMatch(first.match_id);
  await sockets[1].joinMatch(second.match_id);
  assert.deepEqual(JSON.parse(joined.label), { mode: "mm", names: [ana.username, bea.username].sort().join(","), skill: 7 });
  await inbox.next((m) => m.kind === "data" && m.op_code === 100 && JSON.parse(m.text).joined[0] === bea.username, "bea joins the module's match");
  for (const s of sockets) s.disconnect(false);
});

test("as on Nakama: InitModule runs once per node, an RPC's exception reaches the client, a failing match disconnects its players", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });
  const me = await player(client);

  // Matches and busy VMs load the module again; none runs InitModule again.
  const matchIds = [];
  for (let i = 0; i < 3; i++) matchIds.push((await client.rpc(me, "fragile_match", {})).payload.matchId);
  const counts = await Promise.all([0, 1, 2, 3, 4, 5].map(() => client.rpc(me, "init_runs", {})));
  for (const c of counts) assert.deepEqual(c.payload, { runs: 1 });

  // Error("no input allowed"): 500, code 13, the message kept.
  const failed = await client.rpc(me, "fail", {}).then(() => null, (res) => res);
  assert.equal(failed.status, 500);
  const body = await failed.json();
  assert.equal(body.code, 13);
  assert.match(body.message, /^Error: no input allowed/);

  // The match's loop throws: its players' sockets are closed, so they learn it.
  const other = await player(client);
  const sockets = [client.createSocket(false, false), client.createSocket(false, false)];
  const closed = sockets.map((s) => new Promise((resolve) => (s.ondisconnect = resolve)));
  await sockets[0].connect(me, false);
  await sockets[1].connect(other, false);
  for (const s of sockets) await s.joinMatch(matchIds[0]);
  await sockets[1].sendMatchState(matchIds[0], 13, "break");
  await Promise.all(closed);
});

test("nk's streams, utilities, caches, metrics and sign-in answer a module as Nakama's do", async () => {
  const server = await start("sqlite");
  const client = clientFor(server, { autoRefreshSession: false });
  const [ana, bea] = [await player(client), await player(client)];
  // One JSON socket, one protobuf socket.
  const sockets = [client.createSocket(false, false), client.createSocket(false, false, new WebSocketAdapterPb())];
  const data = sockets.map(() => new Inbox());
  sockets.forEach((s, i) => {
    s.onstreamdata = (d) => data[i].push({ kind: "data", ...d });
    s.onstreampresence = (p) => data[i].push({ kind: "presence", ...p });
  });
  await sockets[0].connect(ana, false);
  await sockets[1].connect(bea, false);
  assert.deepEqual(JSON.parse((await sockets[0].rpc("stream_join", "")).payload), { count: 1 });
  assert.deepEqual(JSON.parse((await sockets[1].rpc("stream_join", "")).payload), { count: 2 });
  const joinedAtAna = await data[0].next((e) => e.kind === "presence" && e.joins?.[0]?.user_id === bea.user_id, "bea's join at ana");
  assert.equal(joinedAtAna.stream.label, "lobby");
  assert.equal(joinedAtAna.joins[0].status, undefined, "an event names the session, not its status (as Nakama)");
  const sent = JSON.parse((await sockets[1].rpc("stream_send", "hello all")).payload);
  assert.deepEqual(sent.members, [ana.user_id, bea.user_id].sort());
  for (const inbox of data) {
    const got = await inbox.next((e) => e.kind === "data", "the stream's data");
    assert.equal(got.data, "hello all");
    assert.equal(got.stream.mode, 120);
  }
  for (const s of sockets) s.disconnect(false);

  const out = (await client.rpc(ana, "utilities", {})).payload;
  assert.equal(out.aes128, "hello   ");
  assert.equal(out.aes256, "hello!!!");
  assert.deepEqual(out.bcrypt, [true, false]);
  assert.equal(out.jwt, 3);
  assert.equal(out.cached, "hello");
  assert.equal(out.deleted, true);
  assert.deepEqual(out.signedIn, { created: true, same: true });
  assert.deepEqual(out.token, { parts: 3, exp: true });
  // Without [social.steam] settings, as Nakama answers it.
  assert.equal(out.steam, "Steam authentication is not configured.");
  assert.equal(out.satori, "nk.getSatori is not supported by Muster");
  assert.equal(out.file, true);
  const metrics = await (await fetch(`${server.base}/metrics`)).text();
  assert.match(metrics, /muster_custom_ts_calls\{route="utilities"\} 1/);
  assert.match(metrics, /muster_custom_ts_gauge 2.5/);
});

for (const engine of ENGINES) {
  test(`the rest of nk answers a module, each function once (${engine})`, async () => {
    const server = await start(engine);
    const client = clientFor(server, { autoRefreshSession: false });
    const me = await player(client);
    const friend = await player(client);
    const suffix = uniqName("e");
    const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    });
    const socket = client.createSocket(false, false);
    await socket.connect(me, false);
    const out = JSON.parse((await socket.rpc("everything_else", JSON.stringify({ friend: friend.user_id, suffix, rsaKey: privateKey }))).payload);

    assert.equal(out.utils.stringToBinary, "héllo");
    assert.equal(out.utils.base64Url, "a?b>c");
    assert.equal(out.utils.base16, "hi");
    assert.equal(out.utils.md5, "900150983cd24fb0d6963f7d28e17f72");
    assert.equal(out.utils.random, 16);
    assert.equal(out.utils.cronPrev, 86400);
    assert.ok(crypto.verify("sha256", Buffer.from("signed text"), publicKey, Buffer.from(out.utils.rsa, "latin1")), "the RSA signature verifies");
    assert.equal(out.utils.cleared, "gone");
    assert.deepEqual(out.custom, [true, true]);
    assert.deepEqual(out.accounts, [true, true]);
    assert.equal(out.deleted, 0);
    assert.deepEqual(out.friendStatus, [[1, "ally"]]);
    assert.equal(out.friendsOfFriends, true);
    assert.deepEqual(out.blocked, [3]);
    assert.deepEqual(out.group, [["changed", true, 1]]);
    assert.equal(out.groupGone, 0);
    assert.equal(out.randomGroups, true);
    assert.deepEqual(out.randomUsers, [true, true, -1], "every account (fewer than asked), the system user left out");
    assert.deepEqual(out.notification, [`updated ${suffix}`]);
    assert.equal(out.notificationGone, 0);
    assert.equal(out.secondGone, 0);
    assert.equal(out.wallet, 5);
    assert.equal(out.ledger, "checked");
    assert.equal(out.counter, 2);
    assert.equal(out.boards, true);
    assert.deepEqual(out.fromRank, [2]);
    assert.deepEqual(out.haystack.filter(Boolean).length, 1);
    assert.equal(out.boardLeft, 1);
    assert.deepEqual(out.cup, [[4, 2, 3]]);
    assert.deepEqual(out.stream, { hidden: true, status: "hiding", visible: 0 });
    assert.equal(out.streamCount, 0);
    assert.deepEqual(out.chat, ['{"v":2}']);
    await assert.rejects(client.getAccount({ ...me, token: out.loggedOut }), (e) => e.status === 401, "the logged-out token is refused");

    // sessionDisconnect closes the caller's socket.
    const closed = new Promise((resolve) => (socket.ondisconnect = resolve));
    socket.rpc("disconnect_me", "").catch(() => {});
    await closed;
  });
}
