// Repeated kill -9 of cluster nodes (bench/cluster-kills.sh). NODES Muster nodes over one NATS;
// PLAYERS players per node are in one chat room, and each node runs one room (an authoritative
// match). Then KILLS times: kill -9 one node (in turn), time until every player left on the
// other nodes has been told that each of the dead node's players left (presence convergence),
// restart the node under its name, reconnect its players, and check that no node shows a ghost
// (a presence of a player no longer connected, or a missing one) and that no room is listed by
// two nodes or by a node its id does not name. Prints JSON.
//
// Env: SERVER_BIN, NATS_URL, WORK (a directory), NODES=3, PLAYERS=10, KILLS=100.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import net from "node:net";
import path from "node:path";
import { mkdirSync, openSync } from "node:fs";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../clients/js-acceptance/package.json"));
const WebSocket = require("ws");

const BIN = process.env.SERVER_BIN;
const NATS = process.env.NATS_URL;
const WORK = process.env.WORK;
const NODES = Number(process.env.NODES ?? 3);
const PLAYERS = Number(process.env.PLAYERS ?? 10);
const KILLS = Number(process.env.KILLS ?? 100);
const FAILURE_TIMEOUT_MS = Number(process.env.FAILURE_TIMEOUT_MS ?? 2500);
const HEARTBEAT_MS = Number(process.env.HEARTBEAT_MS ?? 500);
const PREFIX = `kills${process.pid}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function until(what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out: ${what}`);
}

/** Node `name`: started (again) on its port with its own data directory. */
async function startNode(node) {
  mkdirSync(node.dir, { recursive: true });
  node.child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${node.port}`, "--data-dir", node.dir, "--log", "warn"], {
    env: {
      ...process.env,
      MUSTER_CLUSTER__NATS_URL: NATS,
      MUSTER_CLUSTER__SUBJECT_PREFIX: PREFIX,
      MUSTER_CLUSTER__NODE_NAME: node.name,
      MUSTER_CLUSTER__HEARTBEAT_MS: String(HEARTBEAT_MS),
      MUSTER_CLUSTER__FAILURE_TIMEOUT_MS: String(FAILURE_TIMEOUT_MS),
      MUSTER_LIMITS__AUTH_PER_IP_PER_SEC: "0",
      MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC: "0",
      MUSTER_ROOMS__TCP_LISTEN: "127.0.0.1:0",
      MUSTER_ENET__LISTEN: "127.0.0.1:0",
      MUSTER_LINKS__LISTEN: "",
      MUSTER_GRPC__LISTEN: "",
    },
    stdio: ["ignore", openSync(path.join(node.dir, "muster.log"), "a"), openSync(path.join(node.dir, "muster.log"), "a")],
  });
  await until(`${node.name} answers`, async () => {
    try {
      return (await fetch(`${node.base}/healthcheck`)).ok;
    } catch {
      return false;
    }
  });
}

async function liveNodes(node) {
  const text = await (await fetch(`${node.base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("muster_cluster_nodes "));
  return line ? Number(line.split(" ")[1]) : 0;
}

async function session(node, device) {
  const response = await fetch(`${node.base}/v2/account/authenticate/device?create=true`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Basic " + Buffer.from("defaultkey:").toString("base64") },
    body: JSON.stringify({ id: device }),
  });
  if (!response.ok) throw new Error(`authenticate on ${node.name}: ${response.status}`);
  return (await response.json()).token;
}

/** A player connected to `node`, in the room; tracks who it has been told is in the room. */
async function player(node, index) {
  const token = await session(node, `kills-${PREFIX}-${node.name}-${index}`);
  const ws = new WebSocket(`${node.base.replace("http", "ws")}/ws?token=${token}&format=json`);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const p = { node, token, ws, userId: null, present: new Set(), closed: false };
  ws.on("close", () => (p.closed = true));
  ws.on("error", () => {});
  const joined = new Promise((resolve) => {
    ws.on("message", (raw) => {
      const m = JSON.parse(raw.toString());
      if (m.channel) {
        p.userId = m.channel.self.user_id;
        // Itself too: the answer lists the others.
        p.present.add(p.userId);
        for (const q of m.channel.presences ?? []) p.present.add(q.user_id);
        resolve();
      } else if (m.channel_presence_event) {
        for (const q of m.channel_presence_event.joins ?? []) p.present.add(q.user_id);
        for (const q of m.channel_presence_event.leaves ?? []) p.present.delete(q.user_id);
      }
    });
  });
  ws.send(JSON.stringify({ cid: "1", channel_join: { target: "soak", type: 1 } }));
  await joined;
  return p;
}

