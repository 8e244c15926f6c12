//! Reading the server's own figures: one sample of a Prometheus metric from `/metrics`.

use crate::support::TestServer;

/// One sample from the server's `/metrics` (0 when absent). `name` is the whole series as
/// printed, labels included, e.g. `muster_sockets_closed_total{reason="queue_full"}`.
pub async fn metric(server: &TestServer, name: &str) -> f64 {
    let text = reqwest::Client::new()
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}
