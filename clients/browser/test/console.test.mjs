// The console in a real headless browser, as an operator uses it: log in, watch the status
// charts gain points while swarm runs, find a player by display name, change their wallet and
// see the ledger row and the audit entry, edit a storage object and be refused on a stale
// version, end a player's session and see their socket close, call an RPC from the explorer.
// And its defences: no route without a session, no change without the CSRF token, nothing
// changed by a read-only user, a player's `<script>` name shown as text.
// Screenshots of the pages go to SCREENSHOT_DIR (docs/images by run.sh) for docs/console.md.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { freePort, waitFor } from "./support.mjs";

const SERVER_BIN = process.env.SERVER_BIN;
const SWARM_BIN = process.env.SWARM_BIN;
const CHROMIUM = process.env.CHROMIUM;
const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR;
const SCENARIO = new URL("../../../scenarios/smoke.toml", import.meta.url).pathname;
const ADMIN_PASSWORD = "console-admin-pw";
const XSS_NAME = "<script>window.__xss=1</script>";

/** Muster with the console on, and a JavaScript module with one RPC (`echo`) and one hook. */
async function startMuster() {
  const port = await freePort();
  const consolePort = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), "muster-console-"));
  const runtimeDir = path.join(dataDir, "runtime");
  mkdirSync(runtimeDir);
  writeFileSync(path.join(runtimeDir, "index.js"), `
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("echo", function (ctx, logger, nk, payload) {
    return JSON.stringify({ user: ctx.userId, payload: payload });
  });
  initializer.registerAfterGetAccount(function (ctx, logger, nk, data) {});
}`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("MUSTER_")));
  const logs = [];
  const child = spawn(SERVER_BIN, ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--log", "warn"], {
    env: {
      ...env,
      NO_COLOR: "1",
      MUSTER_ROOMS__TCP_LISTEN: "",
      MUSTER_ENET__LISTEN: "",
      MUSTER_LINKS__LISTEN: "",
      MUSTER_GRPC__LISTEN: "",
      MUSTER_CONSOLE__LISTEN: `127.0.0.1:${consolePort}`,
      MUSTER_CONSOLE__ADMIN_PASSWORD: ADMIN_PASSWORD,
      MUSTER_RUNTIME__PATH: runtimeDir,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (c) => logs.push(c.toString()));
  child.stderr.on("data", (c) => logs.push(c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await waitFor("the console to answer", async () => {
    if (child.exitCode !== null) throw new Error(`muster exited: ${logs.join("")}`);
    try {
      return (await fetch(`http://127.0.0.1:${consolePort}/`)).ok;
    } catch {
      return false;
    }
  });
  return {
    api: `http://127.0.0.1:${port}`,
    console: `http://127.0.0.1:${consolePort}`,
    port,
    logs,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A player made through the game API: their session token and id. */
async function player(customId, username, displayName) {
  const basic = Buffer.from("defaultkey:").toString("base64");
  const r = await fetch(`${muster.api}/v2/account/authenticate/custom?create=true&username=${encodeURIComponent(username)}`, {
    method: "POST",
    headers: { authorization: `Basic ${basic}`, "content-type": "application/json" },
    body: JSON.stringify({ id: customId }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  const { token } = await r.json();
  const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  if (displayName) {
    const u = await fetch(`${muster.api}/v2/account`, { method: "PUT", headers: auth, body: JSON.stringify({ display_name: displayName }) });
    assert.equal(u.status, 200);
  }
  const me = await (await fetch(`${muster.api}/v2/account`, { headers: auth })).json();
  return { token, id: me.user.id, auth };
}

/** A console login through the API: its cookie and CSRF token. */
async function apiLogin(username, password) {
  const r = await fetch(`${muster.console}/api/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  assert.equal(r.status, 200);
  return { cookie: r.headers.get("set-cookie").split(";")[0], csrf: (await r.json()).csrf };
}

async function shot(page, name) {
  if (!SCREENSHOT_DIR) return;
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `console-${name}.png`) });
}

/** Searches the players page for `text` (one step in the page, so no element goes stale). */
async function searchPlayers(text) {
  await page.goto(`${muster.console}/#players`);
  await page.waitForSelector("#player-search");
  await page.evaluate((q) => {
    const input = document.querySelector("#player-search");
    input.value = q;
    input.form.requestSubmit();
  }, text);
}

/** Waits until the players page lists exactly `names` (the answer to the latest search). */
async function shownAccounts(names) {
  await page.waitForFunction(
    (expected) => JSON.stringify([...document.querySelectorAll("#accounts a")].map((a) => a.textContent)) === expected,
    {},
    JSON.stringify(names),
  );
}

async function logIn(page, username, password) {
  await page.goto(`${muster.console}/`);
  await page.waitForSelector("#login:not([hidden])");
  await page.type("#login input[name=username]", username);
  await page.type("#login input[name=password]", password);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#nav:not([hidden])");
}

let muster, browser, page, zed, xss, startingWallet;
/** Script errors on the console's pages: none is expected. */
const pageErrors = [];

/** A player's wallet as the game API shows it. */
async function wallet(who) {
  const account = await (await fetch(`${muster.api}/v2/account`, { headers: who.auth })).json();
  return JSON.parse(account.wallet);
}

before(async () => {
  muster = await startMuster();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.setViewport({ width: 1280, height: 900 });
  zed = await player("zed-custom-id", "zed", "Zed Fighter");
  xss = await player("xss-custom-id", XSS_NAME, "<img src=x onerror=window.__xss=2>");
  startingWallet = await wallet(zed);
});

after(async () => {
  if (browser) await browser.close();
  if (muster) await muster.stop();
});

test("every console route refuses without a session, and a change without the CSRF token", async () => {
  for (const [method, route] of [["GET", "/api/status"], ["GET", "/api/accounts"], ["GET", `/api/accounts/${zed.id}`],
    ["POST", `/api/accounts/${zed.id}/wallet`], ["GET", "/api/storage?collection=saves"], ["POST", "/api/storage/object"],
    ["GET", "/api/runtime"], ["POST", "/api/runtime/echo/call"], ["GET", "/api/audit"], ["GET", "/api/users"],
    ["GET", `/api/accounts/${zed.id}/storage`], ["GET", `/api/accounts/${zed.id}/messages`], ["GET", "/api/parties"], ["GET", "/api/autoscaler"],
    ["GET", `/api/matches/${zed.id}.local`], ["POST", `/api/matches/${zed.id}.local/kick`], ["POST", "/api/leaderboards/any/metadata"]]) {
    const r = await fetch(`${muster.console}${route}`, { method, headers: { "content-type": "application/json" }, body: method === "GET" ? undefined : "{}" });
    assert.equal(r.status, 401, `${method} ${route}`);
  }
  const admin = await apiLogin("admin", ADMIN_PASSWORD);
  const noToken = await fetch(`${muster.console}/api/accounts/${zed.id}/wallet`, {
    method: "POST",
    headers: { cookie: admin.cookie, "content-type": "application/json" },
    body: JSON.stringify({ changeset: { coins: 1000 } }),
  });
  assert.equal(noToken.status, 403);
  assert.deepEqual(await wallet(zed), startingWallet, "the refused change changed nothing");
});

test("log in, and watch the status charts gain points while swarm runs", async () => {
  await logIn(page, "admin", ADMIN_PASSWORD);
  await page.waitForSelector("[data-chart=ccu]");
  const points = () => page.$eval("[data-chart=ccu]", (c) => Number(c.dataset.points));
  const before = await points();
  const swarm = spawn(SWARM_BIN, ["run", SCENARIO, "--target", muster.api, "--progress", "never", "--out", mkdtempSync(path.join(tmpdir(), "swarm-report-"))], { stdio: "ignore" });
  const swarmDone = new Promise((resolve) => swarm.once("exit", resolve));
  // The players online line climbs while swarm's players are connected.
  await waitFor("players online on the chart", async () => {
    const legend = await page.$eval("[data-chart=ccu] .legend", (l) => l.textContent);
    const online = Number((legend.match(/users_online value: ([\d,]+)/) || [])[1]?.replace(/,/g, "") || 0);
    return online >= 10;
  }, 30000);
  assert.ok((await points()) > before, "the chart gained points");
  await shot(page, "status");
  assert.equal(await swarmDone, 0, "swarm's run passed");
  // A reload shows the same past: the history is kept on the server.
  const seen = await points();
  await page.reload();
  await page.waitForSelector("[data-chart=ccu]");
  await waitFor("the history after a reload", async () => (await points()) >= seen);
  // The longer ranges draw the same history with fewer points (merged on the server).
  for (const range of ["hour", "week", "minutes"]) {
    await page.select("#range", range);
    await page.waitForFunction((r) => document.querySelector("#range")?.value === r && document.querySelector("[data-chart=ccu]"), {}, range);
  }
  await waitFor("the chart again", async () => (await points()) > 0);
});

test("find a player by display name, change their wallet, see the ledger row and the audit entry", async () => {
  await searchPlayers("zed fi");
  await shownAccounts(["zed"]);
  await page.click("#accounts a");
  await page.waitForSelector("#wallet-form");
  await page.type("#wallet-form input[name=currency]", "coins");
  await page.type("#wallet-form input[name=amount]", "250");
  await page.type("#wallet-form input[name=reason]", "apology for downtime");
  await page.click("#wallet-form button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#balances")?.textContent.includes("250"));
  const ledger = await page.$eval("#ledger-rows tbody", (t) => t.textContent);
  assert.match(ledger, /console/);
  assert.match(ledger, /apology for downtime/);
  await shot(page, "player");
  // The player sees it through the game API.
  assert.deepEqual(await wallet(zed), { ...startingWallet, coins: (startingWallet.coins || 0) + 250 });
  await page.goto(`${muster.console}/#audit`);
  await page.waitForSelector("#audit tbody tr");
  const first = await page.$eval("#audit tbody tr", (r) => r.textContent);
  assert.match(first, /admin/);
  assert.match(first, /wallet_update/);
  assert.ok(first.includes(zed.id));
});

test("edit a storage object, and be refused on a stale version", async () => {
  const put = (value) => fetch(`${muster.api}/v2/storage`, {
    method: "PUT",
    headers: zed.auth,
    body: JSON.stringify({ objects: [{ collection: "saves", key: "slot1", value: JSON.stringify(value) }] }),
  });
  assert.equal((await put({ level: 1 })).status, 200);
  await page.goto(`${muster.console}/#storage`);
  await page.waitForSelector("#storage-collection");
  await page.$eval("#storage-collection", (i) => { i.value = "saves"; });
  await page.click("#storage-results ~ * button, form.toolbar button");
  await page.waitForSelector("#objects a");
  await page.click("#objects a");
  await page.waitForSelector("#storage-value");
  // An edit of the version read is saved.
  await page.$eval("#storage-value", (t) => { t.value = JSON.stringify({ level: 5 }); });
  await page.click("#storage-save");
  await page.waitForFunction(() => document.querySelector("#storage-status")?.textContent === "Saved.");
  await shot(page, "storage");
  // The player writes meanwhile: the editor's version is stale now, and its save is refused.
  assert.equal((await put({ level: 6, from: "player" })).status, 200);
  await page.$eval("#storage-value", (t) => { t.value = JSON.stringify({ level: 99 }); });
  await page.click("#storage-save");
  await page.waitForFunction(() => /changed since you read it/.test(document.querySelector("#storage-status")?.textContent || ""));
  const read = await (await fetch(`${muster.api}/v2/storage`, {
    method: "POST",
    headers: zed.auth,
    body: JSON.stringify({ object_ids: [{ collection: "saves", key: "slot1", user_id: zed.id }] }),
  })).json();
  assert.deepEqual(JSON.parse(read.objects[0].value), { level: 6, from: "player" }, "the stale edit changed nothing");
});

test("end a player's session: their socket closes", async () => {
  // The player's game: a page of the game API's origin holding the realtime socket.
  const game = await browser.newPage();
  await game.goto(`${muster.api}/healthcheck`);
  await game.evaluate((url) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    window.__closed = false;
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error("socket failed"));
    ws.onclose = () => { window.__closed = true; };
  }), `ws://127.0.0.1:${muster.port}/ws?token=${zed.token}`);
  // The console's tab in front again (a background tab's animation frames, which waiting
  // polls on, are paused).
  await page.bringToFront();
  const admin = await apiLogin("admin", ADMIN_PASSWORD);
  await waitFor("the socket on the player's page", async () => {
    const r = await fetch(`${muster.console}/api/accounts/${zed.id}`, { headers: { cookie: admin.cookie } });
    return (await r.json()).sessions.length === 1;
  });
  await page.goto(`${muster.console}/#players/${zed.id}`);
  await page.waitForSelector("#session-list tbody tr");
  await page.click("#end-sessions");
  await waitFor("the player's socket to close", () => game.evaluate(() => window.__closed));
  await game.close();
});

test("call an RPC from the explorer as a player", async () => {
  await page.goto(`${muster.console}/#runtime`);
  await page.waitForSelector("#rpc-call");
  await page.select("#rpc-id", "echo");
  await page.type("#rpc-user", zed.id);
  await page.type("#rpc-payload", '{"hello":"world"}');
  await page.click("#rpc-call");
  await page.waitForFunction(() => document.querySelector("#rpc-answer")?.textContent.length > 0);
  const answer = JSON.parse(await page.$eval("#rpc-answer", (a) => a.textContent));
  assert.deepEqual(answer, { user: zed.id, payload: '{"hello":"world"}' });
  // The module's hooks with their calls: every player made above read their account.
  const hook = await page.$eval("#hooks tbody tr", (tr) => [...tr.children].map((td) => td.textContent));
  assert.equal(hook[0], "after");
  assert.equal(hook[1], "GetAccount");
  assert.match(hook[2], /^ok: [1-9]/);
  await shot(page, "runtime");
});

test("a match's presences and state, and a player kicked from it", async () => {
  // The player's game: a page of the game API's origin, its socket in an arena room.
  const made = await fetch(`${muster.api}/v2/rooms`, { method: "POST", headers: zed.auth, body: JSON.stringify({ handler: "arena", capacity: 4 }) });
  assert.equal(made.status, 201);
  const room = (await made.json()).room_id;
  const { ticket } = await (await fetch(`${muster.api}/v2/rooms/${room}/connection`, { headers: zed.auth })).json();
  const game = await browser.newPage();
  await game.goto(`${muster.api}/healthcheck`);
  await game.evaluate((url, ticket) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    window.__socket = ws;
    ws.onopen = () => ws.send(JSON.stringify({ cid: "1", match_join: { token: ticket } }));
    ws.onmessage = (m) => { if (JSON.parse(m.data).cid === "1") resolve(); };
    ws.onerror = () => reject(new Error("socket failed"));
  }), `ws://127.0.0.1:${muster.port}/ws?token=${zed.token}`, ticket);
  await page.bringToFront();
  await page.goto(`${muster.console}/#matches`);
  const link = `#matches a[href="#matches/${encodeURIComponent(room)}"]`;
  await page.waitForSelector(link);
  await page.click(link);
  await page.waitForSelector("#match-presences tbody tr");
  assert.equal(await page.$eval("#match-presences tbody tr td:nth-child(1)", (td) => td.textContent), zed.id);
  const state = JSON.parse(await page.$eval("#match-state", (pre) => pre.textContent));
  assert.equal(state.players.length, 1, "the arena shows its player");
  await shot(page, "match");
  page.once("dialog", (dialog) => dialog.accept());
  await page.click("#match-presences tbody button");
  await page.waitForFunction(() => document.querySelectorAll("#match-presences tbody tr").length === 0);
  await game.close();
});

test("a player's <script> name is shown as text, never run", async () => {
  await searchPlayers("<script>");
  await shownAccounts([XSS_NAME]);
  await page.click("#accounts a");
  await page.waitForSelector("#profile h3");
  assert.equal(await page.$eval("#profile h3", (h) => h.textContent), XSS_NAME);
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no player text ran as script");
  assert.equal(await page.$$eval("#profile script, #profile img", (n) => n.length), 0);
});

test("every page renders, with no script error on any", async () => {
  for (const [hash, selector] of [["#leaderboards", "#boards"], ["#groups", "#groups-list"], ["#chat", "#chat-channel"], ["#links", "#link-code"], ["#matches", "#matches"], ["#cluster", "#cluster-nodes"],
    ["#config", "#config"], ["#users", "#users"], ["#audit", "#audit"], ["#runtime", "#functions"], ["#parties", "#parties"], ["#world", "#world-nodes"],
    ["#autoscaler", "#autoscaler-none"]]) {
    await page.goto(`${muster.console}/${hash}`);
    await page.waitForSelector(selector);
    if (hash === "#config") {
      const config = await page.$eval("#config", (c) => c.textContent);
      assert.ok(!config.includes(ADMIN_PASSWORD), "the configuration page shows no secret");
      assert.match(config, /"admin_password": "\(redacted\)"/);
    }
  }
  assert.deepEqual(pageErrors, []);
});

test("a read-only user sees the pages and can change nothing", async () => {
  const admin = await apiLogin("admin", ADMIN_PASSWORD);
  const made = await fetch(`${muster.console}/api/users`, {
    method: "POST",
    headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": "application/json" },
    body: JSON.stringify({ username: "viewer", password: "viewer-password", role: "readonly" }),
  });
  assert.equal(made.status, 200);
  const context = await browser.createBrowserContext();
  const viewerPage = await context.newPage();
  await logIn(viewerPage, "viewer", "viewer-password");
  await viewerPage.goto(`${muster.console}/#players/${zed.id}`);
  await viewerPage.waitForSelector("#wallet");
  assert.equal(await viewerPage.$("#wallet-form"), null, "no wallet form for a read-only user");
  assert.equal(await viewerPage.$("#end-sessions"), null);
  // And the API refuses what the page does not offer.
  const viewer = await apiLogin("viewer", "viewer-password");
  for (const [route, body] of [[`/api/accounts/${zed.id}/wallet`, { changeset: { coins: 5 } }], [`/api/accounts/${zed.id}/ban`, {}],
    ["/api/storage/object", { collection: "saves", key: "slot1", owner: zed.id, value: "{}", version: "*" }], ["/api/runtime/echo/call", {}]]) {
    const r = await fetch(`${muster.console}${route}`, {
      method: "POST",
      headers: { cookie: viewer.cookie, "x-csrf-token": viewer.csrf, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(r.status, 403, route);
  }
  assert.deepEqual(await wallet(zed), { ...startingWallet, coins: (startingWallet.coins || 0) + 250 }, "nothing changed");
  await context.close();
});
