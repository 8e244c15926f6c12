// Sign-in, link and unlink with Apple, Google, Facebook, Facebook Instant Games, Steam and Game
// Center, and friends imported from Facebook and Steam, through nakama-js against a stand-in
// for the providers (providers.mjs) that signs real tokens with its own keys.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Session } from "@heroiclabs/nakama-js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, clientFor, uniq, expectHttpError, GRPC } from "./helpers.mjs";
import { ProviderStandIn, FACEBOOK_APP_ID } from "./providers.mjs";

const FAILED_PRECONDITION = 9;
const DATA_LOSS = 15;

let providers;
let server;
let client;
before(async () => {
  providers = await new ProviderStandIn().start();
  server = await startServer(providers.env());
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
  await providers?.stop();
});

/** A Graph API user with a fresh access token. */
function facebookUser(friends = []) {
  const token = uniq("fbtoken");
  const id = String(Math.floor(Math.random() * 1e15));
  providers.graphUsers.set(token, { id, name: `FB ${id}`, email: `${id}@facebook.example.com`, picture: { data: { url: `https://example.com/${id}.jpg` } } });
  providers.graphFriends.set(token, friends);
  return { token, id };
}

/** A Steam player with a fresh session ticket. */
function steamUser(friends = []) {
  const ticket = Buffer.from(uniq("ticket")).toString("hex");
  const id = String(76561197960265728n + BigInt(Math.floor(Math.random() * 1e9)));
  providers.steamTickets.set(ticket, id);
  providers.steamFriends.set(id, friends);
  return { ticket, id };
}

test("Apple: a valid identity token creates the account, then finds it; the Apple id and email are on it", async () => {
  const sub = uniq("apple");
  const first = await client.authenticateApple(providers.appleToken(sub), true);
  assert.equal(first.created, true);
  const again = await client.authenticateApple(providers.appleToken(sub), true);
  assert.equal(again.created, false);
  assert.equal(again.user_id, first.user_id);
  const account = await client.getAccount(again);
  assert.equal(account.user.apple_id, sub);
  assert.equal(account.email, `${sub}@privaterelay.example.com`);
});

test("Apple: a forged signature, the wrong audience and an expired token are refused with Nakama's error and create nothing", async () => {
  const sub = uniq("apple");
  const refusals = [
    providers.appleToken(sub, { forged: true }),
    providers.appleToken(sub, { aud: "com.someone.else" }),
    providers.appleToken(sub, { expiresIn: -120 }),
    "not.a.jwt",
  ];
  for (const token of refusals) {
    const { body } = await expectHttpError(client.authenticateApple(token, true), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED);
    assert.equal(body.message, "Could not authenticate Apple profile.");
  }
  // Nothing was created for that player: without `create`, the valid token finds no account.
  const { body } = await expectHttpError(client.authenticateApple(providers.appleToken(sub), false), 404);
  assert.equal(body.code, GRPC.NOT_FOUND);
});

test("Google: a valid ID token creates the account with the profile Google gives", async () => {
  const sub = uniq("google");
  const session = await client.authenticateGoogle(providers.googleToken(sub), true);
  assert.equal(session.created, true);
  const account = await client.getAccount(session);
  assert.equal(account.user.google_id, sub);
  assert.equal(account.user.display_name, `G ${sub}`);
  assert.equal(account.user.avatar_url, `https://example.com/${sub}.png`);
  const wrongClient = providers.googleToken(sub, { aud: "another-client" });
  const { body } = await expectHttpError(client.authenticateGoogle(wrongClient, true), 401);
  assert.equal(body.message, "Could not authenticate Google profile.");
});

test("Facebook: an access token signs in through the Graph API; a Limited Login token too", async () => {
  const user = facebookUser();
  const session = await client.authenticateFacebook(user.token, true);
  assert.equal(session.created, true);
  const account = await client.getAccount(session);
  assert.equal(account.user.facebook_id, user.id);
  assert.equal(account.user.display_name, `FB ${user.id}`);
  // Other players find them by their Facebook id.
  const other = await client.authenticateDevice(uniq("device"), true);
  const users = await client.getUsers(other, [], [], [user.id]);
  assert.deepEqual(users.users.map((u) => u.id), [session.user_id]);

  const limited = providers.idToken("https://www.facebook.com", FACEBOOK_APP_ID, uniq("fbll"), { name: "Limited" });
  assert.equal((await client.authenticateFacebook(limited, true)).created, true);
  const { body } = await expectHttpError(client.authenticateFacebook(uniq("unknown-token"), true), 401);
  assert.equal(body.message, "Could not authenticate Facebook profile.");
});

