//! Reading the server's own figures: one sample of a Prometheus metric from `/metrics`.

use crate::support::TestServer;

/// One sample from the server's `/metrics` (0 when absent). `name` is the whole series as
/// printed, labels included, e.g. `muster_sockets_closed_total{reason="queue_full"}`.
pub async fn metric(server: &TestServer, name: &str) -> f64 {
    metric_at(&server.url(""), name).await
}

/// [`metric`] from the server at `base` (`http://host:port`, e.g. a binary a test started).
pub async fn metric_at(base: &str, name: &str) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", base.trim_end_matches('/')))
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
