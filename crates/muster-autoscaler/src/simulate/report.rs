//! Space Ape's DynamoDB experiment and the trend check, as a table and as an HTML page of charts
//! (provisioned, consumed, requested and throttled over time, per minute, as Space Ape's
//! CloudWatch graphs):
//!
//! - on DynamoDB (Space Ape's model), every policy on the four traces (Space Ape's bell curve and
//!   top heavy, a step, a sawtooth) at utilisation targets 30–80 %: share of requests served and
//!   requests throttled;
//! - on DynamoDB and on Kubernetes (desired replicas set again any second, as the live loop
//!   does), Muster's policy beside the same policy sizing from the level only: share served,
//!   mean headroom and peak over-provisioning — what the trend buys and what it costs.

use std::fmt::Write as _;

use super::{run_on, Model, Platform, Run, Trace};
use crate::policy::{Alarm, AlarmKind, Muster, MusterSettings, Policy};

/// The utilisation targets of Space Ape's experiment.
pub const TARGETS: [f64; 6] = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8];

/// The policies at `target`: Space Ape's three, Muster's sizing from the level only, Muster's.
pub fn policies(target: f64) -> Vec<Box<dyn Policy>> {
    vec![
        Box::new(Alarm::new(AlarmKind::Vanilla, target, 1.0, 1e6)),
        Box::new(Alarm::new(AlarmKind::OneBreach, target, 1.0, 1e6)),
        Box::new(Alarm::new(AlarmKind::OneBreachOnRequests, target, 1.0, 1e6)),
        Box::new(Muster::new(MusterSettings::level_only(target))),
        Box::new(Muster::new(MusterSettings::new(target))),
    ]
}

/// The policies that can drive Kubernetes' replicas (the alarm policies are DynamoDB's own).
fn replica_policies(target: f64) -> Vec<Box<dyn Policy>> {
    vec![
        Box::new(Muster::new(MusterSettings::level_only(target))),
        Box::new(Muster::new(MusterSettings::new(target))),
    ]
}

/// One run of the experiment, with its target.
pub struct Cell {
    pub target: f64,
    pub run: Run,
}

/// Every policy on every trace at every target on DynamoDB; level only and Muster's on
/// Kubernetes.
pub fn experiment(model: &Model) -> Vec<Cell> {
    let mut cells = Vec::new();
    for platform in [Platform::DynamoDb, Platform::Kubernetes] {
        for trace in Trace::all() {
            for target in TARGETS {
                let policies = match platform {
                    Platform::DynamoDb => policies(target),
                    Platform::Kubernetes => replica_policies(target),
                };
                for mut policy in policies {
                    cells.push(Cell {
                        target,
                        run: run_on(platform, &trace, model, policy.as_mut()),
                    });
                }
            }
        }
    }
    cells
}

fn find<'a>(
    cells: &'a [Cell],
    platform: Platform,
    trace: &str,
    policy: &str,
    target: f64,
) -> Option<&'a Cell> {
    cells.iter().find(|c| {
        c.run.platform == platform
            && c.run.trace == trace
            && c.target == target
            && c.run.policy == policy
    })
}

