//! The `graphql` step end to end: the real `swarm` binary against a real Muster whose `/graphql`
//! reads a mock origin. Queries drawn over five categories reach the origin at most once per
//! category (the gateway's cache), every answered query is counted, and a query GraphQL refuses
//! fails its players under a kind of its own.

use std::time::Duration;

use muster_gateway::mock::{MockOrigin, MockSettings};
use serde_json::Value;

use crate::common;
use common::{run_swarm, Muster};

const SCENARIO: &str = r#"
name = "graphql-e2e"
timeout_s = 5
grace_s = 5

[[phases]]
duration_s = 2
players = 10

[[phases]]
duration_s = 2

[[steps]]
do = "authenticate"

[[steps]]
do = "graphql"
interval_s = [0.05, 0.15]
queries = [
  { id = "items", query = '{ items(category: "c${rand:1:5}") { id price } }', weight = 3 },
  { id = "me", query = '{ me { username } }' },
]
"#;

/// A mock origin on a runtime of its own (it outlives the test's blocking calls), and Muster
/// configured to read it.
fn start() -> (tokio::runtime::Runtime, MockOrigin, Muster) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let origin = runtime
        .block_on(MockOrigin::start(
            "127.0.0.1:0",
            MockSettings {
                delay: Duration::from_millis(50),
                error_rate: 0.0,
            },
        ))
        .expect("mock origin");
    let gateway = muster_gateway::config::GatewayConfig {
        requests_per_ip_per_sec: 0,
        ..origin.items_config()
    };
    let muster = Muster::start_with(move |config| config.gateway = gateway);
    (runtime, origin, muster)
}

#[test]
fn graphql_queries_are_measured_and_cached() {
    let (_runtime, origin, muster) = start();
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, report) = run_swarm(&muster.url(), dir.path(), "scenario", SCENARIO, 2);
    assert_eq!(code, 0, "{}", report["errors"]);
    assert_eq!(report["failed"], 0);
    let items = report["metrics"]["graphql_items"]["count"]
        .as_u64()
        .expect("items");
    let me = report["metrics"]["graphql_me"]["count"]
        .as_u64()
        .expect("me");
    assert!(items + me > 100, "{items} + {me}");
    assert!(items > me, "weights 3:1 ({items} vs {me})");
    let calls = origin
        .stats
        .calls
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (1..=5).contains(&calls),
        "{calls} origin calls for 5 categories"
    );
}

#[test]
fn refused_queries_fail_players_by_kind() {
    let (_runtime, _origin, muster) = start();
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = SCENARIO
        .replace("{ me { username } }", "{ me { colour } }")
        .replace("players = 10", "players = 4")
        .replace("weight = 3", "weight = 1");
    let (code, report) = run_swarm(&muster.url(), dir.path(), "scenario", &scenario, 1);
    assert_eq!(code, 3, "failed players make the run fail");
    let errors = report["errors"].as_object().expect("errors");
    assert!(
        errors.get("rpc_me_graphql_errors").and_then(Value::as_u64) >= Some(1),
        "{errors:?}"
    );
}
