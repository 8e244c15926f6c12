// The GraphQL query page (GET /graphql, docs/gateway.md) in a real headless browser: it loads
// nothing from anywhere but Muster (no CDN: it must work offline), a player's query run from it
// shows the JSON answer, the Schema button lists the query fields, and a bad token shows the 401.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { freePort } from "./support.mjs";

const SERVER_BIN = process.env.SERVER_BIN;
const CHROMIUM = process.env.CHROMIUM;

/** A REST origin: /items/{category} answers three items named after the category. */
async function startOrigin() {
  const server = createServer((req, res) => {
    const category = decodeURIComponent(req.url.split("/").pop());
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ items: [1, 2, 3].map((i) => ({ id: `${category}-${i}`, price: i * 100 })) }));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { base: `http://127.0.0.1:${server.address().port}`, stop: () => new Promise((r) => server.close(r)) };
}

/** Muster with the gateway reading `originBase`; no other listener but the API's. */
async function startMuster(originBase) {
  const port = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), "muster-browser-gql-"));
  const config = path.join(dataDir, "muster.toml");
  writeFileSync(config, `
[gateway]
requests_per_ip_per_sec = 0

[[gateway.origins]]
name = "shop"
base_url = "${originBase}"

[[gateway.types]]
name = "Item"
fields = { id = "ID", price = "Int" }

[[gateway.fields]]
name = "items"
origin = "shop"
path = "/items/{category}"
arguments = ["category"]
returns = "[Item]"
select = "/items"
`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("MUSTER_")));
  const logs = [];
  const child = spawn(
    SERVER_BIN,
    ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--config", config, "--log", "warn"],
    {
      env: {
        ...env,
        NO_COLOR: "1",
        MUSTER_ROOMS__TCP_LISTEN: "",
        MUSTER_ENET__LISTEN: "",
        MUSTER_LINKS__LISTEN: "",
        MUSTER_GRPC__LISTEN: "",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child.stdout.on("data", (c) => logs.push(c.toString()));
  child.stderr.on("data", (c) => logs.push(c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`${base}/healthcheck`);
      if (r.ok) break;
    } catch {}
    if (child.exitCode !== null || i === 300) throw new Error(`muster did not start: ${logs.join("")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base,
    logs,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A player's session token (device authentication with the default server key). */
async function sessionToken(base) {
  const response = await fetch(`${base}/v2/account/authenticate/device?create=true`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from("defaultkey:").toString("base64")}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ id: `browser-gql-${Date.now()}-${Math.random().toString(36).slice(2)}` }),
  });
  assert.equal(response.status, 200, await response.clone().text());
  return (await response.json()).token;
}

/**
 * A page that may reach Muster only: any request elsewhere is refused and recorded, as is any
 * script error or refusal by the page's Content-Security-Policy.
 */
async function isolatedPage() {
  const page = await browser.newPage();
  const elsewhere = [];
  const problems = [];
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    if (new URL(request.url()).origin === muster.base) {
      request.continue();
    } else {
      elsewhere.push(request.url());
      request.abort();
    }
  });
  page.on("pageerror", (error) => problems.push(String(error)));
  page.on("console", (message) => {
    const where = message.location()?.url ?? "";
    // The browser asks for /favicon.ico on its own; the 404 is not the page's doing.
    if (message.type() === "error" && !where.endsWith("/favicon.ico")) problems.push(`${message.text()} (${where})`);
  });
  return { page, elsewhere, problems };
}

/** Sets a textarea or input's value as typing would. */
async function fill(page, selector, value) {
  await page.$eval(selector, (element, value) => {
    element.value = value;
  }, value);
}

async function runAndRead(page, button) {
  await page.click(button);
  await page.waitForFunction(() => /^(HTTP \d+|failed|variables)/.test(document.querySelector("#status").textContent));
  return {
    status: await page.$eval("#status", (s) => s.textContent),
    result: await page.$eval("#result", (r) => r.textContent),
  };
}

let origin, muster, browser;

before(async () => {
  origin = await startOrigin();
  muster = await startMuster(origin.base);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  await browser?.close();
  await muster?.stop();
  await origin?.stop();
});

test("the page loads nothing from elsewhere, and a player's query shows its answer", async () => {
  const { page, elsewhere, problems } = await isolatedPage();
  const loaded = [];
  page.on("requestfinished", (request) => loaded.push(request.url()));
  const response = await page.goto(`${muster.base}/graphql`, { waitUntil: "networkidle0" });
  assert.deepEqual(elsewhere, [], "nothing is asked of anywhere but Muster");
  // Nor does it mean to: every reference in it is Muster's (the page's Content-Security-Policy
  // would refuse any other before it is asked, and say so in the console).
  const references = await page.$$eval("[src], [href]", (elements) => elements.map((e) => e.src || e.href));
  assert.deepEqual(references.filter((url) => new URL(url).origin !== muster.base), []);
  assert.deepEqual(problems, [], "no script error, nothing refused");
  assert.deepEqual(
    loaded.filter((url) => !url.endsWith("/favicon.ico")),
    [`${muster.base}/graphql`],
    "the page itself, and nothing else",
  );
  assert.equal(response.status(), 200);
  assert.equal(await page.title(), "Muster GraphQL");

  const token = await sessionToken(muster.base);
  await fill(page, "#token", token);
  await fill(page, "#query", `{ items(category: "bows") { id price } me { username } }`);
  const { status, result } = await runAndRead(page, "#run");
  assert.match(status, /^HTTP 200 in \d+ ms$/);
  const answer = JSON.parse(result);
  assert.equal(answer.errors, undefined, result);
  assert.deepEqual(answer.data.items[0], { id: "bows-1", price: 100 });
  assert.equal(typeof answer.data.me.username, "string");
  assert.equal(answer.extensions.cacheStatus.items, "miss");

  assert.deepEqual(elsewhere, []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("the Schema button lists the query fields", async () => {
  const { page, elsewhere, problems } = await isolatedPage();
  await page.goto(`${muster.base}/graphql`);
  await fill(page, "#token", await sessionToken(muster.base));
  const { status, result } = await runAndRead(page, "#schema");
  assert.match(status, /^HTTP 200/);
  assert.match(result, /^type Query \{/);
  assert.match(result, /items\(category: String!\): \[Item\]/);
  assert.match(result, /me: Player/);
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a bad token shows the refusal; bad variables are named before anything is sent", async () => {
  const { page, elsewhere, problems } = await isolatedPage();
  await page.goto(`${muster.base}/graphql`);
  await fill(page, "#token", "not-a-token");
  const refused = await runAndRead(page, "#run");
  assert.match(refused.status, /^HTTP 401/);
  assert.match(refused.result, /"code": 16/);

  await fill(page, "#variables", "{ not json");
  const bad = await runAndRead(page, "#run");
  assert.equal(bad.status, "variables are not JSON");
  assert.deepEqual(elsewhere, []);
  // The browser reports the 401 itself, as a failed resource; nothing else went wrong.
  assert.deepEqual(problems.filter((p) => !/401/.test(p)), []);
  await page.close();
});
