//! The self-contained HTML report: inline CSS and inline SVG charts, no script and no network,
//! so it opens from a file, a CI artifact or an email attachment exactly as it was written.

use std::fmt::Write as _;

use crate::report::Report;

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// One line of a chart.
struct Series<'a> {
    label: String,
    color: &'a str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// Escapes text for HTML content and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis covering [0, v]: a step of 1, 2, 2.5 or 5 times a power of ten, giving at most
/// 5 intervals, and the top of the axis (a whole number of steps).
fn nice_axis(v: f64) -> (f64, f64) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 0.2);
    }
    let raw = v / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&x| x >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * p);
    (step * (v / step - 1e-9).ceil().max(1.0), step)
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// An SVG line chart with axes, gridlines and a legend.
fn line_chart(title: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h) = (900.0, 280.0);
    let (left, right, top, bottom) = (70.0, 20.0, 30.0, 40.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    // Whole seconds on the x axis, in 5 even steps of a "nice" size.
    let (x_max, x_step) = nice_axis(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(5.0_f64, f64::max),
    );
    let (y_max, y_step) = nice_axis(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0_f64, f64::max),
    );
    let sx = |x: f64| left + x / x_max * pw;
    let sy = |y: f64| top + ph - y / y_max * ph;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><text x="{left}" y="18" class="title">{t}</text>"#,
        t = esc(title)
    );
    let y_ticks = (y_max / y_step).round() as usize;
    for i in 0..=y_ticks {
        let y = y_step * i as f64;
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{x2}" y1="{y1:.1}" y2="{y1:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" class="axis" text-anchor="end">{v}</text>"##,
            x2 = left + pw,
            y1 = sy(y),
            tx = left - 6.0,
            ty = sy(y) + 4.0,
            v = fmt_num(y)
        );
    }
    let x_ticks = (x_max / x_step).round() as usize;
    for i in 0..=x_ticks {
        let x = x_step * i as f64;
        let _ = write!(
            svg,
            r#"<text x="{tx:.1}" y="{ty}" class="axis" text-anchor="middle">{v}s</text>"#,
            tx = sx(x),
            ty = top + ph + 16.0,
            v = fmt_num(x)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="14" y="{y}" class="axis" transform="rotate(-90 14 {y})" text-anchor="middle">{l}</text>"#,
        y = top + ph / 2.0,
        l = esc(y_label)
    );
    let _ = write!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##
    );
    for s in series {
        if s.points.is_empty() {
            continue;
        }
        if let [(x, y)] = s.points[..] {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                sx(x),
                sy(y),
                s.color
            );
            continue;
        }
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let dash = if s.dashed {
            r#" stroke-dasharray="5 4""#
        } else {
            ""
        };
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.6"{dash} points="{p}"/>"#,
            c = s.color,
            p = pts.join(" ")
        );
    }
    let mut lx = left + 10.0;
    for s in series {
        let dash = if s.dashed {
            r#" stroke-dasharray="5 4""#
        } else {
            ""
        };
        let _ = write!(
            svg,
            r#"<line x1="{lx}" x2="{x2}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="2"{dash}/><text x="{tx}" y="{ty}" class="axis">{l}</text>"#,
            x2 = lx + 18.0,
            y = top + 12.0,
            c = s.color,
            tx = lx + 22.0,
            ty = top + 16.0,
            l = esc(&s.label)
        );
        lx += 30.0 + 7.0 * s.label.len() as f64;
    }
    svg.push_str("</svg>");
    svg
}

