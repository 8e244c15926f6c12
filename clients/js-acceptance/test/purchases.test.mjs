// In-app purchases and subscriptions validated through nakama-js against a stand-in for the
// stores (stores.mjs): the App Store's verifyReceipt, Google's token endpoint and Android
// Publisher API, Huawei's Order service and signed purchase data, Facebook Instant payments'
// signed requests, each checking or signing real data with keys made per run. (The App Store
// Server API's signed transactions, with their x5c chains, are covered by the Rust suite.)
//
// nakama-js 2.8.0 takes the proofs positionally (`validatePurchaseHuawei(session, purchase,
// signature, persist = true)`, `listSubscriptions(session, cursor, limit)`), always sends
// `persist`, and hands the server's JSON back untouched: enums come as names ("SANDBOX") although
// its types declare numbers, and fields at their default (`seen_before: false`, `active: false`,
// the store APPLE_APP_STORE) are left out, as Nakama's gateway leaves them out.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, clientFor, uniq, expectHttpError, GRPC } from "./helpers.mjs";
import {
  StoreStandIn,
  APPLE_SHARED_PASSWORD,
  googleReceipt,
  huaweiPurchase,
  facebookPayment,
  facebookSignedRequest,
  receiptItem,
  receiptPeriod,
} from "./stores.mjs";

const FAILED_PRECONDITION = 9;
const UNAVAILABLE = 14;
const HOUR = 3_600_000;
const TIME_FIELDS = ["purchase_time", "create_time", "update_time", "refund_time", "expiry_time"];

let stores;
let server;
let client;
before(async () => {
  stores = await new StoreStandIn().start();
  server = await startServer(stores.env());
  client = clientFor(server);
});
after(async () => {
  await server?.stop();
  await stores?.stop();
});

const player = () => client.authenticateDevice(uniq("device"), true);

// App Store transaction ids are digits; unique within the run.
let sequence = 0;
const appleTransactionId = () => `${Date.now()}${String(sequence++).padStart(4, "0")}`;
// An app receipt is base64 (of a PKCS#7 container): never three dot-separated parts.
const appleReceipt = () => Buffer.from(uniq("app-receipt")).toString("base64");

/** `value` with its times as Unix milliseconds (each must be RFC 3339) and its store's answer parsed. */
function readable(value) {
  const out = { ...value };
  for (const field of TIME_FIELDS) {
    if (field in out) {
      const ms = Date.parse(out[field]);
      assert.ok(Number.isFinite(ms), `${field} is an RFC 3339 time: ${out[field]}`);
      out[field] = ms;
    }
  }
  for (const field of ["provider_response", "provider_notification"]) {
    if (field in out) out[field] = JSON.parse(out[field]);
  }
  return out;
}

/**
 * Checks a validated purchase or subscription field by field (the set of fields too). `stored`:
 * it has create and update times, made since `since`. Returns it readable.
 */
function check(actual, expected, { stored, since }) {
  const got = readable(actual);
  const { create_time, update_time, ...rest } = got;
  if (stored) {
    assert.ok(create_time >= since - 1000 && create_time <= Date.now() + 1000, `create_time ${create_time} is now`);
    assert.ok(update_time >= create_time, "update_time is not before create_time");
  } else {
    assert.equal(create_time, undefined, "nothing stored: no create_time");
    assert.equal(update_time, undefined, "nothing stored: no update_time");
  }
  assert.deepEqual(rest, expected);
  return got;
}

const byTransaction = (purchases) => [...purchases].sort((a, b) => a.transaction_id.localeCompare(b.transaction_id));

