use std::sync::Mutex;

use super::*;

/// A host with one `nk` function, `echo`, and `fail`, which refuses with code 9; logs kept.
#[derive(Default)]
struct TestHost {
    logs: Mutex<Vec<(String, String)>>,
}

impl Host for TestHost {
    fn names(&self) -> Vec<String> {
        vec!["echo".into(), "fail".into()]
    }

    fn call(&self, name: &str, args: serde_json::Value) -> Result<serde_json::Value, JsError> {
        match name {
            "echo" => Ok(args),
            _ => Err(JsError::new("not enough gold", 9)),
        }
    }

    fn log(&self, level: &str, message: &str) {
        self.logs
            .lock()
            .expect("logs")
            .push((level.into(), message.into()));
    }
}

const MODULE: &str = r#"
function rpcHello(ctx, logger, nk, payload) {
  const input = JSON.parse(payload || "{}");
  logger.info("hello %s, %d coins, vip %t, %q", ctx.username, 3.7, true, "x");
  return JSON.stringify({ hi: ctx?.username ?? "nobody", echoed: nk.echo(input.n)[0] });
}
function rpcPoor(ctx, logger, nk, payload) {
  nk.fail();
}
function rpcThrows(ctx, logger, nk, payload) {
  throw { message: "no such item", code: 5 };
}
function rpcSpins(ctx, logger, nk, payload) {
  for (;;) {}
}
function rpcHungry(ctx, logger, nk, payload) {
  const hoard = [];
  for (;;) hoard.push("x".repeat(1 << 16));
}
class Counter { #n = 0; next() { return ++this.#n; } }
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("hello", rpcHello);
  initializer.registerRpc("poor", rpcPoor);
  initializer.registerRpc("throws", rpcThrows);
  initializer.registerRpc("spins", rpcSpins);
  initializer.registerRpc("hungry", rpcHungry);
  initializer.registerRpc("count", () => String(new Counter().next()));
  logger.info("module loaded");
}
"#;

fn load(limits: Limits) -> (Vm, Registrations, Arc<TestHost>) {
    let host = Arc::new(TestHost::default());
    let (vm, registered) = Vm::load("game.js", MODULE, host.clone(), limits).expect("loads");
    (vm, registered, host)
}

