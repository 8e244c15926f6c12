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
    },
    registerRtBefore: named("realtime before hook", registry.rtBefore),
    registerRtAfter: named("realtime after hook", registry.rtAfter),
  };
  Object.defineProperty(global, "__muster_initializer", { value: initializer });

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
  const log = (level) => (template, ...args) => __muster_log(level, format(template, args));
  const logger = { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
  Object.defineProperty(global, "__muster_logger", { value: logger });
  Object.defineProperty(global, "__muster_format", { value: format });

  // nk: each function the host names, its arguments and answer as JSON.
  const nk = {};
  for (const name of JSON.parse(__muster_host("__names", "[]"))) {
    nk[name] = (...args) => {
      const answer = __muster_host(name, JSON.stringify(args));
      return answer === "" ? undefined : JSON.parse(answer);
    };
  }
  Object.defineProperty(global, "__muster_nk", { value: nk });
})(globalThis);
