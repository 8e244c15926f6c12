//! What the console's status history costs one node: the memory of a full set of series, one
//! sample (what the node pays every second), and serving a window as JSON — the full hour at
//! 1 s, the page's hour view (every 5 s: ~720 points a series) and the last two seconds (a page's
//! poll). Prints JSON.
//!
//! `cargo run --release -p muster --example console_history [SERIES] [RUNS]` (defaults: 150
//! series, console.history_max_series's default; 200 runs of each query).

use std::time::Instant;

use muster::console::history::{History, Resolution, WindowQuery, SERIES_BYTES};
use prometheus::{HistogramOpts, HistogramVec, Registry};

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let series: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(150);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    // A histogram tracked with three statistics (rate, p50, p99): series / 3 functions.
    let registry = Registry::new_custom(Some("muster".into()), None).expect("registry");
    let rpc = HistogramVec::new(
        HistogramOpts::new("rpc_duration_seconds", "RPC latency"),
        &["function"],
    )
    .expect("histogram");
    registry.register(Box::new(rpc.clone())).expect("register");
    let functions = series.div_ceil(3);
    for f in 0..functions {
        rpc.with_label_values(&[&format!("function_{f:03}")])
            .observe(0.001);
    }
    let history = History::new(registry, series);
    let before = rss_bytes();
    let start = 1_800_000_000_i64;
    history.sample(start);
    history.sample(start + 1);
    // Fill an hour at 1 s, timing each sample.
    let mut sample_us = Vec::with_capacity(3600);
    for t in 2..3602 {
        for f in 0..functions {
            rpc.with_label_values(&[&format!("function_{f:03}")])
                .observe(0.0005 * (1 + (t + f as i64) % 7) as f64);
        }
        let began = Instant::now();
        history.sample(start + t);
        sample_us.push(began.elapsed().as_secs_f64() * 1e6);
    }
    sample_us.sort_by(f64::total_cmp);
    // Every series is made by now; its rings were allocated (and written) when it was.
    let made = rss_bytes().saturating_sub(before);
    let kept = history.series_count();
    let end = start + 3601;
    let time_query = |after: i64, every: i64| {
        let mut ms = Vec::with_capacity(runs);
        let mut bytes = 0;
        for _ in 0..runs {
            let began = Instant::now();
            let window = history.window_with(WindowQuery {
                resolution: Resolution::Second,
                after,
                every,
                span: None,
            });
            let json = serde_json::to_vec(&window).expect("json");
            ms.push(began.elapsed().as_secs_f64() * 1e3);
            bytes = json.len();
        }
        ms.sort_by(f64::total_cmp);
        serde_json::json!({
            "bytes": bytes,
            "p50_ms": percentile(&ms, 0.5),
            "p99_ms": percentile(&ms, 0.99),
        })
    };
    let full_hour = time_query(0, 1);
    let hour_view = time_query(0, 5);
    let poll = time_query(end - 2, 1);
    println!(
        "{}",
        serde_json::json!({
            "series": kept,
            "series_bytes_by_design": SERIES_BYTES,
            "rss_growth_bytes_for_series": made,
            "rss_after_an_hour_bytes": rss_bytes(),
            "sample_us": {
                "p50": percentile(&sample_us, 0.5),
                "p99": percentile(&sample_us, 0.99),
                "cpu_share_of_one_core_at_1_hz": percentile(&sample_us, 0.5) / 1e6,
            },
            "window_full_hour": full_hour,
            "window_hour_view_every_5_s": hour_view,
            "window_poll_last_2_s": poll,
        })
    );
}
