// Drives process rooms (bench/fleet.sh): room creates at a fixed rate, each followed by two
// players who fetch their tickets, connect to the game server over TCP, redeem them and exchange
// GAME_LINES lines (a recorded game's worth, each answered by the other player), then leave — the
// server then shuts down and its room ends.
//
// Usage: node drive.mjs BASE_URL MODE RATE DURATION_S
//   MODE "play":   creates at RATE/s for DURATION_S, two players each (seed 002's flow);
//   MODE "create": creates only (a burst), each room destroyed at once after its create.
// Prints JSON: creates, failures by reason, create latency p50/p99/max (ms, queued waits
// included), and for "play" the games finished and their line round trip p50/p99.
import net from "node:net";

const [base, mode, rateText, durationText] = process.argv.slice(2);
const rate = Number(rateText);
const duration = Number(durationText);
const GAME_LINES = Number(process.env.GAME_LINES ?? 20);
const GAME_LINE_GAP_MS = Number(process.env.GAME_LINE_GAP_MS ?? 100);
const ADMIN = process.env.ADMIN_KEY ?? "fleet-admin";
const admin = "Basic " + Buffer.from(`${ADMIN}:`).toString("base64");

async function json(method, path, auth, body) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: auth, "content-type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function playerToken(i) {
  const r = await fetch(`${base}/v2/account/authenticate/device?create=true`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Basic " + Buffer.from("defaultkey:").toString("base64") },
    body: JSON.stringify({ id: `fleet-bench-player-${i}` }),
  });
  return "Bearer " + (await r.json()).token;
}

/** A TCP line connection to the game server; `lines` yields each line received. */
function connect(host, port) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host, port }, () => resolve(conn));
    socket.setNoDelay(true);
    let buffer = "";
    const waiting = [];
    const queued = [];
    const conn = {
      send: (line) => socket.write(line + "\n"),
      next: (ms = 10000) =>
        queued.length
          ? Promise.resolve(queued.shift())
          : new Promise((res, rej) => {
              const timer = setTimeout(() => rej(new Error("no line")), ms);
              waiting.push((line) => {
                clearTimeout(timer);
                res(line);
              });
            }),
      close: () => socket.end(),
    };
    socket.on("data", (data) => {
      buffer += data.toString();
      let at;
      while ((at = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        const w = waiting.shift();
        if (w) w(line);
        else queued.push(line);
      }
    });
    socket.on("error", reject);
  });
}

const createMs = [];
const roundTripMs = [];
const failures = {};
let creates = 0;
let games = 0;
const fail = (why) => (failures[why] = (failures[why] ?? 0) + 1);

async function play(room, tokens) {
  const infos = [];
  for (const token of tokens) {
    const r = await json("GET", `/v2/rooms/${room}/connection`, token);
    if (r.status !== 200) return fail(`connection ${r.status}`);
    infos.push(r.body);
  }
  const conns = [];
  for (const info of infos) {
    const c = await connect("127.0.0.1", info.port);
    c.send(`TICKET ${info.ticket}`);
    const welcome = await c.next();
    if (!welcome.startsWith("WELCOME")) return fail("ticket refused");
    conns.push(c);
  }
  const [a, b] = conns;
  for (let i = 0; i < GAME_LINES; i++) {
    const sent = performance.now();
    a.send(`move ${i}`);
    await b.next();
    b.send(`ack ${i}`);
    await a.next();
    roundTripMs.push(performance.now() - sent);
    await new Promise((r) => setTimeout(r, GAME_LINE_GAP_MS));
  }
  a.close();
  b.close();
  games++;
}

async function one(i, tokens) {
  try {
    await oneRoom(i, tokens);
  } catch (error) {
    fail(`http: ${error.cause?.code ?? error.message}`);
  }
}

async function oneRoom(i, tokens) {
  const started = performance.now();
  const r = await json("POST", "/v2/rooms", admin, { handler: "relay", capacity: 2 });
  createMs.push(performance.now() - started);
  creates++;
  if (r.status !== 201) {
    const message = r.body?.message ?? "";
    return fail(/No free port|was free within|busy/.test(message) ? "no server" : `create ${r.status}`);
  }
  if (mode === "create") {
    await json("DELETE", `/v2/rooms/${r.body.room_id}`, admin);
    return;
  }
  try {
    await play(r.body.room_id, [tokens[(2 * i) % tokens.length], tokens[(2 * i + 1) % tokens.length]]);
  } catch (error) {
    fail(`play: ${error.message}`);
  }
}

// One request first: the HTTP connection pool is warm before the first measured create.
await fetch(`${base}/healthcheck`);
const tokens = [];
if (mode === "play") {
  for (let i = 0; i < 64; i++) tokens.push(await playerToken(i));
}
const total = Math.round(rate * duration);
const began = performance.now();
const all = [];
for (let i = 0; i < total; i++) {
  const due = began + (i * 1000) / rate;
  const wait = due - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  all.push(one(i, tokens));
}
await Promise.all(all);
const pct = (list, q) => {
  const s = [...list].sort((x, y) => x - y);
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))] * 100) / 100 : null;
};
console.log(
  JSON.stringify({
    mode,
    rate,
    durationS: duration,
    creates,
    failures,
    createMs: { p50: pct(createMs, 0.5), p99: pct(createMs, 0.99), max: pct(createMs, 1) },
    games,
    roundTripMs: mode === "play" ? { p50: pct(roundTripMs, 0.5), p99: pct(roundTripMs, 0.99) } : undefined,
    elapsedS: Math.round((performance.now() - began) / 100) / 10,
  }),
);
process.exit(0);
