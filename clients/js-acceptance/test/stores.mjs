// A stand-in for the stores' servers, on 127.0.0.1, for the purchase tests (purchases.test.mjs):
//
// - the App Store's verifyReceipt, production and sandbox: it checks the shared password and
//   answers the receipts it was given as Apple does (a sandbox receipt sent to production is
//   answered 21007, an unknown one 21002, a wrong password 21004);
// - Google's OAuth token endpoint, which checks the service account's RS256 assertion (issuer,
//   audience, scope, expiry) with the account's public key, and the Android Publisher API
//   (`purchases.products` and `purchases.subscriptionsv2`), which answers only with an access
//   token it issued;
// - Huawei's OAuth token endpoint and Order service (`applications/purchases/tokens/verify`),
//   and purchase data signed with the app's IAP key (SHA256withRSA);
// - Facebook Instant payments' signed requests (HMAC-SHA256 with the app secret).
//
// Every key is made per run with node:crypto. `env()` is the server's settings pointing every
// store here.
import http from "node:http";
import { createHmac, createSign, createVerify, generateKeyPairSync, randomUUID } from "node:crypto";

export const BUNDLE_ID = "com.example.jsgame";
export const PACKAGE_NAME = "com.example.jsgame";
export const APPLE_SHARED_PASSWORD = "js-apple-shared-secret";
export const GOOGLE_CLIENT_EMAIL = "purchases@muster-js.iam.gserviceaccount.com";
export const GOOGLE_SCOPE = "https://www.googleapis.com/auth/androidpublisher";
// Huawei's client ids are digits: the setting is given quoted (TOML style), or the config
// loader would read it as a number.
export const HUAWEI_CLIENT_ID = "104857631";
export const HUAWEI_CLIENT_SECRET = "js-huawei-client-secret";
export const FACEBOOK_APP_SECRET = "js-facebook-app-secret";

const b64url = (buffer) => Buffer.from(buffer).toString("base64url");

