// Evaluated in every VM before the module bundle: what InitModule is called with. The host
// functions are `__muster_host(name, argsJson)` (answers JSON text, or throws) and
// `__muster_log(level, text)`.
(function (global) {
  "use strict";
  const registry = {
    rpc: Object.create(null),
    match: Object.create(null),
    before: Object.create(null),
    after: Object.create(null),
    rtBefore: Object.create(null),
    rtAfter: Object.create(null),
    matchmakerMatched: null,
    matched: Object.create(null),
    // The scheduler's hooks, by event: leaderboardReset, tournamentEnd, tournamentReset.
    schedule: Object.create(null),
    // registerEvent's function, under the id "event": called with each nk.event.
    event: Object.create(null),
  };
  Object.defineProperty(global, "__muster_registry", { value: registry });

  const named = (kind, table) => (id, fn) => {
    if (typeof id !== "string" || id === "") throw new TypeError(kind + " id must be a non-empty string");
    if (typeof fn !== "function") throw new TypeError(kind + " '" + id + "' needs a function");
    table[id] = fn;
  };
  const initializer = {
    registerRpc: named("rpc", registry.rpc),
    registerMatch(name, handlers) {
      if (typeof name !== "string" || name === "") throw new TypeError("match name must be a non-empty string");
      if (handlers === null || typeof handlers !== "object") throw new TypeError("match '" + name + "' needs its handlers");
      registry.match[name] = handlers;
    },
    registerMatchmakerMatched(fn) {
      if (typeof fn !== "function") throw new TypeError("registerMatchmakerMatched needs a function");
      registry.matchmakerMatched = fn;
      registry.matched.matched = fn;
    },
    registerRtBefore: named("realtime before hook", registry.rtBefore),
    registerRtAfter: named("realtime after hook", registry.rtAfter),
    registerLeaderboardReset: (fn) => named("leaderboard reset hook", registry.schedule)("leaderboardReset", fn),
    registerTournamentEnd: (fn) => named("tournament end hook", registry.schedule)("tournamentEnd", fn),
    registerTournamentReset: (fn) => named("tournament reset hook", registry.schedule)("tournamentReset", fn),
    // The stores' server notifications, kept with the scheduler's hooks (events the server
    // raises, not calls a client makes).
    registerPurchaseNotificationApple: (fn) => named("purchase notification hook", registry.schedule)("purchaseNotificationApple", fn),
    registerPurchaseNotificationGoogle: (fn) => named("purchase notification hook", registry.schedule)("purchaseNotificationGoogle", fn),
    registerSubscriptionNotificationApple: (fn) => named("subscription notification hook", registry.schedule)("subscriptionNotificationApple", fn),
    registerSubscriptionNotificationGoogle: (fn) => named("subscription notification hook", registry.schedule)("subscriptionNotificationGoogle", fn),
    registerEvent: (fn) => named("event function", registry.event)("event", fn),
  };
  // Before and after hooks of Nakama's API calls, by the names Nakama gives them.
  const hooked = [
    "AddFriends", "AddGroupUsers", "AuthenticateApple", "AuthenticateCustom", "AuthenticateDevice",
    "AuthenticateEmail", "AuthenticateFacebook", "AuthenticateFacebookInstantGame", "AuthenticateGameCenter",
    "AuthenticateGoogle", "AuthenticateSteam", "BanGroupUsers", "BlockFriends", "CreateGroup", "DeleteAccount",
    "DeleteFriends", "DeleteGroup", "DeleteLeaderboardRecord", "DeleteNotifications", "DeleteStorageObjects",
    "DeleteTournamentRecord", "DemoteGroupUsers", "Event", "GetAccount", "GetMatchmakerStats", "GetUsers",
    "ImportFacebookFriends", "ImportSteamFriends", "JoinGroup", "JoinTournament", "KickGroupUsers", "LeaveGroup",
    "LinkApple", "LinkCustom", "LinkDevice", "LinkEmail", "LinkFacebook", "LinkFacebookInstantGame",
    "LinkGameCenter", "LinkGoogle", "LinkSteam", "ListChannelMessages", "ListFriends", "ListFriendsOfFriends",
    "ListGroupUsers", "ListGroups", "ListLeaderboardRecords", "ListLeaderboardRecordsAroundOwner", "ListMatches",
    "ListNotifications", "ListParties", "ListStorageObjects", "ListTournamentRecords",
    "ListTournamentRecordsAroundOwner", "ListTournaments", "ListUserGroups", "PromoteGroupUsers",
    "ReadStorageObjects", "SessionLogout", "SessionRefresh", "UnlinkApple", "UnlinkCustom", "UnlinkDevice", "UnlinkEmail",
    "UnlinkFacebook", "UnlinkFacebookInstantGame", "UnlinkGameCenter", "UnlinkGoogle", "UnlinkSteam",
    "UpdateAccount", "UpdateGroup", "ValidatePurchaseApple", "ValidatePurchaseGoogle", "ValidatePurchaseHuawei",
    "ValidateSubscriptionApple", "ValidateSubscriptionGoogle", "WriteLeaderboardRecord", "WriteStorageObjects",
    "WriteTournamentRecord",
  ];
  for (const name of hooked) {
    initializer["registerBefore" + name] = (fn) => named("before hook", registry.before)(name, fn);
    initializer["registerAfter" + name] = (fn) => named("after hook", registry.after)(name, fn);
  }
  // Registered and kept, but not called by Muster (it has no such event): a module that
  // registers them still loads.
  registry.unused = [];
  for (const name of [
    "registerShutdown",
    "registerStorageIndex", "registerStorageIndexFilter",
  ]) {
    initializer[name] = function () {
      registry.unused.push(name);
    };
  }
  // Any other register… of Nakama's (a newer hook, one of a call Muster does not serve) is kept
  // and never called, so that the module still loads; anything else is refused by name.
  const initializerWithRest = new Proxy(initializer, {
    get(target, name) {
      if (name in target || typeof name !== "string") return target[name];
      if (name.startsWith("register")) {
        return function () {
          registry.unused.push(name);
        };
      }
      return function () {
        throw { message: "initializer." + name + " is not supported by Muster", code: 12 };
      };
    },
  });
  Object.defineProperty(global, "__muster_initializer", { value: initializerWithRest });

  // The registrations by the global names of their functions (JSON), for another VM of this
  // module to take without running InitModule again; null when a registered function is not
  // a property of the global object (an inline function, or a top-level let/const).
  const tables = ["rpc", "before", "after", "rtBefore", "rtAfter", "matched", "schedule", "event"];
  Object.defineProperty(global, "__muster_registry_names", {
    value() {
      const names = new Map();
      for (const key of Object.getOwnPropertyNames(global)) {
        const desc = Object.getOwnPropertyDescriptor(global, key);
        if (desc && typeof desc.value === "function" && !names.has(desc.value)) names.set(desc.value, key);
      }
      const out = { tables: {}, match: {}, matchmakerMatched: null, unused: registry.unused.slice() };
      for (const table of tables) {
        out.tables[table] = {};
        for (const id of Object.keys(registry[table])) {
          const name = names.get(registry[table][id]);
          if (name === undefined) return null;
          out.tables[table][id] = name;
        }
      }
      for (const id of Object.keys(registry.match)) {
        const handlers = registry.match[id];
        const byName = {};
        for (const key of Object.keys(handlers)) {
          if (typeof handlers[key] !== "function") return null;
          const name = names.get(handlers[key]);
          if (name === undefined) return null;
          byName[key] = name;
        }
        out.match[id] = byName;
      }
      if (registry.matchmakerMatched !== null) {
        out.matchmakerMatched = names.get(registry.matchmakerMatched);
        if (out.matchmakerMatched === undefined) return null;
      }
      return JSON.stringify(out);
    },
  });
  Object.defineProperty(global, "__muster_restore", {
    value(text) {
      const saved = JSON.parse(text);
      for (const table of tables) {
        for (const id of Object.keys(saved.tables[table])) registry[table][id] = global[saved.tables[table][id]];
      }
      for (const id of Object.keys(saved.match)) {
        const handlers = {};
        for (const key of Object.keys(saved.match[id])) handlers[key] = global[saved.match[id][key]];
        registry.match[id] = handlers;
      }
      if (saved.matchmakerMatched !== null) registry.matchmakerMatched = global[saved.matchmakerMatched];
      for (const name of saved.unused) registry.unused.push(name);
    },
  });

  // Go's fmt verbs, as Nakama's logger takes them: %v %s %d %q %t %%.
  function format(template, args) {
    if (typeof template !== "string") return String(template);
    let next = 0;
    return template.replace(/%[vsdqt%]/g, (verb) => {
      if (verb === "%%") return "%";
      if (next >= args.length) return "%!" + verb[1] + "(MISSING)";
      const value = args[next++];
      switch (verb) {
        case "%q":
          return JSON.stringify(String(value));
        case "%d":
          return typeof value === "number" ? String(Math.trunc(value)) : "%!d(" + String(value) + ")";
        case "%t":
          return typeof value === "boolean" ? String(value) : "%!t(" + String(value) + ")";
        default:
          return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
      }
    });
  }
  const writeLog = __muster_log;
  const log = (level) => (template, ...args) => writeLog(level, format(template, args));
  const logger = { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
  Object.defineProperty(global, "__muster_logger", { value: logger });
  Object.defineProperty(global, "__muster_format", { value: format });

  // nk: the utilities (native, taking and giving ArrayBuffers), then each function the host
  // names, its arguments and answer as JSON.
  const nk = {};
  for (const name of Object.keys(__muster_util)) nk[name] = __muster_util[name];
  const host = __muster_host;
  for (const name of JSON.parse(host("__names", "[]"))) {
    nk[name] = (...args) => {
      const answer = host(name, JSON.stringify(args));
      return answer === "" ? undefined : JSON.parse(answer);
    };
  }
  // storageWriteRetry(keys, updateFn, maxRetries): read, let the module's function make the
  // writes (with the versions it read), write; a write refused on a version is tried again from
  // the read, at most maxRetries (0-10) more times — Nakama's loop, without its sleep between
  // tries (a script cannot wait).
  if (typeof nk.storageRead === "function") {
    nk.storageWriteRetry = function (keys, updateFn, maxRetries) {
      if (!Array.isArray(keys)) throw new TypeError("expects an array of keys");
      if (keys.length === 0) return [];
      if (typeof updateFn !== "function") throw new TypeError("expects a valid update function");
      const retries = Math.trunc(Number(maxRetries) || 0);
      if (retries < 0 || retries > 10) throw new TypeError("max retries must be a value between 0 and 10");
      for (let attempt = 0; attempt <= retries; attempt++) {
        const writes = updateFn(nk.storageRead(keys));
        if (writes == null) return [];
        if (!Array.isArray(writes)) throw new TypeError("expects a valid array of data");
        if (writes.length === 0) return [];
        try {
          return nk.storageWrite(writes);
        } catch (e) {
          if (!(e && typeof e.message === "string" && e.message.indexOf("version check failed") >= 0)) throw e;
        }
      }
      throw { message: "failed to write storage objects with retry: Storage write retries exhausted.", code: 13 };
    };
  }
  // A function of Nakama's nk that Muster does not have is refused by name (gRPC's
  // Unimplemented) when called, rather than failing as "not a function".
  const notForwarded = new Set(["then", "toJSON", "constructor", "prototype", "valueOf", "toString"]);
  const nkWithRefusals = new Proxy(nk, {
    get(target, name) {
      if (name in target || typeof name !== "string" || name.startsWith("__") || notForwarded.has(name)) {
        return target[name];
      }
      return function () {
        throw { message: "nk." + name + " is not supported by Muster", code: 12 };
      };
    },
  });
  Object.defineProperty(global, "__muster_nk", { value: nkWithRefusals });

  // An authoritative match's VM: the dispatcher, and the glue the server calls (a match's
  // context and state live here between calls).
  // The natives, held here: a call reaches them without a lookup on the global object.
  const dispatch = __muster_dispatch;
  const sessions = (presences) => {
    if (presences == null) return null;
    const ids = [];
    for (let i = 0; i < presences.length; i++) ids.push(String(presences[i] && presences[i].sessionId));
    return ids;
  };
  const broadcast = (opCode, data, presences, sender, reliable) =>
    dispatch(0, +opCode, data, sessions(presences), reliable !== false);
  const dispatcher = {
    broadcastMessage: broadcast,
    broadcastMessageDeferred: broadcast,
    matchKick(presences) {
      dispatch(1, 0, null, sessions(presences) || [], true);
    },
    matchLabelUpdate(label) {
      dispatch(2, 0, String(label), null, true);
    },
  };
  let current = null;
  const step = (name, tick, arg) => {
    const answer = current.handlers[name](current.ctx, logger, nk, dispatcher, tick, current.state, arg);
    // As Nakama: a handler that answers null ends the match.
    if (answer === null || answer === undefined) return false;
    current.state = answer.state;
    return true;
  };
  const match = {
    init(name, ctx, params) {
      const handlers = registry.match[name];
      if (!handlers) throw { message: "no match handler registered as " + JSON.stringify(name), code: 5 };
      for (const f of ["matchInit", "matchJoinAttempt", "matchJoin", "matchLeave", "matchLoop", "matchTerminate", "matchSignal"]) {
        if (typeof handlers[f] !== "function") throw new TypeError("match '" + name + "' has no " + f + " function");
      }
      const answer = handlers.matchInit(ctx, logger, nk, params || {});
      if (answer === null || typeof answer !== "object") throw new TypeError("matchInit must return { state, tickRate, label }");
      current = { handlers, ctx, state: answer.state, presences: Object.create(null) };
      return { tickRate: answer.tickRate, label: answer.label == null ? undefined : String(answer.label) };
    },
    joinAttempt(tick, presence, metadata) {
      const answer = current.handlers.matchJoinAttempt(current.ctx, logger, nk, dispatcher, tick, current.state, presence, metadata);
      if (answer === null || answer === undefined) return { accept: false };
      current.state = answer.state;
      return { accept: answer.accept === true, rejectMessage: answer.rejectMessage == null ? undefined : String(answer.rejectMessage) };
    },
    join(tick, presences) {
      for (const p of presences) current.presences[p.sessionId] = p;
      return step("matchJoin", tick, presences);
    },
    leave(tick, presences) {
      for (const p of presences) delete current.presences[p.sessionId];
      return step("matchLeave", tick, presences);
    },
    loop(tick, entries) {
      // Each message arrives as [session id, opCode, data, reliable, receiveTimeMs]; its sender
      // is the presence the session joined with.
      const presences = current.presences;
      const messages = new Array(entries.length);
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i];
        messages[i] = {
          sender: presences[e[0]] || { sessionId: e[0] },
          persistence: false,
          status: "",
          opCode: e[1],
          data: e[2],
          reliable: e[3],
          receiveTimeMs: e[4],
        };
      }
      return step("matchLoop", tick, messages);
    },
    terminate: (tick, grace) => step("matchTerminate", tick, grace),
    signal(tick, data) {
      const answer = current.handlers.matchSignal(current.ctx, logger, nk, dispatcher, tick, current.state, data);
      if (answer === null || answer === undefined) return "";
      current.state = answer.state;
      return answer.data == null ? "" : String(answer.data);
    },
    // The state as JSON for an operator (Nakama's console shows it so); undefined shows as null.
    state() {
      const text = JSON.stringify(current.state);
      return text === undefined ? "null" : text;
    },
  };
  Object.defineProperty(global, "__muster_match", { value: match });
  // The hot path's entry under an integer key (matches.rs's LOOP_GLUE_KEY): the server finds it
  // without hashing a name at every tick.
  Object.defineProperty(global, 1000001, { value: match.loop });
})(globalThis);