/** Muster's purchase listing, `GET /v2/iap/purchase` (nakama-js has no method for it). */
async function purchasePage(session, query = "", at = server) {
  const res = await fetch(`${at.base}/v2/iap/purchase${query}`, {
    headers: session ? { authorization: `Bearer ${session.token}` } : {},
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.status, body: await res.json() };
}

/** Every purchase of the player, page after page (at most 20 pages). */
async function allPurchases(session) {
  const all = [];
  let cursor = "";
  for (let pages = 0; pages < 20; pages++) {
    const { status, body } = await purchasePage(session, `?limit=100&cursor=${encodeURIComponent(cursor)}`);
    assert.equal(status, 200, JSON.stringify(body));
    all.push(...(body.validated_purchases ?? []));
    if (!body.cursor) return all;
    cursor = body.cursor;
  }
  assert.fail("more than 20 pages of purchases");
}

const transactionIds = (purchases) => purchases.map((p) => p.transaction_id).sort();

test("App Store: an app receipt is checked with verifyReceipt (production, then the sandbox on 21007); persist false stores nothing; stored once, then seen_before", async () => {
  const since = Date.now();
  const [me, other] = [await player(), await player()];
  const t = Date.now() - 60_000;
  const [gems, coins, period] = [appleTransactionId(), appleTransactionId(), appleTransactionId()];
  const receipt = appleReceipt();
  stores.addReceipt(receipt, {
    sandbox: true,
    inApp: [receiptItem(gems, "gems_100", t), receiptItem(coins, "coins_10", t + 1)],
    // The same purchase again, and a subscription period: neither is a new purchase.
    latest: [receiptItem(coins, "coins_10", t + 1), receiptPeriod(period, period, "monthly", t, t + HOUR)],
  });
  const answer = stores.receiptAnswer(receipt);
  // APPLE_APP_STORE is the store enum's default: left out.
  const expected = (userId, transactionId, productId, purchaseTime) => ({
    user_id: userId,
    product_id: productId,
    transaction_id: transactionId,
    purchase_time: purchaseTime,
    provider_response: answer,
    environment: "SANDBOX",
  });
  const calls = { ...stores.calls };

  for (let dry = 0; dry < 2; dry++) {
    const { validated_purchases } = await client.validatePurchaseApple(me, receipt, false);
    const [first, second] = byTransaction(validated_purchases);
    assert.equal(validated_purchases.length, 2);
    check(first, expected(me.user_id, gems, "gems_100", t), { stored: false });
    check(second, expected(me.user_id, coins, "coins_10", t + 1), { stored: false });
  }
  assert.deepEqual(await allPurchases(me), [], "persist false stored nothing");
  // Each validation asked production, which answered 21007, then the sandbox.
  assert.equal(stores.calls.appleProduction - calls.appleProduction, 2);
  assert.equal(stores.calls.appleSandbox - calls.appleSandbox, 2);

  const stored = byTransaction((await client.validatePurchaseApple(me, receipt)).validated_purchases);
  assert.equal(stored.length, 2);
  const storedGems = check(stored[0], expected(me.user_id, gems, "gems_100", t), { stored: true, since });
  check(stored[1], expected(me.user_id, coins, "coins_10", t + 1), { stored: true, since });

  const replay = byTransaction((await client.validatePurchaseApple(me, receipt)).validated_purchases);
  assert.equal(replay.length, 2);
  const replayedGems = check(replay[0], { ...expected(me.user_id, gems, "gems_100", t), seen_before: true }, { stored: true, since });
  check(replay[1], { ...expected(me.user_id, coins, "coins_10", t + 1), seen_before: true }, { stored: true, since });
  assert.equal(replayedGems.create_time, storedGems.create_time, "the replay found the stored purchase");

  // Another player replaying the receipt is told it was seen (as Nakama, naming the caller);
  // the purchases stay the first player's.
  const stolen = byTransaction((await client.validatePurchaseApple(other, receipt)).validated_purchases);
  assert.deepEqual(stolen.map((p) => [p.transaction_id, p.user_id, p.seen_before]), [
    [gems, other.user_id, true],
    [coins, other.user_id, true],
  ]);
  assert.deepEqual(transactionIds(await allPurchases(me)), [gems, coins].sort());
  assert.deepEqual(await allPurchases(other), []);

  // A production receipt is verified in production only.
  const production = appleReceipt();
  const single = appleTransactionId();
  stores.addReceipt(production, { inApp: [receiptItem(single, "gems_100", t)] });
  const before = { ...stores.calls };
  const [purchase] = (await client.validatePurchaseApple(me, production)).validated_purchases;
  assert.equal(purchase.environment, "PRODUCTION");
  assert.equal(purchase.transaction_id, single);
  assert.equal(purchase.seen_before, undefined);
  assert.deepEqual([stores.calls.appleProduction - before.appleProduction, stores.calls.appleSandbox - before.appleSandbox], [1, 0]);
});

test("App Store: an unknown receipt, a wrong shared password, another app's receipt and a subscription's are refused with Nakama's codes and store nothing", async () => {
  const me = await player();
  const t = Date.now() - 60_000;
  const transactionId = appleTransactionId();
  const receipt = appleReceipt();
  stores.addReceipt(receipt, { inApp: [receiptItem(transactionId, "gems_100", t)] });

  let refused = await expectHttpError(client.validatePurchaseApple(me, appleReceipt()), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Invalid Receipt. Status: 21002"]);

  // The app's shared secret was changed in App Store Connect: Apple refuses the server's.
  stores.applePassword = "rotated-shared-secret";
  try {
    refused = await expectHttpError(client.validatePurchaseApple(me, receipt), 400);
    assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Invalid Receipt. Status: 21004"]);
  } finally {
    stores.applePassword = APPLE_SHARED_PASSWORD;
  }

  const foreign = appleReceipt();
  stores.addReceipt(foreign, { inApp: [receiptItem(appleTransactionId(), "gems_100", t)], bundleId: "com.example.other" });
  refused = await expectHttpError(client.validatePurchaseApple(me, foreign), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, `Invalid Receipt. It is for the bundle "com.example.other", not this app's.`]);

  const subscription = appleReceipt();
  const period = appleTransactionId();
  stores.addReceipt(subscription, { latest: [receiptPeriod(period, period, "monthly", t, t + HOUR)] });
  refused = await expectHttpError(client.validatePurchaseApple(me, subscription), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Subscription Receipt. Use the appropriate function instead."]);
  // And the other way round.
  refused = await expectHttpError(client.validateSubscriptionApple(me, receipt), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Purchase Receipt. Use the appropriate function instead."]);

  refused = await expectHttpError(client.validatePurchaseApple(me, ""), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Receipt cannot be empty."]);

  assert.deepEqual(await allPurchases(me), [], "nothing refused was stored");
  // The refused receipt, now with the right secret, is new.
  const [purchase] = (await client.validatePurchaseApple(me, receipt)).validated_purchases;
  assert.deepEqual([purchase.transaction_id, purchase.seen_before], [transactionId, undefined]);
});

test("Google Play: the purchase is read back from the Publisher API as the service account; persist false stores nothing; stored once, then seen_before", async () => {
  const since = Date.now();
  const me = await player();
  const t = Date.now() - 5000;
  const token = uniq("gtok");
  const answer = stores.addGoogleProduct(token, "gems_100", { purchaseMs: t });
  const receipt = googleReceipt("gems_100", token, t);
  const expected = {
    user_id: me.user_id,
    product_id: "gems_100",
    transaction_id: token,
    store: "GOOGLE_PLAY_STORE",
    purchase_time: t,
    provider_response: answer,
    // purchaseType 0: a test purchase.
    environment: "SANDBOX",
  };

  for (let dry = 0; dry < 2; dry++) {
    const { validated_purchases } = await client.validatePurchaseGoogle(me, receipt, false);
    assert.equal(validated_purchases.length, 1);
    check(validated_purchases[0], expected, { stored: false });
  }
  assert.deepEqual(await allPurchases(me), []);

  const [stored] = (await client.validatePurchaseGoogle(me, receipt)).validated_purchases;
  const first = check(stored, expected, { stored: true, since });
  const [replay] = (await client.validatePurchaseGoogle(me, receipt)).validated_purchases;
  assert.equal(check(replay, { ...expected, seen_before: true }, { stored: true, since }).create_time, first.create_time);

  // A real (not test) purchase is production's.
  const real = uniq("gtok");
  stores.addGoogleProduct(real, "gems_500", { purchaseMs: t, purchaseType: null });
  const [production] = (await client.validatePurchaseGoogle(me, googleReceipt("gems_500", real, t))).validated_purchases;
  assert.deepEqual([production.transaction_id, production.environment, production.seen_before], [real, "PRODUCTION", undefined]);

  // One access token served every call (kept until near its expiry), and every assertion held.
  assert.equal(stores.calls.googleToken, 1);
  assert.equal(stores.calls.googleRefusedAssertions, 0);
  assert.equal(stores.calls.googleUnauthorized, 0);
  assert.deepEqual(transactionIds(await allPurchases(me)), [token, real].sort());
});

test("Google Play: a token Google does not know, a cancelled purchase, another package's and an unknown service account key are refused and store nothing", async () => {
  const me = await player();
  const t = Date.now() - 5000;

  let refused = await expectHttpError(client.validatePurchaseGoogle(me, googleReceipt("gems_100", uniq("forged"), t)), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Invalid Receipt. Google Play does not know this purchase (HTTP 404)."]);

  const cancelled = uniq("gtok");
  stores.addGoogleProduct(cancelled, "gems_100", { purchaseMs: t, purchaseState: 1 });
  refused = await expectHttpError(client.validatePurchaseGoogle(me, googleReceipt("gems_100", cancelled, t)), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Invalid Receipt. State: 1"]);

  const elsewhere = uniq("gtok");
  stores.addGoogleProduct(elsewhere, "gems_100", { purchaseMs: t, packageName: "com.example.other" });
  refused = await expectHttpError(client.validatePurchaseGoogle(me, googleReceipt("gems_100", elsewhere, t, { packageName: "com.example.other" })), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, `Invalid Receipt. It is for the package "com.example.other", not this app's.`]);

  refused = await expectHttpError(client.validatePurchaseGoogle(me, "{not json"), 400);
  assert.equal(refused.body.code, GRPC.INVALID_ARGUMENT);
  assert.deepEqual(await allPurchases(me), []);

  // A server whose service account key is not the one Google knows: the token endpoint refuses
  // its assertion, and Google is unavailable to it (nothing is stored there either).
  const genuine = uniq("gtok");
  stores.addGoogleProduct(genuine, "gems_100", { purchaseMs: t });
  const wrongKey = await startServer({
    ...stores.env(),
    MUSTER_IAP__GOOGLE__PRIVATE_KEY: stores.forger.privateKey.export({ type: "pkcs8", format: "pem" }),
  });
  try {
    const other = clientFor(wrongKey);
    const session = await other.authenticateDevice(uniq("device"), true);
    const refusedBefore = stores.calls.googleRefusedAssertions;
    const { body } = await expectHttpError(other.validatePurchaseGoogle(session, googleReceipt("gems_100", genuine, t)), 503);
    assert.deepEqual([body.code, body.message], [
      UNAVAILABLE,
      "Google IAP verification is currently unavailable (the token endpoint refused the service account: HTTP 400). Try again later.",
    ]);
    assert.equal(stores.calls.googleRefusedAssertions - refusedBefore, 1);
  } finally {
    await wrongKey.stop();
  }
  // The genuine purchase was never stored: here it is new.
  const [purchase] = (await client.validatePurchaseGoogle(me, googleReceipt("gems_100", genuine, t))).validated_purchases;
  assert.deepEqual([purchase.transaction_id, purchase.seen_before], [genuine, undefined]);
});

test("Huawei AppGallery: signed purchase data is checked with the app's key and the Order service; persist false stores nothing; stored once, then seen_before", async () => {
  const since = Date.now();
  const me = await player();
  const t = Date.now() - 5000;
  const token = uniq("htok");
  stores.huaweiKnown.add(token);
  const data = huaweiPurchase(token, "gems_100", t);
  const signature = stores.huaweiSign(data);
  const expected = {
    user_id: me.user_id,
    product_id: "gems_100",
    transaction_id: token,
    store: "HUAWEI_APP_GALLERY",
    purchase_time: t,
    provider_response: stores.huaweiOrderAnswer(token, "gems_100"),
    // purchaseType 0: the sandbox.
    environment: "SANDBOX",
  };

  for (let dry = 0; dry < 2; dry++) {
    const { validated_purchases } = await client.validatePurchaseHuawei(me, data, signature, false);
    assert.equal(validated_purchases.length, 1);
    check(validated_purchases[0], expected, { stored: false });
  }
  assert.deepEqual(await allPurchases(me), []);

  const [stored] = (await client.validatePurchaseHuawei(me, data, signature)).validated_purchases;
  const first = check(stored, expected, { stored: true, since });
  const [replay] = (await client.validatePurchaseHuawei(me, data, signature)).validated_purchases;
  assert.equal(check(replay, { ...expected, seen_before: true }, { stored: true, since }).create_time, first.create_time);

  // Production purchase data has no purchaseType.
  const real = uniq("htok");
  stores.huaweiKnown.add(real);
  const realData = huaweiPurchase(real, "gems_500", t, { purchaseType: null });
  const [production] = (await client.validatePurchaseHuawei(me, realData, stores.huaweiSign(realData))).validated_purchases;
  assert.deepEqual([production.transaction_id, production.environment], [real, "PRODUCTION"]);
  assert.deepEqual(transactionIds(await allPurchases(me)), [token, real].sort());
});

test("Huawei AppGallery: a forged signature and altered data are refused before asking Huawei; a token the Order service does not know is refused; nothing is stored", async () => {
  const me = await player();
  const t = Date.now() - 5000;
  const token = uniq("htok");
  stores.huaweiKnown.add(token);
  const data = huaweiPurchase(token, "gems_100", t);
  const verifies = stores.calls.huaweiVerify;

  let refused = await expectHttpError(client.validatePurchaseHuawei(me, data, stores.huaweiSign(data, { forged: true })), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "inAppPurchaseData invalid signature"]);
  const altered = data.replace('"productId":"gems_100"', '"productId":"gems_9999"');
  assert.notEqual(altered, data);
  refused = await expectHttpError(client.validatePurchaseHuawei(me, altered, stores.huaweiSign(data)), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "inAppPurchaseData invalid signature"]);
  assert.equal(stores.calls.huaweiVerify, verifies, "refused before asking the Order service");

  const unknown = huaweiPurchase(uniq("htok"), "gems_100", t);
  refused = await expectHttpError(client.validatePurchaseHuawei(me, unknown, stores.huaweiSign(unknown)), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [FAILED_PRECONDITION, "Invalid Receipt. Code: 5"]);

  refused = await expectHttpError(client.validatePurchaseHuawei(me, data, ""), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Signature cannot be empty."]);
  assert.deepEqual(await allPurchases(me), []);
  // The genuine signature over the same data: new.
  const [purchase] = (await client.validatePurchaseHuawei(me, data, stores.huaweiSign(data))).validated_purchases;
  assert.deepEqual([purchase.transaction_id, purchase.seen_before], [token, undefined]);
});

test("Facebook Instant: a payment's signed request is checked with the app secret; persist false stores nothing; stored once, then seen_before", async () => {
  const since = Date.now();
  const me = await player();
  const secs = Math.floor(Date.now() / 1000) - 10;
  const token = uniq("fbtok");
  const payment = facebookPayment(token, "gems_100", secs);
  const signedRequest = facebookSignedRequest(payment);
  const expected = {
    user_id: me.user_id,
    product_id: "gems_100",
    transaction_id: token,
    store: "FACEBOOK_INSTANT_STORE",
    purchase_time: secs * 1000,
    provider_response: payment,
    environment: "PRODUCTION",
  };

  for (let dry = 0; dry < 2; dry++) {
    const { validated_purchases } = await client.validatePurchaseFacebookInstant(me, signedRequest, false);
    assert.equal(validated_purchases.length, 1);
    check(validated_purchases[0], expected, { stored: false });
    // The provider response is the signed payload's own text.
    assert.equal(validated_purchases[0].provider_response, JSON.stringify(payment));
  }
  assert.deepEqual(await allPurchases(me), []);

  const [stored] = (await client.validatePurchaseFacebookInstant(me, signedRequest)).validated_purchases;
  const first = check(stored, expected, { stored: true, since });
  const [replay] = (await client.validatePurchaseFacebookInstant(me, signedRequest)).validated_purchases;
  assert.equal(check(replay, { ...expected, seen_before: true }, { stored: true, since }).create_time, first.create_time);
  assert.deepEqual(transactionIds(await allPurchases(me)), [token]);
});

test("Facebook Instant: a bad HMAC, a payload swapped under a genuine signature and a malformed request are refused and store nothing", async () => {
  const me = await player();
  const secs = Math.floor(Date.now() / 1000) - 10;
  const token = uniq("fbtok");
  const payment = facebookPayment(token, "gems_100", secs);

  let refused = await expectHttpError(client.validatePurchaseFacebookInstant(me, facebookSignedRequest(payment, "not-the-app-secret")), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "signedRequest verification failed"]);
  const [signature] = facebookSignedRequest(facebookPayment(token, "gems_1", secs)).split(".");
  const [, payload] = facebookSignedRequest(payment).split(".");
  refused = await expectHttpError(client.validatePurchaseFacebookInstant(me, `${signature}.${payload}`), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "signedRequest verification failed"]);
  refused = await expectHttpError(client.validatePurchaseFacebookInstant(me, "no-dot-here"), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Invalid Receipt. invalid signedRequest format."]);

  assert.deepEqual(await allPurchases(me), []);
  const [purchase] = (await client.validatePurchaseFacebookInstant(me, facebookSignedRequest(payment))).validated_purchases;
  assert.deepEqual([purchase.transaction_id, purchase.seen_before], [token, undefined]);
});

test("a store that is not configured answers Nakama's FailedPrecondition, and no store is asked", async () => {
  const bare = await startServer();
  try {
    const other = clientFor(bare);
    const me = await other.authenticateDevice(uniq("device"), true);
    const t = Date.now() - 5000;
    const receipt = appleReceipt();
    stores.addReceipt(receipt, { inApp: [receiptItem(appleTransactionId(), "gems_100", t)] });
    const gtok = uniq("gtok");
    stores.addGoogleProduct(gtok, "gems_100", { purchaseMs: t });
    const htok = uniq("htok");
    stores.huaweiKnown.add(htok);
    const data = huaweiPurchase(htok, "gems_100", t);
    const calls = { ...stores.calls };
    // Genuine proofs, every one; asked one at a time.
    const attempts = [
      ["Apple", () => other.validatePurchaseApple(me, receipt)],
      ["Apple", () => other.validateSubscriptionApple(me, receipt)],
      ["Google", () => other.validatePurchaseGoogle(me, googleReceipt("gems_100", gtok, t))],
      ["Google", () => other.validateSubscriptionGoogle(me, googleReceipt("gems_100", gtok, t))],
      ["Huawei", () => other.validatePurchaseHuawei(me, data, stores.huaweiSign(data))],
      ["Facebook Instant", () => other.validatePurchaseFacebookInstant(me, facebookSignedRequest(facebookPayment(uniq("fbtok"), "gems_100", t / 1000)))],
    ];
    for (const [store, attempt] of attempts) {
      const { body } = await expectHttpError(attempt(), 400);
      assert.deepEqual([body.code, body.message], [FAILED_PRECONDITION, `${store} IAP is not configured.`]);
    }
    assert.deepEqual(stores.calls, calls, "no store was asked");
    const { status, body } = await purchasePage(me, "", bare);
    assert.deepEqual([status, body], [200, {}]);
  } finally {
    await bare.stop();
  }
});

test("subscriptions: Apple and Google validate as active until their expiry; getSubscription finds each by product; listSubscriptions pages newest first with working cursors", async () => {
  const since = Date.now();
  const me = await player();
  const now = Date.now();

  // An app receipt with two periods of one subscription: the later one counts.
  const original = appleTransactionId();
  const renewal = appleTransactionId();
  const receipt = appleReceipt();
  stores.addReceipt(receipt, {
    latest: [
      receiptPeriod(original, original, "monthly", now - 3 * HOUR, now - HOUR, now - 3 * HOUR),
      receiptPeriod(renewal, original, "monthly", now - HOUR, now + 30 * 24 * HOUR, now - 3 * HOUR),
    ],
  });
  const monthly = {
    user_id: me.user_id,
    product_id: "monthly",
    original_transaction_id: original,
    purchase_time: now - 3 * HOUR,
    environment: "PRODUCTION",
    expiry_time: now + 30 * 24 * HOUR,
    refund_time: 0,
    provider_response: stores.receiptAnswer(receipt),
    active: true,
  };
  const apple = await client.validateSubscriptionApple(me, receipt);
  const appleFirst = check(apple.validated_subscription, monthly, { stored: true, since });
  // Validated again: the same record.
  const again = await client.validateSubscriptionApple(me, receipt);
  assert.equal(check(again.validated_subscription, monthly, { stored: true, since }).create_time, appleFirst.create_time);

  // A Google Play subscription (a licence tester's: testPurchase is set).
  const token = uniq("gsub");
  const start = now - 2 * HOUR;
  const expiry = now + HOUR;
  const answer = stores.setGoogleSubscription(token, "vip", { startTime: new Date(start).toISOString(), expiryTime: new Date(expiry).toISOString() });
  const vip = {
    user_id: me.user_id,
    product_id: "vip",
    original_transaction_id: token,
    store: "GOOGLE_PLAY_STORE",
    purchase_time: start,
    environment: "SANDBOX",
    expiry_time: expiry,
    refund_time: 0,
    provider_response: answer,
    active: true,
  };
  const google = await client.validateSubscriptionGoogle(me, googleReceipt("vip", token, start));
  check(google.validated_subscription, vip, { stored: true, since });

  // By product.
  check(await client.getSubscription(me, "monthly"), monthly, { stored: true, since });
  check(await client.getSubscription(me, "vip"), vip, { stored: true, since });
  const { body: missing } = await expectHttpError(client.getSubscription(me, "weekly"), 404);
  assert.deepEqual([missing.code, missing.message], [GRPC.NOT_FOUND, "subscription not found"]);
  const stranger = await player();
  const { body: notTheirs } = await expectHttpError(client.getSubscription(stranger, "monthly"), 404);
  assert.equal(notTheirs.code, GRPC.NOT_FOUND);

  // Listed one by one, newest purchase first: the Google one (two hours ago), then the Apple one.
  const first = await client.listSubscriptions(me, undefined, 1);
  assert.equal(first.validated_subscriptions.length, 1);
  check(first.validated_subscriptions[0], vip, { stored: true, since });
  assert.equal(typeof first.cursor, "string");
  assert.equal(first.prev_cursor, undefined, "the first page has no previous one");
  const second = await client.listSubscriptions(me, first.cursor, 1);
  assert.equal(second.validated_subscriptions.length, 1);
  check(second.validated_subscriptions[0], monthly, { stored: true, since });
  assert.equal(second.cursor, undefined, "the last page");
  assert.equal(typeof second.prev_cursor, "string");
  const back = await client.listSubscriptions(me, second.prev_cursor, 1);
  assert.deepEqual(back.validated_subscriptions.map((s) => s.product_id), ["vip"]);
  assert.equal(typeof back.cursor, "string");
  assert.equal(back.prev_cursor, undefined);
  const all = await client.listSubscriptions(me);
  assert.deepEqual(all.validated_subscriptions.map((s) => s.product_id), ["vip", "monthly"]);
  assert.deepEqual([all.cursor, all.prev_cursor], [undefined, undefined]);
  // Nobody else's.
  assert.deepEqual(await client.listSubscriptions(stranger, undefined, 10), {});

  // A cursor is its player's; a limit is 1-100.
  let refused = await expectHttpError(client.listSubscriptions(stranger, first.cursor, 1), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Invalid cursor."]);
  refused = await expectHttpError(client.listSubscriptions(me, undefined, 101), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Invalid limit - limit must be between 1 and 100."]);

  // A subscription Google does not know.
  refused = await expectHttpError(client.validateSubscriptionGoogle(me, googleReceipt("vip", uniq("gsub"), start)), 400);
  assert.deepEqual([refused.body.code, refused.body.message], [GRPC.INVALID_ARGUMENT, "Invalid Receipt. Google Play does not know this purchase (HTTP 404)."]);
  assert.equal((await client.listSubscriptions(me)).validated_subscriptions.length, 2);
});

test("subscriptions: an expired one validates as not active (left out, as Nakama's gateway does) and reads back so; persist false stores nothing", async () => {
  const since = Date.now();
  const me = await player();
  const now = Date.now();

  const original = appleTransactionId();
  const receipt = appleReceipt();
  stores.addReceipt(receipt, { sandbox: true, latest: [receiptPeriod(original, original, "weekly", now - 8 * 24 * HOUR, now - 24 * HOUR)] });
  const weekly = {
    user_id: me.user_id,
    product_id: "weekly",
    original_transaction_id: original,
    purchase_time: now - 8 * 24 * HOUR,
    environment: "SANDBOX",
    expiry_time: now - 24 * HOUR,
    refund_time: 0,
    provider_response: stores.receiptAnswer(receipt),
  };
  check((await client.validateSubscriptionApple(me, receipt)).validated_subscription, weekly, { stored: true, since });
  check(await client.getSubscription(me, "weekly"), weekly, { stored: true, since });

  const token = uniq("gsub");
  const start = now - 40 * 24 * HOUR;
  const expiry = now - 10 * 24 * HOUR;
  const answer = stores.setGoogleSubscription(token, "season", { startTime: new Date(start).toISOString(), expiryTime: new Date(expiry).toISOString(), test: false });
  const season = {
    user_id: me.user_id,
    product_id: "season",
    original_transaction_id: token,
    store: "GOOGLE_PLAY_STORE",
    purchase_time: start,
    environment: "PRODUCTION",
    expiry_time: expiry,
    refund_time: 0,
    provider_response: answer,
  };
  const seasonReceipt = googleReceipt("season", token, start);
  // persist false answers it and stores nothing.
  check((await client.validateSubscriptionGoogle(me, seasonReceipt, false)).validated_subscription, season, { stored: false });
  assert.deepEqual((await client.listSubscriptions(me)).validated_subscriptions.map((s) => s.product_id), ["weekly"]);
  const { body } = await expectHttpError(client.getSubscription(me, "season"), 404);
  assert.equal(body.code, GRPC.NOT_FOUND);

  check((await client.validateSubscriptionGoogle(me, seasonReceipt)).validated_subscription, season, { stored: true, since });
  check(await client.getSubscription(me, "season"), season, { stored: true, since });
  const listed = (await client.listSubscriptions(me)).validated_subscriptions;
  // Newest purchase first: the weekly (eight days ago), then the season (forty days ago).
  assert.deepEqual(listed.map((s) => [s.product_id, s.active]), [["weekly", undefined], ["season", undefined]]);
});

test("GET /v2/iap/purchase lists the player's purchases of every store newest first, in pages with working cursors", async () => {
  const since = Date.now();
  const [me, other] = [await player(), await player()];
  const base = Math.floor(Date.now() / 1000) * 1000 - 60_000;

  const appleId = appleTransactionId();
  const receipt = appleReceipt();
  stores.addReceipt(receipt, { inApp: [receiptItem(appleId, "gems_100", base)] });
  await client.validatePurchaseApple(me, receipt);
  const gtok = uniq("gtok");
  const googleAnswer = stores.addGoogleProduct(gtok, "gems_200", { purchaseMs: base + 1000 });
  await client.validatePurchaseGoogle(me, googleReceipt("gems_200", gtok, base + 1000));
  const htok = uniq("htok");
  stores.huaweiKnown.add(htok);
  const data = huaweiPurchase(htok, "gems_300", base + 2000);
  await client.validatePurchaseHuawei(me, data, stores.huaweiSign(data));
  const ftok = uniq("fbtok");
  const payment = facebookPayment(ftok, "gems_400", (base + 3000) / 1000);
  await client.validatePurchaseFacebookInstant(me, facebookSignedRequest(payment));
  // Someone else's purchase is not listed.
  const otherToken = uniq("fbtok");
  await client.validatePurchaseFacebookInstant(other, facebookSignedRequest(facebookPayment(otherToken, "gems_400", (base + 4000) / 1000)));

  const expected = [
    { user_id: me.user_id, product_id: "gems_400", transaction_id: ftok, store: "FACEBOOK_INSTANT_STORE", purchase_time: base + 3000, refund_time: 0, provider_response: payment, environment: "PRODUCTION" },
    { user_id: me.user_id, product_id: "gems_300", transaction_id: htok, store: "HUAWEI_APP_GALLERY", purchase_time: base + 2000, refund_time: 0, provider_response: stores.huaweiOrderAnswer(htok, "gems_300"), environment: "SANDBOX" },
    { user_id: me.user_id, product_id: "gems_200", transaction_id: gtok, store: "GOOGLE_PLAY_STORE", purchase_time: base + 1000, refund_time: 0, provider_response: googleAnswer, environment: "SANDBOX" },
    { user_id: me.user_id, product_id: "gems_100", transaction_id: appleId, purchase_time: base, refund_time: 0, provider_response: stores.receiptAnswer(receipt), environment: "PRODUCTION" },
  ];

  const { status, body } = await purchasePage(me);
  assert.equal(status, 200, JSON.stringify(body));
  assert.deepEqual(Object.keys(body), ["validated_purchases"], "one page: no cursors");
  assert.equal(body.validated_purchases.length, 4);
  body.validated_purchases.forEach((p, i) => check(p, expected[i], { stored: true, since }));

  const first = await purchasePage(me, "?limit=3");
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.validated_purchases.map((p) => p.transaction_id), [ftok, htok, gtok]);
  assert.equal(typeof first.body.cursor, "string");
  assert.equal(first.body.prev_cursor, undefined);
  const second = await purchasePage(me, `?limit=3&cursor=${encodeURIComponent(first.body.cursor)}`);
  assert.equal(second.status, 200);
  assert.deepEqual(second.body.validated_purchases.map((p) => p.transaction_id), [appleId]);
  check(second.body.validated_purchases[0], expected[3], { stored: true, since });
  assert.equal(second.body.cursor, undefined, "the last page");
  const back = await purchasePage(me, `?limit=3&cursor=${encodeURIComponent(second.body.prev_cursor)}`);
  assert.deepEqual(back.body.validated_purchases.map((p) => p.transaction_id), [ftok, htok, gtok]);

  const theirs = await purchasePage(other);
  assert.deepEqual(theirs.body.validated_purchases.map((p) => [p.transaction_id, p.user_id]), [[otherToken, other.user_id]]);

  // A cursor is its listing's and its player's; the limit is 1-100; a session is needed.
  for (const [session, query, message] of [
    [other, `?cursor=${encodeURIComponent(first.body.cursor)}`, "Invalid cursor."],
    [me, "?cursor=not-a-cursor", "Invalid cursor."],
    [me, "?limit=101", "Invalid limit - limit must be between 1 and 100."],
    [me, "?limit=0", "Invalid limit - limit must be between 1 and 100."],
  ]) {
    const refused = await purchasePage(session, query);
    assert.deepEqual([refused.status, refused.body.code, refused.body.message], [400, GRPC.INVALID_ARGUMENT, message], query);
  }
  const anonymous = await purchasePage(null);
  assert.deepEqual([anonymous.status, anonymous.body.code], [401, GRPC.UNAUTHENTICATED]);
});

test(
  "times are written as Nakama's gateway (protojson) writes them: UTC with Z and 0, 3, 6 or 9 fractional digits",
  async () => {
    const me = await player();
    // A time with milliseconds, and one on the second.
    const withMillis = Math.floor(Date.now() / 1000) * 1000 - 30_750;
    const onTheSecond = withMillis - 250 - 60_000;
    const gtok = uniq("gtok");
    stores.addGoogleProduct(gtok, "gems_100", { purchaseMs: withMillis });
    const [purchase] = (await client.validatePurchaseGoogle(me, googleReceipt("gems_100", gtok, withMillis))).validated_purchases;
    const protojson = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z$/;
    assert.equal(purchase.purchase_time, new Date(withMillis).toISOString());
    // Never refunded: a validation leaves the refund time out, as Nakama's does.
    assert.equal(purchase.refund_time, undefined);
    for (const field of ["create_time", "update_time"]) assert.match(purchase[field], protojson, field);
    const token = uniq("gsub");
    const product = uniq("product");
    stores.setGoogleSubscription(token, product, { startTime: new Date(onTheSecond).toISOString(), expiryTime: new Date(onTheSecond + HOUR).toISOString() });
    const { validated_subscription: sub } = await client.validateSubscriptionGoogle(me, googleReceipt(product, token, onTheSecond));
    assert.equal(sub.purchase_time, new Date(onTheSecond).toISOString().replace(".000Z", "Z"));
    assert.equal(sub.expiry_time, new Date(onTheSecond + HOUR).toISOString().replace(".000Z", "Z"));
    const { body } = await purchasePage(me);
    assert.equal(body.validated_purchases[0].purchase_time, new Date(withMillis).toISOString());
  },
);
