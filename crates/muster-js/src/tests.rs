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