test("Facebook: sync imports the player's Facebook friends who play, and so does importFacebookFriends", async () => {
  const alice = facebookUser();
  const aliceSession = await client.authenticateFacebook(alice.token, true);
  const bob = facebookUser([alice.id, "999999"]);
  const bobSession = await client.authenticateFacebook(bob.token, true, undefined, true);
  const bobFriends = await client.listFriends(bobSession);
  assert.deepEqual(bobFriends.friends.map((f) => [f.user.id, f.state]), [[aliceSession.user_id, 0]]);
  const aliceFriends = await client.listFriends(aliceSession);
  assert.deepEqual(aliceFriends.friends.map((f) => [f.user.id, f.state]), [[bobSession.user_id, 0]]);

  // Without sync nothing is imported, until the client asks.
  const carol = facebookUser([alice.id]);
  const carolSession = await client.authenticateFacebook(carol.token, true);
  assert.deepEqual((await client.listFriends(carolSession)).friends ?? [], []);
  assert.equal(await client.importFacebookFriends(carolSession, { token: carol.token }), true);
  assert.deepEqual((await client.listFriends(carolSession)).friends.map((f) => f.user.id), [aliceSession.user_id]);
});

test("Facebook Instant Games: signed player info signs in; a bad HMAC is refused with Nakama's DataLoss", async () => {
  const player = uniq("fbig");
  const session = await client.authenticateFacebookInstantGame(providers.instantInfo(player), true);
  assert.equal(session.created, true);
  assert.equal((await client.getAccount(session)).user.facebook_instant_game_id, player);
  const forged = providers.instantInfo(uniq("fbig"), "not-the-secret");
  const { body } = await expectHttpError(client.authenticateFacebookInstantGame(forged, true), 500);
  assert.equal(body.code, DATA_LOSS);
});

test("Steam: a session ticket signs in; sync and importSteamFriends make Steam friends friends", async () => {
  const carol = steamUser();
  const carolSession = await client.authenticateSteam(carol.ticket, true);
  assert.equal(carolSession.created, true);
  assert.equal((await client.getAccount(carolSession)).user.steam_id, carol.id);
  const dave = steamUser([carol.id]);
  // nakama-js 2.8 puts `sync` into the Steam body, where Nakama's route ignores it: ask the
  // route itself, as Nakama's other clients do (`?sync=true`).
  const signIn = await fetch(`${server.base}/v2/account/authenticate/steam?sync=true`, {
    method: "POST",
    headers: { authorization: `Basic ${Buffer.from("defaultkey:").toString("base64")}`, "content-type": "application/json" },
    body: JSON.stringify({ token: dave.ticket }),
  });
  assert.equal(signIn.status, 200);
  const daveSession = Session.restore((await signIn.json()).token, "");
  assert.deepEqual((await client.listFriends(daveSession)).friends.map((f) => f.user.id), [carolSession.user_id]);
  const erin = steamUser([carol.id]);
  const erinSession = await client.authenticateSteam(erin.ticket, true);
  assert.deepEqual((await client.listFriends(erinSession)).friends ?? [], []);
  assert.equal(await client.importSteamFriends(erinSession, { token: erin.ticket }, false), true);
  assert.deepEqual((await client.listFriends(erinSession)).friends.map((f) => f.user.id), [carolSession.user_id]);
  // With reset, the friends Steam no longer lists go.
  providers.steamFriends.set(erin.id, []);
  assert.equal(await client.importSteamFriends(erinSession, { token: erin.ticket }, true), true);
  assert.deepEqual((await client.listFriends(erinSession)).friends ?? [], []);
  const { body } = await expectHttpError(client.authenticateSteam("00ff", true), 401);
  assert.equal(body.message, "Could not authenticate Steam profile.");
});

test("Game Center: a signature over player, bundle, timestamp and salt signs in; a tampered one does not", async () => {
  const player = uniq("G");
  const proof = providers.gameCenter(player);
  const session = await client.authenticateGameCenter(proof.bundle_id, proof.player_id, proof.public_key_url, proof.salt, proof.signature, proof.timestamp_seconds, undefined, true);
  assert.equal(session.created, true);
  assert.equal((await client.getAccount(session)).user.gamecenter_id, player);
  const other = providers.gameCenter(uniq("G"));
  const { body } = await expectHttpError(
    client.authenticateGameCenter(other.bundle_id, other.player_id, other.public_key_url, other.salt, proof.signature, other.timestamp_seconds, undefined, true),
    401,
  );
  assert.equal(body.message, "Could not authenticate GameCenter profile.");
});

