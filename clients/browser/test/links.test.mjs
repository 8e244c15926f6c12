// The links service's index page in a real headless browser: fill the form, get a link, follow
// it to where it points; a refused URL shows why; the link's QR code is an image the browser
// draws.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { freePort } from "./support.mjs";

const SERVER_BIN = process.env.SERVER_BIN;
const CHROMIUM = process.env.CHROMIUM;

/** Muster with the links service on `linksPort`, public link creation on. */
async function startMuster() {
  const port = await freePort();
  const linksPort = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), "muster-browser-"));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("MUSTER_")));
  const logs = [];
  const child = spawn(SERVER_BIN, ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--log", "warn"], {
    env: {
      ...env,
      NO_COLOR: "1",
      MUSTER_ROOMS__TCP_LISTEN: "127.0.0.1:0",
      MUSTER_ENET__LISTEN: "127.0.0.1:0",
      MUSTER_LINKS__LISTEN: `127.0.0.1:${linksPort}`,
      MUSTER_GRPC__LISTEN: "",
      MUSTER_LINKS__PUBLIC_CREATE: "true",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (c) => logs.push(c.toString()));
  child.stderr.on("data", (c) => logs.push(c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${linksPort}/`);
      if (r.ok) break;
    } catch {}
    if (child.exitCode !== null) throw new Error(`muster exited: ${logs.join("")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    links: `http://127.0.0.1:${linksPort}`,
    logs,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A page for links to point at. */
async function startTarget() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>target</title><h1 id="landed">landed on ${req.url.replace(/[<>&"]/g, "")}</h1>`);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { base: `http://127.0.0.1:${server.address().port}`, stop: () => new Promise((r) => server.close(r)) };
}

let muster, target, browser;

before(async () => {
  muster = await startMuster();
  target = await startTarget();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  await browser?.close();
  await target?.stop();
  await muster?.stop();
});

test("the form makes a link, and the link leads to its URL with the query passed on", async () => {
  const page = await browser.newPage();
  await page.goto(`${muster.links}/`);
  assert.equal(await page.title(), "Shorten a link");
  const longUrl = `${target.base}/invite?team=red`;
  await page.type("#url", longUrl);
  await Promise.all([page.waitForNavigation(), page.click("#shorten")]);
  const shortUrl = await page.$eval("#short-url", (a) => a.href);
  assert.match(shortUrl, new RegExp(`^${muster.links}/[0-9A-Za-z]{7}$`));
  assert.equal(await page.$eval("#long-url", (s) => s.textContent), longUrl);
  // The QR code image loaded and was drawn.
  await page.waitForFunction(() => document.querySelector("#qr").complete);
  assert.ok((await page.$eval("#qr", (img) => img.naturalWidth)) > 0, "the QR code is drawn");

  // Follow it, as a player would: click the link on the page.
  await Promise.all([page.waitForNavigation(), page.click("#short-url")]);
  assert.equal(page.url(), longUrl);
  assert.equal(await page.$eval("#landed", (h) => h.textContent), "landed on /invite?team=red");

  // With a query of its own: passed on after the link's.
  await page.goto(`${shortUrl}?ref=browser`);
  assert.equal(page.url(), `${longUrl}&ref=browser`);
  await page.close();
});

test("the same URL made twice in the form gives the same link", async () => {
  const page = await browser.newPage();
  const make = async (url) => {
    await page.goto(`${muster.links}/`);
    await page.type("#url", url);
    await Promise.all([page.waitForNavigation(), page.click("#shorten")]);
    return page.$eval("#short-url", (a) => a.href);
  };
  const first = await make(`${target.base}/same`);
  const second = await make(`${target.base}/same`);
  assert.equal(first, second);
  await page.close();
});

test("a refused URL shows why, and the page runs nothing it was given", async () => {
  const page = await browser.newPage();
  let dialogs = 0;
  page.on("dialog", async (d) => {
    dialogs++;
    await d.dismiss();
  });
  await page.goto(`${muster.links}/`);
  await page.type("#url", "javascript:alert(document.domain)");
  await Promise.all([page.waitForNavigation(), page.click("#shorten")]);
  const error = await page.$eval("#error", (p) => p.textContent);
  assert.match(error, /only http and https/);
  // The refused URL is back in the form, as text.
  assert.equal(await page.$eval("#url", (i) => i.value), "javascript:alert(document.domain)");
  assert.equal(dialogs, 0);
  await page.close();
});

test("a link that does not exist shows a page saying so", async () => {
  const page = await browser.newPage();
  const response = await page.goto(`${muster.links}/nosuchcode`);
  assert.equal(response.status(), 404);
  assert.match(await page.$eval("#error", (p) => p.textContent), /No link has that code/);
  await page.close();
});