/// The tables: per trace on DynamoDB, a row per target, a column per policy: % served
/// (throttled); then, per platform, the trend against the level: % served, mean headroom and
/// peak over-provisioning of each.
pub fn table(cells: &[Cell]) -> String {
    let mut out = String::new();
    let names: Vec<String> = policies(0.5).iter().map(|p| p.name()).collect();
    let traces: Vec<&str> = Trace::all().iter().map(|t| t.name).collect();
    for &trace in &traces {
        let _ = writeln!(
            out,
            "{trace} (dynamodb): % of requests served (requests throttled)"
        );
        let _ = write!(out, "{:>7}", "target");
        for name in &names {
            let _ = write!(out, " {name:>22}");
        }
        out.push('\n');
        for target in TARGETS {
            let _ = write!(out, "{:>6.0}%", target * 100.0);
            for name in &names {
                if let Some(cell) = find(cells, Platform::DynamoDb, trace, name, target) {
                    let _ = write!(
                        out,
                        " {:>12.2}% ({:>7.0})",
                        cell.run.success() * 100.0,
                        cell.run.throttled
                    );
                }
            }
            out.push('\n');
        }
        out.push('\n');
    }
    for platform in [Platform::DynamoDb, Platform::Kubernetes] {
        let _ = writeln!(
            out,
            "trend against level ({}): % served, mean headroom, peak over-provisioning (x what the peak needs)",
            platform.name()
        );
        let _ = writeln!(
            out,
            "{:>11} {:>7} {:>30} {:>30}",
            "trace", "target", "level only", "muster"
        );
        for &trace in &traces {
            for target in TARGETS {
                let _ = write!(out, "{trace:>11} {:>6.0}%", target * 100.0);
                for name in ["level only", "muster"] {
                    if let Some(cell) = find(cells, platform, trace, name, target) {
                        let _ = write!(
                            out,
                            " {:>9.2}% {:>8.1}% {:>9.2}x",
                            cell.run.success() * 100.0,
                            cell.run.mean_headroom * 100.0,
                            cell.run.peak_over_provisioning(target)
                        );
                    }
                }
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

/// The experiment as JSON, one object per run.
pub fn json(cells: &[Cell]) -> serde_json::Value {
    serde_json::Value::Array(
        cells
            .iter()
            .map(|c| {
                serde_json::json!({
                    "platform": c.run.platform.name(),
                    "trace": c.run.trace,
                    "policy": c.run.policy,
                    "target": c.target,
                    "served_pct": (c.run.success() * 10_000.0).round() / 100.0,
                    "throttled": c.run.throttled.round(),
                    "mean_headroom_pct": (c.run.mean_headroom * 1000.0).round() / 10.0,
                    "peak_over_provisioning": (c.run.peak_over_provisioning(c.target) * 100.0).round() / 100.0,
                    "changes": c.run.changes.len(),
                    "max_direction_changes_per_10_min": c.run.max_direction_changes_per_10_min(),
                    "simulated_s": c.run.provisioned.len(),
                })
            })
            .collect(),
    )
}

/// One SVG chart of a run, per minute: provisioned, requested, consumed, throttled.
fn chart(run: &Run, target: f64) -> String {
    let (w, h, pad) = (640.0, 220.0, 30.0);
    let peak = run
        .minutes
        .iter()
        .map(|m| m.provisioned.max(m.requested))
        .fold(1.0, f64::max);
    let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / run.minutes.len().max(1) as f64;
    let y = |v: f64| h - pad - (h - 2.0 * pad) * v / peak;
    let line = |value: fn(&super::Minute) -> f64, colour: &str| {
        let points: Vec<String> = run
            .minutes
            .iter()
            .enumerate()
            .map(|(i, m)| format!("{:.1},{:.1}", x(i), y(value(m))))
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>",
            points.join(" ")
        )
    };
    format!(
        "<figure><figcaption>{} on {} — {}, target {:.0} %: {:.2} % served, {:.0} throttled, mean headroom {:.1} %, peak {:.2}× what the peak needs</figcaption>\
         <svg viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\">\
         <line x1=\"{pad}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\
         <text x=\"2\" y=\"{:.1}\" font-size=\"10\">{peak:.0}/s</text>{}{}{}{}</svg></figure>",
        run.trace,
        run.platform.name(),
        run.policy,
        target * 100.0,
        run.success() * 100.0,
        run.throttled,
        run.mean_headroom * 100.0,
        run.peak_over_provisioning(target),
        h - pad,
        w - pad,
        h - pad,
        y(peak) + 4.0,
        line(|m| m.provisioned, "#1c7ed6"),
        line(|m| m.requested, "#495057"),
        line(|m| m.consumed, "#2f9e44"),
        line(|m| m.throttled, "#e03131"),
    )
}

/// A self-contained HTML page: the table, then a chart per run at `chart_targets`.
pub fn html(cells: &[Cell], chart_targets: &[f64]) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Autoscaling simulation</h1><p>Per minute: <b style=\"color:#1c7ed6\">provisioned</b>, \
         <b style=\"color:#495057\">requested</b>, <b style=\"color:#2f9e44\">consumed</b>, \
         <b style=\"color:#e03131\">throttled</b> (requests per second).</p><pre>{}</pre>",
        table(cells)
    );
    for cell in cells.iter().filter(|c| chart_targets.contains(&c.target)) {
        body.push_str(&chart(&cell.run, cell.target));
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Autoscaling simulation</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:2rem}}figure{{margin:1rem 0}}pre{{background:#f4f4f6;padding:1rem}}</style>\
         </head><body>{body}</body></html>"
    )
}
