// A stand-in for the identity providers, on 127.0.0.1: Apple's, Google's and Facebook Limited
// Login's key sets (an RSA key made per run), the Graph API's /me and /me/friends, Steam's
// AuthenticateUserTicket and GetFriendList, and a Game Center certificate (fixtures/gamecenter).
// With it come the signers of the proofs its keys match, and `env()`: the server's settings
// pointing every provider at it.
import http from "node:http";
import { createHmac, createSign, generateKeyPairSync, randomBytes, createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const GAMECENTER_CERT = readFileSync(path.join(here, "fixtures/gamecenter/cert.der"));
const GAMECENTER_KEY = createPrivateKey(readFileSync(path.join(here, "fixtures/gamecenter/key.pem")));

export const BUNDLE_ID = "com.example.jsgame";
export const GOOGLE_CLIENT_ID = "js-test.apps.googleusercontent.com";
export const FACEBOOK_APP_ID = "4242";
export const INSTANT_SECRET = "js-instant-secret";
export const STEAM_KEY = "js-steam-publisher-key";
export const STEAM_APP_ID = 480;
const KID = "js-kid-1";

const b64url = (buffer) => Buffer.from(buffer).toString("base64url");

export class ProviderStandIn {
  constructor() {
    this.keys = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.forger = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.graphUsers = new Map(); // access token -> {id, name, email}
    this.graphFriends = new Map(); // access token -> [facebook ids]
    this.steamTickets = new Map(); // ticket -> steam id
    this.steamFriends = new Map(); // steam id -> [steam ids]
    this.down = false;
  }

  async start() {
    this.server = http.createServer((req, res) => this.answer(req, res));
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.base = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }

  answer(req, res) {
    if (this.down) {
      res.writeHead(503).end();
      return;
    }
    const url = new URL(req.url, this.base);
    const json = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const q = (name) => url.searchParams.get(name) ?? "";
    switch (url.pathname) {
      case "/keys": {
        const jwk = this.keys.publicKey.export({ format: "jwk" });
        return json(200, { keys: [{ ...jwk, kid: KID, alg: "RS256", use: "sig" }] });
      }
      case "/graph/me": {
        const user = this.graphUsers.get(q("access_token"));
        return user ? json(200, user) : json(400, { error: { message: "Invalid OAuth access token.", type: "OAuthException", code: 190 } });
      }
      case "/graph/me/friends": {
        const friends = this.graphFriends.get(q("access_token"));
        if (!friends) return json(400, { error: { message: "Invalid OAuth access token.", type: "OAuthException", code: 190 } });
        return json(200, { data: friends.map((id) => ({ id, name: `Friend ${id}` })), paging: {}, summary: { total_count: friends.length } });
      }
      case "/steam/ISteamUserAuth/AuthenticateUserTicket/v1/": {
        if (q("key") !== STEAM_KEY) return json(403, {});
        const steamid = this.steamTickets.get(q("ticket"));
        return steamid
          ? json(200, { response: { params: { result: "OK", steamid, ownersteamid: steamid, vacbanned: false, publisherbanned: false } } })
          : json(200, { response: { error: { errorcode: 101, errordesc: "Invalid ticket" } } });
      }
      case "/steam/ISteamUser/GetFriendList/v1/": {
        if (q("key") !== STEAM_KEY) return json(403, {});
        const friends = this.steamFriends.get(q("steamid")) ?? [];
        return json(200, { friendslist: { friends: friends.map((steamid) => ({ steamid, relationship: "friend", friend_since: 1 })) } });
      }
      case "/gamecenter/gc.cer":
        res.writeHead(200, { "content-type": "application/pkix-cert" });
        return res.end(GAMECENTER_CERT);
      default:
        return json(404, {});
    }
  }

  /** The server's settings (environment) pointing every provider here. */
  env() {
    return {
      MUSTER_SOCIAL__TIMEOUT_MS: "2000",
      MUSTER_SOCIAL__APPLE__BUNDLE_IDS: `["${BUNDLE_ID}"]`,
      MUSTER_SOCIAL__APPLE__KEYS_URL: `${this.base}/keys`,
      MUSTER_SOCIAL__GOOGLE__CLIENT_IDS: `["${GOOGLE_CLIENT_ID}"]`,
      MUSTER_SOCIAL__GOOGLE__KEYS_URL: `${this.base}/keys`,
      MUSTER_SOCIAL__FACEBOOK__GRAPH_URL: `${this.base}/graph`,
      MUSTER_SOCIAL__FACEBOOK__APP_ID: FACEBOOK_APP_ID,
      MUSTER_SOCIAL__FACEBOOK__LIMITED_LOGIN_KEYS_URL: `${this.base}/keys`,
      MUSTER_SOCIAL__FACEBOOK_INSTANT_GAME__APP_SECRET: INSTANT_SECRET,
      MUSTER_SOCIAL__STEAM__PUBLISHER_KEY: STEAM_KEY,
      MUSTER_SOCIAL__STEAM__APP_ID: String(STEAM_APP_ID),
      MUSTER_SOCIAL__STEAM__API_URL: `${this.base}/steam`,
      MUSTER_SOCIAL__GAMECENTER__BUNDLE_IDS: `["${BUNDLE_ID}"]`,
      MUSTER_SOCIAL__GAMECENTER__KEY_URL_HOSTS: `["127.0.0.1"]`,
    };
  }

  /** An RS256 JWT with `claims`, signed by the stand-in's key (or a forger's). */
  jwt(claims, { forged = false } = {}) {
    const header = b64url(JSON.stringify({ alg: "RS256", kid: KID, typ: "JWT" }));
    const payload = b64url(JSON.stringify(claims));
    const signer = createSign("RSA-SHA256");
    signer.update(`${header}.${payload}`);
    const key = forged ? this.forger.privateKey : this.keys.privateKey;
    return `${header}.${payload}.${b64url(signer.sign(key))}`;
  }

  idToken(iss, aud, sub, extra = {}, { expiresIn = 600, forged = false } = {}) {
    const now = Math.floor(Date.now() / 1000);
    return this.jwt({ iss, aud, sub, iat: now, exp: now + expiresIn, ...extra }, { forged });
  }

  appleToken(sub, options = {}) {
    return this.idToken("https://appleid.apple.com", options.aud ?? BUNDLE_ID, sub, { email: `${sub}@privaterelay.example.com`, email_verified: "true" }, options);
  }

  googleToken(sub, options = {}) {
    return this.idToken("https://accounts.google.com", options.aud ?? GOOGLE_CLIENT_ID, sub, { email: `${sub}@gmail.example.com`, email_verified: true, name: `G ${sub}`, picture: `https://example.com/${sub}.png` }, options);
  }

  /** Instant Games' signed player info for `playerId`. */
  instantInfo(playerId, secret = INSTANT_SECRET) {
    const payload = b64url(JSON.stringify({ algorithm: "HMAC-SHA256", issued_at: Math.floor(Date.now() / 1000), player_id: playerId, request_payload: "js" }));
    const signature = createHmac("sha256", secret).update(payload).digest("base64url");
    return `${signature}.${payload}`;
  }

  /** Game Center's proof for `playerId`, as nakama-js's authenticateGameCenter takes it. */
  gameCenter(playerId) {
    const salt = randomBytes(8);
    const timestamp = Date.now();
    const ts = Buffer.alloc(8);
    ts.writeBigUInt64BE(BigInt(timestamp));
    const signer = createSign("RSA-SHA256");
    signer.update(Buffer.concat([Buffer.from(playerId), Buffer.from(BUNDLE_ID), ts, salt]));
    return {
      bundle_id: BUNDLE_ID,
      player_id: playerId,
      public_key_url: `${this.base}/gamecenter/gc.cer`,
      salt: salt.toString("base64"),
      signature: signer.sign(GAMECENTER_KEY).toString("base64"),
      timestamp_seconds: String(timestamp),
    };
  }
}
