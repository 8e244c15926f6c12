// Shared helpers: start a real Muster server per test file, build nakama-js clients against it.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { Client } from "@heroiclabs/nakama-js";

// Node 20 has no global WebSocket; nakama-js's WebSocketAdapterText does `new WebSocket(url)`
// and compares readyState with `WebSocket.OPEN`, both against the global.
globalThis.WebSocket = WebSocket;
// nakama-js is written for browsers: its heartbeat-failure path reads `window.console`, which would
// throw a ReferenceError in Node before `onheartbeattimeout` fires. Give it the browser's global.
globalThis.window ??= globalThis;

export { Client };

const here = path.dirname(fileURLToPath(import.meta.url));
const suiteDir = path.resolve(here, "..");
export const SERVER_BIN = process.env.SERVER_BIN
  ? path.resolve(process.env.SERVER_BIN)
  : path.resolve(suiteDir, "../../target/debug/muster");

export const SERVER_KEY = "defaultkey";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export { sleep };

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitHealthy(base, child, logs, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      const res = await fetch(`${base}/healthcheck`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) {
        const body = await res.json();
        assert.deepEqual(body, {}, "GET /healthcheck must answer {}");
        return true;
      }
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      // not listening yet
    }
    await sleep(50);
  }
  throw new Error(`muster did not become healthy within ${timeoutMs} ms; output:\n${logs.join("")}`);
}

/**
 * The environment for the server, without any inherited MUSTER_* variable: muster reads every
 * MUSTER_* variable as a setting and refuses unknown ones, and a
 * developer's own MUSTER_* settings must not change what these tests check.
 * Each test file states the settings it needs.
 */
function inheritedEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("MUSTER_")));
}

/**
 * Start a Muster server on a free port with a fresh SQLite data dir.
 * `env` adds MUSTER_* settings. Returns { host, port, base, stop() }.
 */
