//! What one `matchLoop` call costs in a VM, apart from any server: the arena game of
//! bench/runtime/index.js ticked with two players' inputs. With VMS above 1, that many matches
//! (each in a VM of its own, as the server runs them) are ticked in turn, so each VM is cold at
//! its tick as amid a server's many matches. Prints JSON (ns per tick).
//!
//! `cargo run --release -p muster-js --example loop_cost [TICKS] [VMS]`

use std::sync::Arc;
use std::time::Instant;

use muster_js::{Host, JsError, Limits, MatchMessage, Presence, Vm};

struct NoHost;

impl Host for NoHost {
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    fn call(&self, name: &str, _: serde_json::Value) -> Result<serde_json::Value, JsError> {
        Err(JsError::new(format!("nk.{name} is not here"), 12))
    }
    fn log(&self, _: &str, _: &str) {}
}

fn main() {
    let ticks: u64 = std::env::args()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or(200_000);
    let vms: usize = std::env::args()
        .nth(2)
        .and_then(|t| t.parse().ok())
        .unwrap_or(1)
        .max(1);
    let bundle = include_str!("../../../bench/runtime/index.js");
    let players: Vec<Presence> = (0..2)
        .map(|n| Presence {
            user_id: format!("u{n}"),
            session_id: format!("s{n}"),
            username: format!("p{n}"),
            node: "n".into(),
        })
        .collect();
    let matches: Vec<Vm> = (0..vms)
        .map(|_| {
            let (vm, _) = Vm::load("index.js", bundle, Arc::new(NoHost), Limits::default())
                .expect("the module loads");
            vm.match_init("arena_js", &serde_json::json!({}), &serde_json::json!({}))
                .expect("init");
            vm.match_presences(false, 0, &players).expect("join");
            vm.take_dispatches();
            vm
        })
        .collect();
    let input = |n: usize, seq: u32| MatchMessage {
        sender: format!("s{n}"),
        op_code: 1,
        data: [seq.to_le_bytes().as_slice(), &[1, 0]].concat(),
        reliable: true,
        receive_time_ms: 0,
    };
    let rounds = (ticks / vms as u64).max(1);
    let started = Instant::now();
    for tick in 1..=rounds {
        for vm in &matches {
            let messages = [input(0, tick as u32), input(1, tick as u32)];
            vm.match_loop(tick, &messages).expect("loop");
            vm.take_dispatches();
        }
    }
    let empty_started = Instant::now();
    let elapsed = empty_started - started;
    for tick in 1..=rounds {
        for vm in &matches {
            vm.match_loop(rounds + tick, &[]).expect("loop");
            vm.take_dispatches();
        }
    }
    let empty = empty_started.elapsed();
    let ticks = rounds * vms as u64;
    println!(
        "{}",
        serde_json::json!({
            "ticks": ticks,
            "vms": vms,
            "nsPerTickTwoInputs": elapsed.as_nanos() as u64 / ticks,
            "nsPerTickNoInput": empty.as_nanos() as u64 / ticks,
        })
    );
}
