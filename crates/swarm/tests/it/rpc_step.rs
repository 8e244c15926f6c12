//! The `rpc` step end to end: the real `swarm` binary (2 workers) against a real Muster started
//! in-process, over the socket and over HTTP. Every call swarm counts as answered must be one
//! Muster counts as done, and a call Muster refuses must show up as a failure of its own kind.

use std::path::Path;

use serde_json::Value;

use crate::common;
use common::{run_swarm, Muster};

impl Muster {
    /// Sum of `muster_rpc_calls_total` samples for `function` with `outcome`.
    fn calls(&self, function: &str, outcome: &str) -> u64 {
        let text = reqwest::blocking_get(&format!("{}/metrics", self.url()));
        let needle =
            format!("muster_rpc_calls_total{{function=\"{function}\",outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(needle.as_str()))
            .map_or(0, |v| v.trim().parse().expect("a count"))
    }
}

/// A tiny blocking GET, so the test needs no async runtime of its own.
mod reqwest {
    pub fn blocking_get(url: &str) -> String {
        let url = url.strip_prefix("http://").expect("http URL");
        let (host, path) = url.split_once('/').expect("a path");
        let mut stream = std::net::TcpStream::connect(host).expect("connect");
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("read");
        text
    }
}

fn run_rpc_swarm(target: &str, scenario: &str, dir: &Path) -> (i32, Value) {
    run_swarm(target, dir, "scenario", scenario, 2)
}

const SCENARIO: &str = r#"
name = "rpc-e2e"
timeout_s = 5
grace_s = 5

[[phases]]
duration_s = 2
players = 20

[[phases]]
duration_s = 3

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "rpc"
interval_s = [0.1, 0.3]
transport = "TRANSPORT"
functions = [
  { id = "wallet_spend", payload = '{"amount": ${rand:1:5}, "idempotency_key": "${run}-${player}-${seq}"}', weight = 2 },
  { id = "inventory_grant", payload = '{"item": "gem${rand:1:3}"}' },
]
"#;

#[test]
fn rpc_step_over_socket_and_http_is_counted_exactly() {
    let muster = Muster::start_with(|config| {
        config.runtime.player_builtin_functions = config.runtime.builtin_functions.clone();
        config.economy.starting_wallet = [("coins".to_owned(), 1_000_000)].into();
    });
    for transport in ["socket", "http"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let before = (
            muster.calls("wallet_spend", "ok"),
            muster.calls("inventory_grant", "ok"),
        );
        let (code, report) = run_rpc_swarm(
            &muster.url(),
            &SCENARIO.replace("TRANSPORT", transport),
            dir.path(),
        );
        assert_eq!(code, 0, "{transport}: {}", report["errors"]);
        assert_eq!(report["failed"], 0);
        assert_eq!(report["successful"], 20);
        let spends = report["metrics"]["rpc_wallet_spend"]["count"]
            .as_u64()
            .expect("spend latencies");
        let grants = report["metrics"]["rpc_inventory_grant"]["count"]
            .as_u64()
            .expect("grant latencies");
        // 20 players for ~3-5 s at one call per ~0.2 s: well over a hundred calls.
        assert!(spends + grants > 100, "{transport}: {spends} + {grants}");
        assert!(spends > grants, "weights 2:1 ({spends} vs {grants})");
        assert_eq!(
            (
                muster.calls("wallet_spend", "ok") - before.0,
                muster.calls("inventory_grant", "ok") - before.1
            ),
            (spends, grants),
            "{transport}: every call swarm recorded is one Muster answered"
        );
        assert!(report["metrics"]["client_lag"]["count"].as_u64() >= Some(spends + grants));
    }
}

#[test]
fn refused_calls_fail_players_by_kind() {
    let muster = Muster::start_with(|config| {
        config.runtime.player_builtin_functions = config.runtime.builtin_functions.clone();
        config.economy.starting_wallet = [("coins".to_owned(), 1_000_000)].into();
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = SCENARIO
        .replace("TRANSPORT", "socket")
        .replace("players = 20", "players = 6")
        .replace("\"wallet_spend\"", "\"no_such_function\"")
        .replace("weight = 2", "weight = 1000");
    let (code, report) = run_rpc_swarm(&muster.url(), &scenario, dir.path());
    assert_eq!(code, 3, "failed players make the run fail");
    let errors = report["errors"].as_object().expect("errors");
    let refused = errors
        .get("rpc_no_such_function_error_6")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let other: u64 = errors
        .iter()
        .filter(|(k, _)| k.as_str() != "rpc_no_such_function_error_6")
        .filter_map(|(_, v)| v.as_u64())
        .sum();
    // Nearly every first call is to the unknown function (weight 1000 to 1).
    assert_eq!(refused + other, 6, "{errors:?}");
    assert!(refused >= 5, "{errors:?}");
}