/// Renders the whole report page.
pub fn render(r: &Report) -> String {
    let ts = &r.timeseries;
    let pt = |f: &dyn Fn(&crate::report::SecondRow) -> f64| -> Vec<(f64, f64)> {
        ts.iter().map(|row| (row.t as f64, f(row))).collect()
    };
    let ccu_chart = line_chart(
        "Concurrent players (open sockets) and arrivals per second",
        "players",
        &[
            Series {
                label: "CCU".into(),
                color: COLORS[0],
                dashed: false,
                points: pt(&|row| row.ccu as f64),
            },
            Series {
                label: "arrivals/s".into(),
                color: COLORS[2],
                dashed: true,
                points: pt(&|row| row.arrivals as f64),
            },
        ],
    );
    let rate_chart = line_chart(
        "Sends, receives and errors per second",
        "per second",
        &[
            Series {
                label: "sends/s".into(),
                color: COLORS[0],
                dashed: false,
                points: pt(&|row| row.sends as f64),
            },
            Series {
                label: "receives/s".into(),
                color: COLORS[2],
                dashed: true,
                points: pt(&|row| row.receives as f64),
            },
            Series {
                label: "errors/s".into(),
                color: COLORS[1],
                dashed: false,
                points: pt(&|row| row.errors as f64),
            },
        ],
    );
    let chat_chart = if r.counters.chat_sent > 0 || r.counters.chat_delivered > 0 {
        line_chart(
            "Chat messages per second: sent, and delivered to members",
            "per second",
            &[
                Series {
                    label: "sent/s".into(),
                    color: COLORS[0],
                    dashed: false,
                    points: pt(&|row| row.chat_sent as f64),
                },
                Series {
                    label: "delivered/s".into(),
                    color: COLORS[2],
                    dashed: true,
                    points: pt(&|row| row.chat_delivered as f64),
                },
            ],
        )
    } else {
        String::new()
    };
    let mut latency_charts = String::new();
    for name in r.metrics.keys() {
        let p = |sel: fn(&crate::report::SecondRow) -> &std::collections::BTreeMap<String, f64>| {
            ts.iter()
                .filter_map(|row| sel(row).get(name).map(|v| (row.t as f64, *v)))
                .collect::<Vec<_>>()
        };
        latency_charts.push_str(&line_chart(
            &format!("{name}: latency per second (ms, from the intended send time)"),
            "ms",
            &[
                Series {
                    label: "p99".into(),
                    color: COLORS[1],
                    dashed: false,
                    points: p(|row| &row.p99),
                },
                Series {
                    label: "p50".into(),
                    color: COLORS[0],
                    dashed: true,
                    points: p(|row| &row.p50),
                },
            ],
        ));
    }

    let mut metrics = String::from(
        "<table><tr><th>metric (ms)</th><th>count</th><th>min</th><th>p80</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>",
    );
    for (name, m) in &r.metrics {
        let _ = write!(
            metrics,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            esc(name),
            m.count,
            m.min,
            m.percentile80,
            m.percentile90,
            m.percentile99,
            m.percentile99point9,
            m.percentile99point99,
            m.max
        );
    }
    metrics.push_str("</table>");

    let mut errors = String::from("<table><tr><th>failure kind</th><th>count</th></tr>");
    if r.errors.is_empty() {
        errors.push_str("<tr><td colspan=\"2\">none</td></tr>");
    }
    for (k, v) in &r.errors {
        let _ = write!(errors, "<tr><td>{}</td><td>{v}</td></tr>", esc(k));
    }
    errors.push_str("</table>");

    let c = &r.counters;
    let mut counters = format!(
        "<table><tr><th>arrivals</th><th>sends</th><th>receives</th><th>connects</th><th>disconnects</th><th>errors</th><th>closes unanswered</th></tr><tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        c.arrivals, c.sends, c.receives, c.connects, c.disconnects, c.errors, c.closes_unanswered
    );
    if c.chat_sent > 0 || c.chat_delivered > 0 {
        let _ = write!(
            counters,
            "<table><tr><th>chat sent</th><th>chat acked</th><th>chat delivered</th><th>delivered per sent</th></tr><tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr></table>",
            c.chat_sent,
            c.chat_acked,
            c.chat_delivered,
            c.chat_delivered as f64 / c.chat_sent.max(1) as f64
        );
    }

    // Achieved rates by phase: one column per metric that any phase recorded.
    let mut phases = String::new();
    if !r.phases.is_empty() {
        let names: std::collections::BTreeSet<&String> =
            r.phases.iter().flat_map(|p| p.rates_per_s.keys()).collect();
        phases.push_str("<h2>Rates by phase</h2>");
        phases.push_str("<table><tr><th>phase</th><th>from s</th><th>to s</th><th>arrivals/s</th>");
        for name in &names {
            let _ = write!(phases, "<th>{}/s</th>", esc(name));
        }
        phases.push_str("</tr>");
        for p in &r.phases {
            let _ = write!(
                phases,
                "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td>",
                esc(&p.name),
                p.start_s,
                p.start_s + p.duration_s,
                p.arrivals_per_s
            );
            for name in &names {
                let _ = write!(
                    phases,
                    "<td>{:.1}</td>",
                    p.rates_per_s.get(*name).copied().unwrap_or(0.0)
                );
            }
            phases.push_str("</tr>");
        }
        phases.push_str("</table>");
    }

    let mut workers = String::from(
        "<table><tr><th>worker</th><th>address</th><th>source</th><th>players</th><th>successful</th><th>failed</th><th>peak CCU</th><th>RSS baseline KiB</th><th>RSS peak KiB</th><th>CPU s</th><th>start late ms</th><th>status</th><th>samples</th></tr>",
    );
    for w in &r.workers {
        let _ = write!(
            workers,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            w.index,
            esc(w.address.as_deref().unwrap_or("local")),
            esc(w.source_ip.as_deref().unwrap_or("-")),
            w.players,
            w.successful,
            w.failed,
            w.peak_ccu,
            w.rss_baseline_kb,
            w.rss_peak_kb,
            w.cpu_s,
            w.start_late_ms.map(|ms| format!("{ms:.2}")).unwrap_or_else(|| "-".into()),
            match &w.lost {
                Some(why) => format!(
                    "<b class=\"bad\">{}</b>: {} (first {} s streamed)",
                    w.status.name(),
                    esc(why),
                    w.streamed_s
                ),
                None => w.status.name().to_string(),
            },
            esc(&w
                .counts
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", "))
        );
    }
    workers.push_str("</table>");
    if !r.partial_workers.is_empty() {
        let _ = write!(
            workers,
            "<p class=\"bad\">Partial: every figure of this report holds what workers {:?} streamed before they were given up on, and nothing after; their players count as failed.</p>",
            r.partial_workers
        );
    }
    if let Some(skew) = r.start_skew_ms {
        let _ = write!(
            workers,
            "<p>Start skew {skew:.2} ms (clocks within ±{:.2} ms); coordinator peak RSS {} KiB.</p>",
            r.clock_uncertainty_ms.unwrap_or(0.0),
            r.coordinator_rss_peak_kb
        );
    }

    let status_class = if r.failed == 0 && r.status == crate::report::Status::Completed {
        "ok"
    } else {
        "bad"
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>swarm report: {title}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:960px}}
table{{border-collapse:collapse;margin:8px 0 20px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
th{{background:#f3f3f3}}td:first-child{{text-align:left}}.ok{{color:#2ca02c}}.bad{{color:#d62728}}
svg{{display:block;margin:10px 0 24px}}.title{{font-size:14px;font-weight:600}}.axis{{font-size:11px;fill:#555}}
</style></head><body>
<h1>swarm report: {title}</h1>
<p>Load test <code>{id}</code> against <code>{target}</code>: <b class="{status_class}">{status:?}</b>,
{players} players: <b>{ok}</b> successful, <b class="{status_class}">{failed}</b> failed, {skipped} skipped;
peak CCU {peak}; {dur:.1} s.</p>
<h2>Latency</h2>{metrics}
{phases}
<h2>Failures</h2>{errors}
<h2>Counters</h2>{counters}
<h2>Over time</h2>{ccu_chart}{latency_charts}{rate_chart}{chat_chart}
<h2>Workers</h2>{workers}
</body></html>
"#,
        title = esc(&r.scenario),
        id = esc(&r.load_test_id),
        target = esc(&r.target),
        status = r.status,
        players = r.players,
        ok = r.successful,
        failed = r.failed,
        skipped = r.skipped,
        peak = r.peak_ccu,
        dur = r.duration_s,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis_bounds() {
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(3.2), (4.0, 1.0));
        assert_eq!(nice_axis(5.0), (5.0, 1.0));
        assert_eq!(nice_axis(121.0), (125.0, 25.0));
        assert_eq!(nice_axis(1000.0), (1000.0, 200.0));
        assert_eq!(nice_axis(18000.0), (20000.0, 5000.0));
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
        let svg = line_chart("<t>", "y", &[]);
        assert!(svg.contains("&lt;t&gt;") && svg.ends_with("</svg>"));
    }
}