export async function startServer(env = {}) {
  if (!existsSync(SERVER_BIN)) {
    throw new Error(`muster binary not found at ${SERVER_BIN}; run \`cargo build -p muster\` or set SERVER_BIN`);
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dataDir = mkdtempSync(path.join(tmpdir(), "muster-js-"));
    const logs = [];
    const child = spawn(SERVER_BIN, ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--log", "warn"], {
      env: {
        ...inheritedEnv(),
        NO_COLOR: "1",
        // Every test comes from 127.0.0.1: per-IP rate limits would only add noise.
        MUSTER_LIMITS__AUTH_PER_IP_PER_SEC: "0",
        MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC: "0",
        // The native TCP transport on an ephemeral port, so test files can run in parallel.
        MUSTER_ROOMS__TCP_LISTEN: "127.0.0.1:0",
        MUSTER_ENET__LISTEN: "127.0.0.1:0",
        MUSTER_LINKS__LISTEN: "127.0.0.1:0",
        MUSTER_GRPC__LISTEN: "127.0.0.1:0",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const keep = (chunk) => {
      logs.push(chunk.toString());
      if (logs.length > 200) logs.shift();
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    const exited = new Promise((resolve) => child.once("exit", resolve));

    const base = `http://127.0.0.1:${port}`;
    const ok = await waitHealthy(base, child, logs, 15000);
    if (!ok) {
      // Exited early: most likely the port was taken between freePort() and bind. Retry.
      rmSync(dataDir, { recursive: true, force: true });
      if (attempt === 4) throw new Error(`muster exited at start; output:\n${logs.join("")}`);
      continue;
    }
    return {
      host: "127.0.0.1",
      port: String(port),
      base,
      logs,
      pid: child.pid,
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
          await exited;
          clearTimeout(killer);
        }
        rmSync(dataDir, { recursive: true, force: true });
      },
      /** SIGKILL: no shutdown path runs (a node that dies). */
      async kill9() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGKILL");
          await exited;
        }
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
}

/** A nakama-js Client for `server`. Options: serverKey, autoRefreshSession, timeoutMs. */
export function clientFor(server, { serverKey = SERVER_KEY, autoRefreshSession = true, timeoutMs = 5000 } = {}) {
  return new Client(serverKey, server.host, server.port, false, timeoutMs, autoRefreshSession);
}

/** Unique ids so tests in one file never collide. */
export const uniq = (prefix) => `${prefix}-${randomUUID()}`;
export const uniqName = (prefix = "u") => `${prefix}${randomUUID().replace(/-/g, "").slice(0, 16)}`;

/**
 * Await a promise that must reject with an HTTP error from nakama-js's generated API client,
 * which throws the fetch Response itself. Returns { status, body }.
 */
export async function expectHttpError(promise, status) {
  let thrown;
  try {
    const value = await promise;
    assert.fail(`expected HTTP ${status}, but the call succeeded with ${JSON.stringify(value)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    thrown = e;
  }
  assert.ok(
    thrown && typeof thrown.status === "number",
    `expected a fetch Response to be thrown, got ${thrown && thrown.stack ? thrown.stack : JSON.stringify(thrown)}`,
  );
  let body;
  const text = await thrown.text();
  try {
    body = JSON.parse(text);
  } catch {
    assert.fail(`error body is not JSON: ${text}`);
  }
  assert.equal(thrown.status, status, `HTTP status (body ${text})`);
  assert.equal(typeof body.message, "string", `error body has a message: ${text}`);
  assert.equal(typeof body.error, "string", `error body has an error: ${text}`);
  assert.equal(typeof body.code, "number", `error body has a numeric code: ${text}`);
  return { status: thrown.status, body };
}

// gRPC codes Nakama puts in error bodies.
export const GRPC = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16 };

/** The setting that lets players call the built-in value functions (off by default). */
export const PLAYERS_MAY_CALL_BUILTINS = {
  MUSTER_RUNTIME__PLAYER_BUILTIN_FUNCTIONS: "[wallet_spend, inventory_grant, inventory_consume]",
};

/**
 * The starting grant of Nakama's economy load test (1,000,000 coins and items); by default, as on
 * Nakama, a new account's wallet is empty.
 */
export const LOAD_TEST_GRANT = {
  MUSTER_ECONOMY__STARTING_WALLET: "{coins=1000000}",
  MUSTER_ECONOMY__STARTING_ITEMS: '[{id="item", kind="default", count=1000000}]',
};

/** Events a socket received, and a way to wait for the next matching one. */
export class Inbox {
  constructor() {
    this.events = [];
    this.waiters = [];
  }
  push(event) {
    const waiter = this.waiters.find((w) => w.match(event));
    if (waiter) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      clearTimeout(waiter.timer);
      waiter.resolve(event);
    } else {
      this.events.push(event);
    }
  }
  next(match, what, ms = 5000) {
    const at = this.events.findIndex(match);
    if (at >= 0) return Promise.resolve(this.events.splice(at, 1)[0]);
    return new Promise((resolve, reject) => {
      const waiter = { match, resolve };
      waiter.timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out waiting for ${what}`));
      }, ms);
      this.waiters.push(waiter);
    });
  }
}

/** The test's PostgreSQL server (scripts/test starts one), or undefined. */
export const POSTGRES = process.env.TEST_POSTGRES_URL;

/** A fresh database on the test's PostgreSQL server; its URL. */
export function freshDatabase() {
  const name = uniq("js").replace(/-/g, "_").toLowerCase();
  execFileSync("psql", [POSTGRES, "-q", "-c", `CREATE DATABASE ${name}`]);
  const url = new URL(POSTGRES);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The engines a test runs on: SQLite always, PostgreSQL when the test command provides one. */
export const ENGINES = POSTGRES ? ["sqlite", "postgres"] : ["sqlite"];

/** startServer on `engine` (a fresh PostgreSQL database for "postgres"). */
export function startServerOn(engine, env = {}) {
  return startServer(engine === "postgres" ? { MUSTER_DATABASE_URL: freshDatabase(), ...env } : env);
}