/** Reads a request's body, at most 1 MiB. */
function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size > 1 << 20) {
        reject(new Error("request body too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

const bearer = (req) => (req.headers.authorization ?? "").replace(/^Bearer /, "");

export class StoreStandIn {
  constructor() {
    // The Google service account's key (its JSON key's private_key), and a key Google does not
    // know.
    this.serviceAccount = generateKeyPairSync("rsa", { modulusLength: 2048 });
    // Huawei's IAP signing key for the app, and a forger's.
    this.huawei = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.forger = generateKeyPairSync("rsa", { modulusLength: 2048 });

    this.applePassword = APPLE_SHARED_PASSWORD;
    this.receipts = new Map(); // receipt-data -> { sandbox, body }
    this.googleProducts = new Map(); // `${package}/${product}/${token}` -> purchases.products answer
    this.googleSubscriptions = new Map(); // `${package}/${token}` -> purchases.subscriptionsv2 answer
    this.googleTokens = new Set(); // access tokens issued
    this.huaweiTokens = new Set();
    this.huaweiKnown = new Set(); // purchase tokens the Order service knows
    this.calls = {
      appleProduction: 0,
      appleSandbox: 0,
      googleToken: 0,
      googleRefusedAssertions: 0,
      googlePublisher: 0,
      googleUnauthorized: 0,
      huaweiToken: 0,
      huaweiVerify: 0,
    };
  }

  async start() {
    this.server = http.createServer((req, res) => {
      this.answer(req, res).catch((error) => {
        res.writeHead(500, { "content-type": "text/plain" }).end(String(error));
      });
    });
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.base = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }

  get googleTokenUrl() {
    return `${this.base}/google/token`;
  }

  /** The server's settings (environment) pointing every store here. */
  env() {
    return {
      MUSTER_IAP__TIMEOUT_MS: "5000",
      MUSTER_IAP__APPLE__SHARED_PASSWORD: APPLE_SHARED_PASSWORD,
      MUSTER_IAP__APPLE__VERIFY_RECEIPT_URL: `${this.base}/apple/production/verifyReceipt`,
      MUSTER_IAP__APPLE__SANDBOX_VERIFY_RECEIPT_URL: `${this.base}/apple/sandbox/verifyReceipt`,
      MUSTER_IAP__APPLE__BUNDLE_ID: BUNDLE_ID,
      MUSTER_IAP__GOOGLE__CLIENT_EMAIL: GOOGLE_CLIENT_EMAIL,
      // The PEM text as the service account's JSON key holds it, line breaks and all.
      MUSTER_IAP__GOOGLE__PRIVATE_KEY: this.serviceAccount.privateKey.export({ type: "pkcs8", format: "pem" }),
      MUSTER_IAP__GOOGLE__TOKEN_URL: this.googleTokenUrl,
      MUSTER_IAP__GOOGLE__PUBLISHER_URL: `${this.base}/google`,
      MUSTER_IAP__GOOGLE__PACKAGE_NAME: PACKAGE_NAME,
      // As AppGallery Connect shows it: base64 of the key's DER (SubjectPublicKeyInfo).
      MUSTER_IAP__HUAWEI__PUBLIC_KEY: this.huawei.publicKey.export({ type: "spki", format: "der" }).toString("base64"),
      MUSTER_IAP__HUAWEI__CLIENT_ID: `"${HUAWEI_CLIENT_ID}"`,
      MUSTER_IAP__HUAWEI__CLIENT_SECRET: HUAWEI_CLIENT_SECRET,
      MUSTER_IAP__HUAWEI__TOKEN_URL: `${this.base}/huawei/token`,
      MUSTER_IAP__HUAWEI__ORDERS_URL: `${this.base}/huawei/orders`,
      MUSTER_IAP__HUAWEI__APP_TOUCH_ORDERS_URL: `${this.base}/huawei/apptouch`,
      MUSTER_IAP__FACEBOOK_INSTANT__APP_SECRET: FACEBOOK_APP_SECRET,
    };
  }

  async answer(req, res) {
    const url = new URL(req.url, this.base);
    const json = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const path = url.pathname.split("/").map(decodeURIComponent);
    // ["", "apple", environment, "verifyReceipt"]
    if (req.method === "POST" && path[1] === "apple" && path[3] === "verifyReceipt" && path.length === 4) {
      return json(200, this.verifyReceipt(path[2] === "sandbox", JSON.parse(await readBody(req))));
    }
    if (req.method === "POST" && url.pathname === "/google/token") {
      return this.googleToken(new URLSearchParams(await readBody(req)), json);
    }
    // ["", "google", "androidpublisher", "v3", "applications", package, "purchases", ...]
    if (req.method === "GET" && path.slice(1, 5).join("/") === "google/androidpublisher/v3/applications" && path[6] === "purchases") {
      this.calls.googlePublisher++;
      if (!this.googleTokens.has(bearer(req))) {
        this.calls.googleUnauthorized++;
        return json(401, { error: { code: 401, message: "Request had invalid authentication credentials.", status: "UNAUTHENTICATED" } });
      }
      const [pkg, rest] = [path[5], path.slice(7)];
      let found;
      if (rest.length === 4 && rest[0] === "products" && rest[2] === "tokens") {
        found = this.googleProducts.get(`${pkg}/${rest[1]}/${rest[3]}`);
      } else if (rest.length === 3 && rest[0] === "subscriptionsv2" && rest[1] === "tokens") {
        found = this.googleSubscriptions.get(`${pkg}/${rest[2]}`);
      }
      return found
        ? json(200, found)
        : json(404, { error: { code: 404, message: "The purchase token was not found.", status: "NOT_FOUND" } });
    }
    if (req.method === "POST" && url.pathname === "/huawei/token") {
      this.calls.huaweiToken++;
      const form = new URLSearchParams(await readBody(req));
      if (form.get("grant_type") !== "client_credentials" || form.get("client_id") !== HUAWEI_CLIENT_ID || form.get("client_secret") !== HUAWEI_CLIENT_SECRET) {
        return json(401, { error: 1101, sub_error: 20152, error_description: "invalid client" });
      }
      const token = `huawei-${randomUUID()}`;
      this.huaweiTokens.add(token);
      return json(200, { access_token: token, expires_in: 3600, token_type: "Bearer" });
    }
    if (req.method === "POST" && url.pathname === "/huawei/orders/applications/purchases/tokens/verify") {
      this.calls.huaweiVerify++;
      if (!this.huaweiTokens.has(bearer(req))) return json(401, {});
      const request = JSON.parse(await readBody(req));
      if (!this.huaweiKnown.has(request.purchaseToken)) {
        return json(200, { responseCode: "5", responseMessage: "invalid purchaseToken" });
      }
      return json(200, this.huaweiOrderAnswer(request.purchaseToken, request.productId));
    }
    return json(404, {});
  }

  // ---- App Store ------------------------------------------------------------------------

  /** Makes `receipt` known: its purchases (`in_app`) and periods (`latest_receipt_info`). */
  addReceipt(receipt, { sandbox = false, inApp = [], latest = [], bundleId = BUNDLE_ID } = {}) {
    this.receipts.set(receipt, { sandbox, body: { receipt: { bundle_id: bundleId, in_app: inApp }, latest_receipt_info: latest } });
  }

  verifyReceipt(sandbox, request) {
    if (sandbox) this.calls.appleSandbox++;
    else this.calls.appleProduction++;
    if (request["exclude-old-transactions"] !== true) return { status: 21000 };
    if (request.password !== this.applePassword) return { status: 21004 };
    const known = this.receipts.get(request["receipt-data"]);
    if (!known) return { status: 21002 };
    if (known.sandbox && !sandbox) return { status: 21007 };
    return this.receiptAnswer(request["receipt-data"]);
  }

  /** verifyReceipt's answer (status 0) for a known receipt, from the environment it is of. */
  receiptAnswer(receipt) {
    const known = this.receipts.get(receipt);
    return {
      ...known.body,
      status: 0,
      environment: known.sandbox ? "Sandbox" : "Production",
      latest_receipt: receipt,
    };
  }

  // ---- Google Play ----------------------------------------------------------------------

  googleToken(form, json) {
    this.calls.googleToken++;
    const refuse = (why) => {
      this.calls.googleRefusedAssertions++;
      return json(400, { error: "invalid_grant", error_description: why });
    };
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return refuse("grant_type");
    const parts = (form.get("assertion") ?? "").split(".");
    if (parts.length !== 3) return refuse("not a JWT");
    let header, claims;
    try {
      header = JSON.parse(Buffer.from(parts[0], "base64url").toString("utf8"));
      claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
    } catch {
      return refuse("not a JWT");
    }
    if (header.alg !== "RS256") return refuse("alg");
    const verifier = createVerify("RSA-SHA256");
    verifier.update(`${parts[0]}.${parts[1]}`);
    if (!verifier.verify(this.serviceAccount.publicKey, Buffer.from(parts[2], "base64url"))) return refuse("Invalid JWT Signature.");
    const now = Math.floor(Date.now() / 1000);
    if (claims.iss !== GOOGLE_CLIENT_EMAIL || claims.aud !== this.googleTokenUrl || claims.scope !== GOOGLE_SCOPE) return refuse("claims");
    if (!(claims.exp > now && claims.iat <= now + 60 && claims.exp - claims.iat <= 3600)) return refuse("Invalid JWT: Token must be a short-lived token");
    const token = `ya29.js-${randomUUID()}`;
    this.googleTokens.add(token);
    return json(200, { access_token: token, expires_in: 3599, token_type: "Bearer" });
  }

  /** A one-time product bought with `token`, as `purchases.products` answers it. */
  addGoogleProduct(token, productId, { purchaseState = 0, purchaseMs, purchaseType = 0, packageName = PACKAGE_NAME } = {}) {
    const answer = {
      kind: "androidpublisher#productPurchase",
      purchaseTimeMillis: String(purchaseMs),
      purchaseState,
      consumptionState: 0,
      developerPayload: "",
      orderId: `GPA.${token}`,
      acknowledgementState: 1,
      regionCode: "FI",
    };
    // Absent (null here) for a real purchase; 0 for a test (licensed tester) purchase.
    if (purchaseType !== null) answer.purchaseType = purchaseType;
    this.googleProducts.set(`${packageName}/${productId}/${token}`, answer);
    return answer;
  }

  /** The subscription of `token`, as `purchases.subscriptionsv2` answers it. */
  setGoogleSubscription(token, productId, { startTime, expiryTime, test = true, linkedPurchaseToken } = {}) {
    const answer = {
      kind: "androidpublisher#subscriptionPurchaseV2",
      startTime,
      regionCode: "FI",
      subscriptionState: Date.parse(expiryTime) > Date.now() ? "SUBSCRIPTION_STATE_ACTIVE" : "SUBSCRIPTION_STATE_EXPIRED",
      latestOrderId: `GPA.${token}`,
      acknowledgementState: "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
      lineItems: [{ productId, expiryTime, autoRenewingPlan: { autoRenewEnabled: true } }],
    };
    if (test) answer.testPurchase = {};
    if (linkedPurchaseToken) answer.linkedPurchaseToken = linkedPurchaseToken;
    this.googleSubscriptions.set(`${PACKAGE_NAME}/${token}`, answer);
    return answer;
  }

  // ---- Huawei ---------------------------------------------------------------------------

  /** The Order service's answer for a purchase token it knows (SHA256withRSA is deterministic). */
  huaweiOrderAnswer(purchaseToken, productId) {
    const data = JSON.stringify({ purchaseToken, productId, purchaseState: 0 });
    return { responseCode: "0", purchaseTokenData: data, dataSignature: this.huaweiSign(data), signatureAlgorithm: "SHA256WithRSA" };
  }

  /** `data` signed with the app's IAP key (SHA256withRSA), base64; or with a forger's key. */
  huaweiSign(data, { forged = false } = {}) {
    const signer = createSign("RSA-SHA256");
    signer.update(data);
    return signer.sign(forged ? this.forger.privateKey : this.huawei.privateKey).toString("base64");
  }
}

/** A Play Billing purchase as a client sends it: Unity's wrapper around the purchase JSON. */
export function googleReceipt(productId, token, purchaseMs, { packageName = PACKAGE_NAME, purchaseState = 0 } = {}) {
  const purchase = {
    orderId: `GPA.${token}`,
    packageName,
    productId,
    purchaseTime: purchaseMs,
    purchaseState,
    purchaseToken: token,
    acknowledged: false,
  };
  return JSON.stringify({ Store: "GooglePlay", TransactionID: token, json: JSON.stringify(purchase), signature: "unused", skuDetails: "{}" });
}

/** Huawei's purchase data (`InAppPurchaseData`) of a consumable, as the client received it. */
export function huaweiPurchase(token, productId, purchaseMs, { purchaseType = 0 } = {}) {
  const data = {
    autoRenewing: false,
    orderId: `2025${token}`,
    packageName: PACKAGE_NAME,
    applicationId: 104857631,
    kind: 0,
    productId,
    productName: "Gems",
    purchaseTime: purchaseMs,
    purchaseState: 0,
    developerPayload: "",
    purchaseToken: token,
    consumptionState: 0,
    confirmed: 0,
    currency: "EUR",
    price: 99,
    country: "FI",
    payOrderId: "sandbox",
    accountFlag: 0,
  };
  if (purchaseType !== null) data.purchaseType = purchaseType;
  return JSON.stringify(data);
}

/** A Facebook Instant payment. */
export function facebookPayment(token, productId, purchaseSecs) {
  return {
    algorithm: "HMAC-SHA256",
    app_id: "424242",
    is_consumed: false,
    issued_at: purchaseSecs,
    payment_id: `pay-${token}`,
    product_id: productId,
    purchase_price: { amount: "0.99", currency: "EUR" },
    purchase_time: purchaseSecs,
    purchase_token: token,
    payment_action_type: "charge",
  };
}

/** A payment's signed request: base64url HMAC-SHA256 of the base64url payload, with `secret`. */
export function facebookSignedRequest(payment, secret = FACEBOOK_APP_SECRET) {
  const payload = b64url(JSON.stringify(payment));
  const signature = createHmac("sha256", secret).update(payload).digest("base64url");
  return `${signature}.${payload}`;
}

/** One transaction of an app receipt, as verifyReceipt writes it (times: ms as strings). */
export function receiptItem(transactionId, productId, purchaseMs) {
  return {
    quantity: "1",
    product_id: productId,
    transaction_id: transactionId,
    original_transaction_id: transactionId,
    purchase_date_ms: String(purchaseMs),
    original_purchase_date_ms: String(purchaseMs),
    is_trial_period: "false",
  };
}

/** A period of an auto-renewable subscription in an app receipt. */
export function receiptPeriod(transactionId, originalTransactionId, productId, purchaseMs, expiresMs, originalPurchaseMs = purchaseMs) {
  return {
    ...receiptItem(transactionId, productId, purchaseMs),
    original_transaction_id: originalTransactionId,
    original_purchase_date_ms: String(originalPurchaseMs),
    expires_date_ms: String(expiresMs),
    is_in_intro_offer_period: "false",
  };
}
