// The console against a two-node cluster (PostgreSQL and NATS, as the test command starts them):
// logged in on one node's console, the status page shows both nodes' series, the cluster page
// lists the other node, and the other node's console takes the same login.
// Needs TEST_POSTGRES_URL and TEST_NATS_URL; skipped without them unless TEST_REQUIRE_POSTGRES or
// TEST_REQUIRE_NATS is 1 (as the test command sets).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { freePort, waitFor } from "./support.mjs";

const { SERVER_BIN, CHROMIUM, TEST_POSTGRES_URL, TEST_NATS_URL, SCREENSHOT_DIR } = process.env;
const required = process.env.TEST_REQUIRE_POSTGRES === "1" || process.env.TEST_REQUIRE_NATS === "1";
const missing = !TEST_POSTGRES_URL || !TEST_NATS_URL;
if (missing && required) throw new Error("TEST_REQUIRE_POSTGRES/NATS=1 but TEST_POSTGRES_URL or TEST_NATS_URL is not set");
const skip = missing ? "TEST_POSTGRES_URL and TEST_NATS_URL are not set" : false;
const PASSWORD = "cluster-console-pw";

const database = `console_cluster_${process.pid}_${Date.now()}`;
const prefix = `c${process.pid}${Date.now()}`;
let nodes = [];
let browser;

async function startNode(name) {
  const port = await freePort();
  const consolePort = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), `muster-cluster-${name}-`));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("MUSTER_")));
  const url = new URL(TEST_POSTGRES_URL);
  url.pathname = `/${database}`;
  const logs = [];
  const child = spawn(SERVER_BIN, ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--log", "warn"], {
    env: {
      ...env,
      NO_COLOR: "1",
      MUSTER_DATABASE_URL: url.toString(),
      MUSTER_ROOMS__TCP_LISTEN: "",
      MUSTER_ENET__LISTEN: "",
      MUSTER_LINKS__LISTEN: "",
      MUSTER_GRPC__LISTEN: "",
      MUSTER_CLUSTER__NATS_URL: TEST_NATS_URL,
      MUSTER_CLUSTER__SUBJECT_PREFIX: prefix,
      MUSTER_CLUSTER__NODE_NAME: name,
      MUSTER_CLUSTER__HEARTBEAT_MS: "100",
      MUSTER_CLUSTER__FAILURE_TIMEOUT_MS: "1000",
      MUSTER_CONSOLE__LISTEN: `127.0.0.1:${consolePort}`,
      MUSTER_CONSOLE__ADMIN_PASSWORD: PASSWORD,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (c) => logs.push(c.toString()));
  child.stderr.on("data", (c) => logs.push(c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await waitFor(`node ${name}'s console`, async () => {
    if (child.exitCode !== null) throw new Error(`node ${name} exited: ${logs.join("")}`);
    try {
      return (await fetch(`http://127.0.0.1:${consolePort}/`)).ok;
    } catch {
      return false;
    }
  });
  return {
    name,
    console: `http://127.0.0.1:${consolePort}`,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

before(async () => {
  if (skip) return;
  execFileSync("psql", [TEST_POSTGRES_URL, "-q", "-c", `CREATE DATABASE ${database}`]);
  // One at a time: the first applies the migrations.
  nodes.push(await startNode("a"));
  nodes.push(await startNode("b"));
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
});

after(async () => {
  if (browser) await browser.close();
  for (const node of nodes) await node.stop();
  if (!skip) execFileSync("psql", [TEST_POSTGRES_URL, "-q", "-c", `DROP DATABASE IF EXISTS ${database}`]);
});

test("one node's console shows both nodes, and the other takes the same login", { skip }, async () => {
  const [a, b] = nodes;
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${a.console}/`);
  await page.waitForSelector("#login:not([hidden])");
  await page.type("#login input[name=username]", "admin");
  await page.type("#login input[name=password]", PASSWORD);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("[data-chart=memory]");
  // Both nodes answer on the status page, each with its own memory line.
  await waitFor("both nodes on the status page", async () => {
    await page.reload();
    await page.waitForSelector("[data-chart=memory]");
    const nodesText = await page.$eval("#nodes", (n) => n.textContent);
    const legend = await page.$eval("[data-chart=memory] .legend", (l) => l.textContent);
    return /nodes: a, b/.test(nodesText) && legend.includes("(a)") && legend.includes("(b)");
  });
  if (SCREENSHOT_DIR) await page.screenshot({ path: path.join(SCREENSHOT_DIR, "console-cluster-status.png") });
  await page.goto(`${a.console}/#cluster`);
  await page.waitForSelector("#cluster-nodes");
  const listed = await page.$$eval("#cluster-nodes tbody tr td:first-child", (cells) => cells.map((c) => c.textContent));
  assert.deepEqual(listed, ["a (this node)", "b"]);
  // Each node's health: both answer for their status data, with their memory.
  const health = await page.$$eval("#cluster-nodes tbody tr", (rows) => rows.map((r) => [r.children[2].textContent, r.children[6].textContent]));
  for (const [answering, memory] of health) {
    assert.equal(answering, "answering");
    assert.ok(Number(memory.replace(/,/g, "")) > 0, `memory ${memory}`);
  }
  // The other node's console: the same browser, already logged in (sessions are in the shared
  // database).
  await page.goto(`${b.console}/#cluster`);
  await page.waitForSelector("#cluster-nodes");
  const fromB = await page.$$eval("#cluster-nodes tbody tr td:first-child", (cells) => cells.map((c) => c.textContent));
  assert.deepEqual(fromB, ["b (this node)", "a"]);
  await page.close();
});