test("link and unlink every provider; an id another account has is refused; the last way in stays", async () => {
  const session = await client.authenticateDevice(uniq("device"), true);
  const apple = uniq("apple");
  const google = uniq("google");
  const fb = facebookUser();
  const fbig = uniq("fbig");
  const steam = steamUser();
  const gc = uniq("G");
  assert.equal(await client.linkApple(session, { token: providers.appleToken(apple) }), true);
  assert.equal(await client.linkGoogle(session, { token: providers.googleToken(google) }), true);
  assert.equal(await client.linkFacebook(session, { token: fb.token }), true);
  assert.equal(await client.linkFacebookInstantGame(session, { signed_player_info: providers.instantInfo(fbig) }), true);
  assert.equal(await client.linkSteam(session, { account: { token: steam.ticket }, sync: false }), true);
  assert.equal(await client.linkGameCenter(session, providers.gameCenter(gc)), true);
  const user = (await client.getAccount(session)).user;
  assert.deepEqual(
    [user.apple_id, user.google_id, user.facebook_id, user.facebook_instant_game_id, user.steam_id, user.gamecenter_id],
    [apple, google, fb.id, fbig, steam.id, gc],
  );

  // Another account cannot take them.
  const thief = await client.authenticateDevice(uniq("device"), true);
  const { body } = await expectHttpError(client.linkApple(thief, { token: providers.appleToken(apple) }), 409);
  assert.equal(body.code, GRPC.ALREADY_EXISTS);
  assert.equal(body.message, "Apple ID is already in use.");
  // Nor sign in to a new account with them: they find this one.
  assert.equal((await client.authenticateApple(providers.appleToken(apple), true)).user_id, session.user_id);

  assert.equal(await client.unlinkApple(session, { token: providers.appleToken(apple) }), true);
  assert.equal(await client.unlinkGoogle(session, { token: providers.googleToken(google) }), true);
  assert.equal(await client.unlinkFacebook(session, { token: fb.token }), true);
  assert.equal(await client.unlinkFacebookInstantGame(session, { signed_player_info: providers.instantInfo(fbig) }), true);
  assert.equal(await client.unlinkSteam(session, { token: steam.ticket }), true);
  assert.equal(await client.unlinkGameCenter(session, providers.gameCenter(gc)), true);
  const after = (await client.getAccount(session)).user;
  for (const field of ["apple_id", "google_id", "facebook_id", "facebook_instant_game_id", "steam_id", "gamecenter_id"]) {
    assert.equal(after[field], undefined, field);
  }

  // An account whose only way in is Instant Games cannot unlink it (Apple's and Google's
  // sign-ins bring an email, which is a way in too, as in Nakama).
  const player = uniq("fbig-only");
  const only = await client.authenticateFacebookInstantGame(providers.instantInfo(player), true);
  const refused = await expectHttpError(client.unlinkFacebookInstantGame(only, { signed_player_info: providers.instantInfo(player) }), 403);
  assert.equal(refused.body.code, GRPC.PERMISSION_DENIED);
  assert.equal((await client.getAccount(only)).user.facebook_instant_game_id, player);
});

test("a provider that is down fails its own logins quickly; the others go on", async () => {
  const fb = facebookUser();
  providers.down = true;
  try {
    const started = Date.now();
    const { body } = await expectHttpError(client.authenticateFacebook(fb.token, true), 401);
    assert.equal(body.code, GRPC.UNAUTHENTICATED);
    assert.ok(Date.now() - started < 5000, "answered within the provider's timeout");
    // Instant Games are checked offline: unaffected.
    assert.equal((await client.authenticateFacebookInstantGame(providers.instantInfo(uniq("fbig")), true)).created, true);
  } finally {
    providers.down = false;
  }
});

test("a provider without settings answers FailedPrecondition", async () => {
  const bare = await startServer();
  try {
    const { body } = await expectHttpError(clientFor(bare).authenticateApple(providers.appleToken(uniq("apple")), true), 400);
    assert.equal(body.code, FAILED_PRECONDITION);
    assert.equal(body.message, "Apple authentication is not configured.");
  } finally {
    await bare.stop();
  }
});

test("a module's before and after hooks run around the providers' routes", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "muster-module-"));
  writeFileSync(path.join(dir, "index.js"), `
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerBeforeAuthenticateApple(beforeApple);
  initializer.registerAfterLinkGoogle(afterGoogle);
}
// Refuses one Apple player; lets the others through unchanged.
function beforeApple(ctx, logger, nk, request) {
  var claims = JSON.parse(nk.binaryToString(nk.base64UrlDecode(request.account.token.split(".")[1], false)));
  if (claims.sub === "apple-refused") throw { message: "Not this player.", code: 7 };
  return request;
}
// Records who linked Google.
function afterGoogle(ctx, logger, nk, answer, request) {
  nk.storageWrite([{ collection: "linked", key: "google", userId: ctx.userId, value: { token: request.token.length > 0 }, permissionRead: 1, permissionWrite: 0 }]);
}
`);
  const hooked = await startServer({ ...providers.env(), MUSTER_RUNTIME__PATH: dir });
  try {
    const c = clientFor(hooked);
    const { body } = await expectHttpError(c.authenticateApple(providers.appleToken("apple-refused"), true), 403);
    assert.deepEqual([body.code, body.message], [GRPC.PERMISSION_DENIED, "Not this player."]);
    assert.equal((await c.authenticateApple(providers.appleToken(uniq("apple")), true)).created, true);
    const session = await c.authenticateDevice(uniq("device"), true);
    assert.equal(await c.linkGoogle(session, { token: providers.googleToken(uniq("google")) }), true);
    const read = await c.readStorageObjects(session, { object_ids: [{ collection: "linked", key: "google", user_id: session.user_id }] });
    assert.deepEqual(JSON.parse(JSON.stringify(read.objects[0].value)), { token: true });
  } finally {
    await hooked.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