#[test]
fn init_module_registers_rpcs_and_a_call_answers_with_logs_in_go_verbs() {
    let (vm, registered, host) = load(Limits::default());
    assert_eq!(
        registered.rpcs,
        ["count", "hello", "hungry", "poor", "spins", "throws"]
    );
    let answer = vm
        .call_rpc(
            "hello",
            &serde_json::json!({ "username": "ana" }),
            r#"{"n": 7}"#,
        )
        .expect("answers");
    assert_eq!(answer, r#"{"hi":"ana","echoed":7}"#);
    assert_eq!(
        vm.call_rpc("count", &serde_json::json!({}), "")
            .expect("count"),
        "1"
    );
    let logs = host.logs.lock().expect("logs").clone();
    assert_eq!(
        logs,
        [
            ("info".to_string(), "module loaded".to_string()),
            (
                "info".to_string(),
                r#"hello ana, 3 coins, vip true, "x""#.to_string()
            )
        ]
    );
}

#[test]
fn thrown_errors_keep_their_code() {
    let (vm, _, _) = load(Limits::default());
    let error = vm
        .call_rpc("throws", &serde_json::json!({}), "")
        .expect_err("throws");
    assert_eq!((error.code, error.message.as_str()), (5, "no such item"));
    let error = vm
        .call_rpc("poor", &serde_json::json!({}), "")
        .expect_err("refused by the host");
    assert_eq!(error.code, 9, "{error:?}");
    assert!(error.message.contains("not enough gold"), "{error:?}");
    let missing = vm
        .call_rpc("nope", &serde_json::json!({}), "")
        .expect_err("unknown");
    assert_eq!(missing.code, 5);
}

#[test]
fn a_loop_is_interrupted_at_the_time_limit_and_the_vm_still_answers() {
    let limits = Limits {
        call_timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    let (vm, _, _) = load(limits);
    let started = Instant::now();
    let error = vm
        .call_rpc("spins", &serde_json::json!({}), "")
        .expect_err("interrupted");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(error.code, 4, "{error:?}");
    assert!(error.message.contains("100 ms"), "{error:?}");
    assert_eq!(
        vm.call_rpc("count", &serde_json::json!({}), "")
            .expect("count"),
        "1"
    );
}

#[test]
fn memory_past_the_limit_fails_the_call_not_the_process() {
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    let (vm, _, _) = load(limits);
    let error = vm
        .call_rpc("hungry", &serde_json::json!({}), "")
        .expect_err("out of memory");
    assert_eq!(error.code, INTERNAL, "{error:?}");
    assert!(error.message.contains("out of memory"), "{error:?}");
}

#[test]
fn a_module_that_fails_to_load_names_its_error_and_line() {
    let host: Arc<dyn Host> = Arc::new(TestHost::default());
    let broken = "function InitModule(ctx, logger, nk, initializer) {\n  initializer.registerRpc(\"x\", nope);\n}\n";
    let Err(error) = Vm::load("broken.js", broken, host.clone(), Limits::default()) else {
        panic!("loads");
    };
    assert!(error.message.contains("nope"), "{error:?}");
    assert!(error.message.contains(":2"), "the line: {error:?}");
    let Err(error) = Vm::load("syntax.js", "function (", host, Limits::default()) else {
        panic!("loads");
    };
    assert!(error.message.starts_with("syntax.js"), "{error:?}");
}

const UTILITIES: &str = r#"
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("utils", () => {
    const bytes = nk.stringToBinary("héllo");
    return JSON.stringify({
      b64: nk.base64Encode("hi?"),
      b64NoPad: nk.base64Encode("hi?!", false),
      b64Url: nk.base64UrlEncode(bytes),
      back: nk.binaryToString(nk.base64Decode(nk.base64Encode(bytes))),
      hex: nk.base16Encode(new Uint8Array([0, 255, 16])),
      hexBack: new Uint8Array(nk.base16Decode("00ff10")).join(","),
      sha256: nk.sha256Hash("abc"),
      md5: nk.md5Hash("abc"),
      hmac: nk.base16Encode(nk.hmacSha256Hash("The quick brown fox jumps over the lazy dog", "key")),
      random: nk.secureRandomBytes(16).byteLength,
      next: nk.cronNext("0 12 * * *", Date.UTC(2026, 0, 1, 13, 0, 0) / 1000),
      prev: nk.cronPrev("0 12 * * *", Date.UTC(2026, 0, 1, 13, 0, 0) / 1000),
    });
  });
  initializer.registerRpc("badHex", () => nk.base16Decode("zz"));
}
"#;

#[test]
fn utilities_encode_hash_and_schedule_as_nakama_names_them() {
    let host: Arc<dyn Host> = Arc::new(TestHost::default());
    let (vm, _) = Vm::load("utils.js", UTILITIES, host, Limits::default()).expect("loads");
    let answer: serde_json::Value = serde_json::from_str(
        &vm.call_rpc("utils", &serde_json::json!({}), "")
            .expect("answers"),
    )
    .expect("json");
    assert_eq!(answer["b64"], "aGk/");
    assert_eq!(answer["b64NoPad"], "aGk/IQ");
    assert_eq!(answer["b64Url"], "aMOpbGxv");
    assert_eq!(answer["back"], "héllo");
    assert_eq!(answer["hex"], "00ff10");
    assert_eq!(answer["hexBack"], "0,255,16");
    assert_eq!(
        answer["sha256"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(answer["md5"], "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(
        answer["hmac"],
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    );
    assert_eq!(answer["random"], 16);
    let noon = |day: i64| (1_767_225_600 + day * 86_400 + 12 * 3600) as f64;
    assert_eq!(answer["next"].as_f64(), Some(noon(1)));
    assert_eq!(answer["prev"].as_f64(), Some(noon(0)));
    let error = vm
        .call_rpc("badHex", &serde_json::json!({}), "")
        .expect_err("refused");
    assert_eq!(error.code, 3, "{error:?}");
}

const MATCH: &str = r#"
const matchInit = (ctx, logger, nk, params) => ({
  state: { seen: 0, id: ctx.matchId },
  tickRate: params.rate,
  label: JSON.stringify({ mode: params.mode }),
});
const matchJoinAttempt = (ctx, logger, nk, dispatcher, tick, state, presence, metadata) =>
  presence.username === "mallory"
    ? { state, accept: false, rejectMessage: "no cheaters" }
    : { state, accept: true };
function matchJoin(ctx, logger, nk, dispatcher, tick, state, presences) {
  dispatcher.broadcastMessage(1, "welcome " + presences.map((p) => p.username).join(","), presences);
  return { state };
}
const matchLeave = (ctx, logger, nk, dispatcher, tick, state, presences) => ({ state });
function matchLoop(ctx, logger, nk, dispatcher, tick, state, messages) {
  for (const m of messages) {
    state.seen++;
    if (nk.binaryToString(m.data) === "quit") return null;
    dispatcher.broadcastMessage(m.opCode + 1, m.data, null, m.sender, false);
    if (m.opCode === 9) dispatcher.matchKick([m.sender]);
  }
  dispatcher.matchLabelUpdate(JSON.stringify({ seen: state.seen }));
  return { state };
}
const matchTerminate = (ctx, logger, nk, dispatcher, tick, state, grace) => {
  dispatcher.broadcastMessage(99, "bye in " + grace);
  return { state };
};
const matchSignal = (ctx, logger, nk, dispatcher, tick, state, data) =>
  ({ state, data: data + " " + state.seen + " " + state.id });
function InitModule(ctx, logger, nk, initializer) {
  initializer.registerMatch("duel", { matchInit, matchJoinAttempt, matchJoin, matchLeave, matchLoop, matchTerminate, matchSignal });
}
"#;

fn presence(name: &str) -> Presence {
    Presence {
        user_id: format!("u-{name}"),
        session_id: format!("s-{name}"),
        username: name.into(),
        node: "n1".into(),
    }
}

#[test]
fn a_match_keeps_its_state_and_dispatches_between_calls() {
    let host: Arc<dyn Host> = Arc::new(TestHost::default());
    let (vm, registered) = Vm::load("match.js", MATCH, host, Limits::default()).expect("loads");
    assert_eq!(registered.matches, ["duel"]);
    let init = vm
        .match_init(
            "duel",
            &serde_json::json!({ "matchId": "m1" }),
            &serde_json::json!({ "rate": 15, "mode": "ranked" }),
        )
        .expect("init");
    assert_eq!(init.tick_rate, Some(15));
    assert_eq!(init.label.as_deref(), Some(r#"{"mode":"ranked"}"#));
    let meta = serde_json::json!({});
    assert_eq!(
        vm.match_join_attempt(1, &presence("mallory"), &meta)
            .expect("called"),
        Err("no cheaters".to_string())
    );
    assert_eq!(
        vm.match_join_attempt(1, &presence("ana"), &meta)
            .expect("called"),
        Ok(())
    );
    assert!(vm
        .match_presences(false, 1, &[presence("ana")])
        .expect("join"));
    assert_eq!(
        vm.take_dispatches(),
        [Dispatch::Broadcast {
            op_code: 1,
            data: b"welcome ana".to_vec(),
            to: Some(vec!["s-ana".into()]),
            reliable: true
        }]
    );
    let message = |op_code, data: &str| MatchMessage {
        sender: "s-ana".into(),
        op_code,
        data: data.as_bytes().to_vec(),
        reliable: true,
        receive_time_ms: 0,
    };
    assert!(vm
        .match_loop(2, &[message(4, "left"), message(9, "cheat")])
        .expect("loop"));
    assert_eq!(
        vm.take_dispatches(),
        [
            Dispatch::Broadcast {
                op_code: 5,
                data: b"left".to_vec(),
                to: None,
                reliable: false
            },
            Dispatch::Broadcast {
                op_code: 10,
                data: b"cheat".to_vec(),
                to: None,
                reliable: false
            },
            Dispatch::Kick(vec!["s-ana".into()]),
            Dispatch::Label(r#"{"seen":2}"#.into()),
        ]
    );
    assert_eq!(vm.match_signal(3, "hello").expect("signal"), "hello 2 m1");
    // The state an operator sees (the console): what the handlers last answered, as JSON.
    let state: serde_json::Value =
        serde_json::from_str(&vm.match_state().expect("state")).expect("JSON");
    assert_eq!(state, serde_json::json!({"seen": 2, "id": "m1"}));
    assert!(!vm.match_loop(4, &[message(1, "quit")]).expect("loop"));
    vm.take_dispatches();
    vm.match_terminate(5, 30).expect("terminate");
    assert_eq!(
        vm.take_dispatches(),
        [Dispatch::Broadcast {
            op_code: 99,
            data: b"bye in 30".to_vec(),
            to: None,
            reliable: true
        }]
    );
}

#[test]
fn a_match_with_a_missing_handler_does_not_start() {
    let host: Arc<dyn Host> = Arc::new(TestHost::default());
    let module = MATCH.replace("matchSignal })", "})");
    let (vm, _) = Vm::load("match.js", &module, host, Limits::default()).expect("loads");
    let error = vm
        .match_init("duel", &serde_json::json!({}), &serde_json::json!({}))
        .expect_err("refused");
    assert!(error.message.contains("matchSignal"), "{error:?}");
    let error = vm
        .match_init("nope", &serde_json::json!({}), &serde_json::json!({}))
        .expect_err("refused");
    assert_eq!(error.code, 5, "{error:?}");
}