/** What a fresh join on `node` lists as in the room (the join answer), itself excluded. */
async function roomAsSeenFrom(node) {
  const p = await player(node, `probe-${Date.now()}-${Math.random()}`);
  const seen = new Set(p.present);
  seen.delete(p.userId);
  p.ws.close();
  return seen;
}

async function rooms(node, token) {
  const r = await fetch(`${node.base}/v2/rooms?limit=1000`, { headers: { authorization: `Bearer ${token}` } });
  return (await r.json()).rooms.map((room) => room.room_id);
}

async function createRoom(node, token) {
  const r = await fetch(`${node.base}/v2/rooms`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ handler: "arena", capacity: 2 }),
  });
  if (!r.ok) throw new Error(`room on ${node.name}: ${r.status}`);
}

const nodes = [];
// Whatever happens, the nodes started here end with this process.
process.on("exit", () => {
  for (const n of nodes) n.child?.kill("SIGKILL");
});
for (let i = 0; i < NODES; i++) {
  const port = await freePort();
  nodes.push({ name: `k${i}`, port, base: `http://127.0.0.1:${port}`, dir: path.join(WORK, `k${i}`) });
}
for (const n of nodes) await startNode(n);
for (const n of nodes) await until("all nodes see each other", async () => (await liveNodes(n)) === NODES);
const players = new Map(); // node name → its players
for (const n of nodes) {
  const list = [];
  for (let i = 0; i < PLAYERS; i++) list.push(await player(n, i));
  players.set(n.name, list);
  await createRoom(n, list[0].token);
}
const everyone = () => [...players.values()].flat();
await until("every player sees everyone", async () =>
  everyone().every((p) => p.present.size === NODES * PLAYERS),
);

const convergence = [];
let ghosts = 0;
let doublyOwned = 0;
let misplaced = 0;
const started = Date.now();
for (let k = 0; k < KILLS; k++) {
  const victim = nodes[k % NODES];
  const gone = players.get(victim.name).map((p) => p.userId);
  const survivors = everyone().filter((p) => p.node !== victim);
  victim.child.kill("SIGKILL");
  const killedAt = Date.now();
  await until(`the others forget ${victim.name}'s players`, async () =>
    survivors.every((p) => gone.every((id) => !p.present.has(id))),
  );
  convergence.push(Date.now() - killedAt);
  await new Promise((r) => (victim.child.exitCode !== null || victim.child.signalCode ? r() : victim.child.once("exit", r)));
  // Back under its name; its players reconnect to it and rejoin; a room there again.
  await startNode(victim);
  for (const n of nodes) await until("all nodes again", async () => (await liveNodes(n)) === NODES);
  const back = [];
  for (let i = 0; i < PLAYERS; i++) back.push(await player(victim, i));
  players.set(victim.name, back);
  await createRoom(victim, back[0].token);
  // Everyone is told of everyone again; a fresh join on each node lists exactly the players.
  await until("every player sees everyone again", async () =>
    everyone().every((p) => p.present.size === NODES * PLAYERS),
  );
  const expected = new Set(everyone().map((p) => p.userId));
  for (const n of nodes) {
    const seen = await roomAsSeenFrom(n);
    for (const id of seen) if (!expected.has(id)) ghosts++;
    for (const id of expected) if (!seen.has(id)) ghosts++;
  }
  // Rooms: each listed by one node only, the node its id names.
  const owners = new Map();
  for (const n of nodes) {
    for (const id of await rooms(n, players.get(n.name)[0].token)) {
      if (owners.has(id)) doublyOwned++;
      owners.set(id, n.name);
      if (!id.endsWith(`.${n.name}`)) misplaced++;
    }
  }
  process.stderr.write(`kill ${k + 1}/${KILLS}: ${victim.name}, converged in ${convergence.at(-1)} ms\n`);
}
for (const n of nodes) n.child.kill("SIGTERM");
convergence.sort((a, b) => a - b);
const at = (q) => convergence[Math.min(convergence.length - 1, Math.floor(q * convergence.length))];
console.log(
  JSON.stringify({
    bench: "cluster-kills",
    nodes: NODES,
    playersPerNode: PLAYERS,
    kills: KILLS,
    heartbeatMs: HEARTBEAT_MS,
    failureTimeoutMs: FAILURE_TIMEOUT_MS,
    convergenceMs: { p50: at(0.5), p99: at(0.99), max: convergence.at(-1), min: convergence[0] },
    convergedWithin3s: convergence.filter((ms) => ms <= 3000).length,
    ghostPresences: ghosts,
    doublyOwnedRooms: doublyOwned,
    roomsOnAnotherNodeThanTheirId: misplaced,
    elapsedS: Math.round((Date.now() - started) / 1000),
  }),
);
process.exit(0);
