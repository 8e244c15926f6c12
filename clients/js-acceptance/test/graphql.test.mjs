// The GraphQL gateway with graphql-request (a GraphQL client nobody here wrote): a player's query
// joining a REST origin's data and the player's own account, the cache status it reports, and
// GraphQL's and HTTP's refusals as that client surfaces them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { GraphQLClient, ClientError, gql } from "graphql-request";
import { startServer, clientFor, uniq, uniqName } from "./helpers.mjs";

let server, origin, originUrl, configDir;
const originCalls = new Map();

before(async () => {
  // A REST origin: /items/{category} answers three items after 20 ms, and counts its calls.
  origin = createServer((req, res) => {
    originCalls.set(req.url, (originCalls.get(req.url) ?? 0) + 1);
    const category = decodeURIComponent(req.url.split("/").pop());
    setTimeout(() => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ items: [1, 2, 3].map((i) => ({ id: `${category}-${i}`, price: i * 100 })) }));
    }, 20);
  });
  await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
  originUrl = `http://127.0.0.1:${origin.address().port}`;
  configDir = mkdtempSync(path.join(tmpdir(), "muster-gql-"));
  const config = path.join(configDir, "muster.toml");
  writeFileSync(config, `
[gateway]
requests_per_ip_per_sec = 0

[[gateway.origins]]
name = "shop"
base_url = "${originUrl}"

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
  server = await startServer({ MUSTER_CONFIG: config });
});

after(async () => {
  await server?.stop();
  origin?.close();
  if (configDir) rmSync(configDir, { recursive: true, force: true });
});

async function playerClient() {
  const session = await clientFor(server).authenticateDevice(uniq("gql-device"), true, uniqName("gql"));
  const client = new GraphQLClient(`${server.base}/graphql`, { headers: { authorization: `Bearer ${session.token}` } });
  return { client, session };
}

test("a query joins origin data and the player's own account, and says where it came from", async () => {
  const { client, session } = await playerClient();
  const query = gql`
    query Shop($category: String!) {
      items(category: $category) { id price }
      me { username wallet { currency amount } }
    }
  `;
  const first = await client.rawRequest(query, { category: "bows" });
  assert.deepEqual(first.data.items[0], { id: "bows-1", price: 100 });
  assert.equal(first.data.me.username, session.username);
  assert.ok(Array.isArray(first.data.me.wallet));
  assert.equal(first.extensions.cacheStatus.items, "miss");
  const second = await client.rawRequest(query, { category: "bows" });
  assert.equal(second.extensions.cacheStatus.items, "hit");
  assert.equal(originCalls.get("/items/bows"), 1);
});

test("GraphQL refusals and missing credentials reach the client as errors", async () => {
  const { client } = await playerClient();
  await assert.rejects(client.request(gql`{ items(category: "x") { colour } }`), (error) => {
    assert.ok(error instanceof ClientError);
    assert.match(error.response.errors[0].message, /colour/);
    return true;
  });
  const anonymous = new GraphQLClient(`${server.base}/graphql`);
  await assert.rejects(anonymous.request(gql`{ items(category: "x") { id } }`), (error) => {
    assert.ok(error instanceof ClientError);
    assert.equal(error.response.status, 401);
    return true;
  });
  assert.equal(originCalls.get("/items/x"), undefined, "refused queries reach no origin");
});
