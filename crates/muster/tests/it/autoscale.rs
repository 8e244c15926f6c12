//! The autoscaler against a real Muster node: `muster autoscale run`'s loop reads the node's own
//! `/metrics` (`muster_sockets_open`) and the desired replicas follow the players connected.

use crate::support;

use muster_autoscaler::calendar::Calendar;
use muster_autoscaler::keda::Desired;
use muster_autoscaler::run::{channels, run, RunSettings};
use support::{Backend, Client, Database, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desired_replicas_follow_the_sockets_of_a_real_node() {
    let db = Database::new(Backend::Sqlite).await;
    let server = TestServer::start(db.config()).await;
    let (outputs, shared) = channels(Desired { replicas: 1 }, &Calendar::default(), None);
    // Two players a replica at 100 %: six players want three replicas.
    let settings = RunSettings {
        units_per_replica: 2.0,
        target: 1.0,
        max_replicas: 10,
        ..RunSettings::new(vec![server.url("/metrics")])
    };
    tokio::spawn(run(settings, outputs, std::future::pending()));
    let mut players = Vec::new();
    for i in 0..6 {
        players.push(Client::connect(&server, &format!("autoscale-player-{i}")).await);
    }
    let desired = shared.desired.clone();
    support::eventually("three replicas for six players", || {
        let desired = desired.clone();
        async move { desired.borrow().replicas == 3 }
    })
    .await;
    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("\nmuster_sockets_open 6\n"),
        "the signal read"
    );
    drop(players);
}
