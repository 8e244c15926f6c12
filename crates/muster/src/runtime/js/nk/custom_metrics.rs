//! `metricsCounterAdd`, `metricsGaugeSet`, `metricsTimerRecord`: a module's own figures on
//! `/metrics`, as `muster_custom_NAME` with the call's tags as labels (Nakama publishes them as
//! its custom scope). A timer's value is in nanoseconds and is published in seconds.
//!
//! Bounded: at most [`MAX_METRICS`] names and [`MAX_SERIES`] label sets in all; past them a call
//! is refused (RESOURCE_EXHAUSTED) and nothing is recorded.

use std::collections::{BTreeMap, HashMap, HashSet};

use muster_js::JsError;
use parking_lot::Mutex;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use serde_json::Value;

use super::context::{invalid, Args};

pub(super) const NAMES: &[&str] = &["metricsCounterAdd", "metricsGaugeSet", "metricsTimerRecord"];

/// Most metric names a module may make.
pub const MAX_METRICS: usize = 100;
/// Most label sets (series) over every metric a module made.
pub const MAX_SERIES: usize = 10_000;

enum Family {
    Counter(IntCounterVec),
    Gauge(GaugeVec),
    Timer(HistogramVec),
}

/// A metric as first made: its kind and its label names (a later call must use the same).
struct Made {
    family: Family,
    labels: Vec<String>,
}

/// Every metric made, by name, and every label set recorded (name, values).
type Recorded = (HashMap<String, Made>, HashSet<(String, Vec<String>)>);

pub struct CustomMetrics {
    registry: Registry,
    made: Mutex<Recorded>,
}

impl CustomMetrics {
    pub fn new(registry: Registry) -> CustomMetrics {
        CustomMetrics {
            registry,
            made: Mutex::default(),
        }
    }

    pub(super) fn call(&self, name: &str, args: &Args) -> Result<Value, JsError> {
        let metric = args.string(0, "name")?;
        if !valid_name(&metric) {
            return Err(invalid(format!(
                "metric name {metric:?} must be letters, digits and underscores, not starting with a digit, at most 128 bytes"
            )));
        }
        let tags: BTreeMap<String, String> = match args.get(1) {
            Value::Null => BTreeMap::new(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(s) if valid_name(k) => Ok((k.clone(), s.to_owned())),
                    _ => Err(invalid(format!(
                        "tag {k:?} must be a name (letters, digits, underscores) with a string value"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(invalid("tags must be an object of strings")),
        };
        let value = args
            .get(2)
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| invalid("the value must be a number"))?;
        let labels: Vec<String> = tags.keys().cloned().collect();
        let values: Vec<&str> = tags.values().map(String::as_str).collect();
        let mut made = self.made.lock();
        let (metrics, series) = &mut *made;
        if !metrics.contains_key(&metric) {
            if metrics.len() >= MAX_METRICS {
                return Err(JsError::new(
                    format!("a module may make at most {MAX_METRICS} metrics"),
                    8,
                ));
            }
            let family = self.make(name, &metric, &labels)?;
            metrics.insert(metric.clone(), Made { family, labels });
        }
        let found = &metrics[&metric];
        if found.labels != tags.keys().cloned().collect::<Vec<_>>() {
            return Err(invalid(format!(
                "metric {metric} has the tags {:?}; every call must give those",
                found.labels
            )));
        }
        let key = (
            metric.clone(),
            values.iter().map(|v| v.to_string()).collect(),
        );
        if !series.contains(&key) {
            if series.len() >= MAX_SERIES {
                return Err(JsError::new(
                    format!("a module's metrics may have at most {MAX_SERIES} label sets"),
                    8,
                ));
            }
            series.insert(key);
        }
        match (&found.family, name) {
            (Family::Counter(counter), _) => {
                if value < 0.0 {
                    return Err(invalid("a counter's delta must be 0 or more"));
                }
                counter.with_label_values(&values).inc_by(value as u64);
            }
            (Family::Gauge(gauge), _) => gauge.with_label_values(&values).set(value),
            (Family::Timer(timer), _) => timer.with_label_values(&values).observe(value / 1e9),
        }
        Ok(Value::Null)
    }

    fn make(&self, call: &str, metric: &str, labels: &[String]) -> Result<Family, JsError> {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let full = format!("custom_{metric}");
        let help = format!("A module's metric {metric}.");
        let failed = |e: prometheus::Error| invalid(format!("metric {metric}: {e}"));
        let family = match call {
            "metricsCounterAdd" => {
                let v = IntCounterVec::new(Opts::new(full, help), &labels).map_err(failed)?;
                self.registry
                    .register(Box::new(v.clone()))
                    .map_err(failed)?;
                Family::Counter(v)
            }
            "metricsGaugeSet" => {
                let v = GaugeVec::new(Opts::new(full, help), &labels).map_err(failed)?;
                self.registry
                    .register(Box::new(v.clone()))
                    .map_err(failed)?;
                Family::Gauge(v)
            }
            _ => {
                let v = HistogramVec::new(HistogramOpts::new(full + "_seconds", help), &labels)
                    .map_err(failed)?;
                self.registry
                    .register(Box::new(v.clone()))
                    .map_err(failed)?;
                Family::Timer(v)
            }
        };
        Ok(family)
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(m: &CustomMetrics, name: &str, args: Value) -> Result<Value, JsError> {
        m.call(name, &Args(args.as_array().expect("array").clone()))
    }

    #[test]
    fn counters_gauges_and_timers_are_published_with_their_tags() {
        let registry = Registry::new();
        let m = CustomMetrics::new(registry.clone());
        call(
            &m,
            "metricsCounterAdd",
            json!(["kills", {"map": "dust"}, 3]),
        )
        .unwrap();
        call(
            &m,
            "metricsCounterAdd",
            json!(["kills", {"map": "dust"}, 2]),
        )
        .unwrap();
        call(&m, "metricsGaugeSet", json!(["queue", {}, 7.5])).unwrap();
        call(&m, "metricsTimerRecord", json!(["turn", {}, 2_000_000])).unwrap();
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        assert!(text.contains("custom_kills{map=\"dust\"} 5"), "{text}");
        assert!(text.contains("custom_queue 7.5"), "{text}");
        assert!(text.contains("custom_turn_seconds_sum 0.002"), "{text}");
        // Bad names, other tags than the first call's, negative deltas: refused.
        assert!(call(&m, "metricsCounterAdd", json!(["9x", {}, 1])).is_err());
        assert!(call(&m, "metricsCounterAdd", json!(["kills", {}, 1])).is_err());
        assert!(call(&m, "metricsCounterAdd", json!(["kills", {"map": "x"}, -1])).is_err());
    }
}
