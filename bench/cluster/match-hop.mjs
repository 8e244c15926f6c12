// Echo round trips between two players of one relayed match (bench/cluster-match-hop.sh).
// Usage: node match-hop.mjs HOST_URL GUEST_URL ROUNDS — the match is made on HOST_URL's node;
// the guest joins through GUEST_URL (the same node, or another of the cluster). The host sends
// match data, the guest answers each at once; prints {p50Us, p99Us, maxUs, rounds} as JSON.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../clients/js-acceptance/package.json"));
const WebSocket = require("ws");

const [hostUrl, guestUrl, roundsText] = process.argv.slice(2);
const rounds = Number(roundsText ?? 2000);

async function session(base, device) {
  const response = await fetch(`${base}/v2/account/authenticate/device?create=true`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: "Basic " + Buffer.from("defaultkey:").toString("base64"),
    },
    body: JSON.stringify({ id: device }),
  });
  if (!response.ok) throw new Error(`authenticate: ${response.status} ${await response.text()}`);
  return (await response.json()).token;
}

/** A socket whose messages are handed to `onMessage`; `request` waits for the answer to a cid. */
async function connect(base, device) {
  const token = await session(base, device);
  const ws = new WebSocket(`${base.replace("http", "ws")}/ws?token=${token}&format=json`);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const waiting = new Map();
  let cid = 0;
  const socket = {
    onMessage: () => {},
    request(body) {
      const id = String(++cid);
      ws.send(JSON.stringify({ cid: id, ...body }));
      return new Promise((resolve) => waiting.set(id, resolve));
    },
    send: (body) => ws.send(JSON.stringify(body)),
    close: () => ws.close(),
  };
  ws.on("message", (raw) => {
    const message = JSON.parse(raw.toString());
    if (message.cid && waiting.has(message.cid)) {
      waiting.get(message.cid)(message);
      waiting.delete(message.cid);
    } else {
      socket.onMessage(message);
    }
  });
  return socket;
}

const unique = `${process.pid}-${Date.now()}`;
const host = await connect(hostUrl, `hop-host-${unique}`);
const guest = await connect(guestUrl, `hop-guest-${unique}`);
const created = await host.request({ match_create: {} });
const matchId = created.match?.match_id;
if (!matchId) throw new Error(`match_create: ${JSON.stringify(created)}`);
const joined = await guest.request({ match_join: { match_id: matchId } });
if (!joined.match) throw new Error(`match_join: ${JSON.stringify(joined)}`);

// The guest answers every host message at once.
guest.onMessage = (m) => {
  if (m.match_data && String(m.match_data.op_code) === "1") {
    guest.send({ match_data_send: { match_id: matchId, op_code: 2, data: m.match_data.data } });
  }
};
const samples = [];
let resolveEcho;
host.onMessage = (m) => {
  if (m.match_data && String(m.match_data.op_code) === "2") resolveEcho?.();
};
const data = Buffer.from("x".repeat(32)).toString("base64");
const warmup = Math.min(200, rounds);
for (let i = 0; i < rounds + warmup; i++) {
  const echoed = new Promise((resolve) => (resolveEcho = resolve));
  const started = process.hrtime.bigint();
  host.send({ match_data_send: { match_id: matchId, op_code: 1, data } });
  await Promise.race([echoed, new Promise((_, reject) => setTimeout(() => reject(new Error("no echo within 5 s")), 5000))]);
  if (i >= warmup) samples.push(Number(process.hrtime.bigint() - started) / 1000);
}
samples.sort((a, b) => a - b);
const at = (q) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
console.log(JSON.stringify({ rounds: samples.length, p50Us: Math.round(at(0.5)), p99Us: Math.round(at(0.99)), maxUs: Math.round(samples[samples.length - 1]) }));
host.close();
guest.close();
process.exit(0);
