//! What every `nk` family calls with: [`ServerHost`] (Muster's services as a module reaches
//! them, and the wait that blocks the calling VM's thread until a service answers), a call's
//! [`Args`] by position, and the conversions between Nakama's REST answers and its JavaScript
//! runtime's shapes.
//!
//! A call blocks its thread until the service answers: a pool VM runs its call stepped out of
//! the async workers already; an authoritative match's VM runs in its match's task, which steps
//! out of them while it waits (`block_in_place`).

use std::future::Future;
use std::sync::Arc;

use muster_js::JsError;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::functions::RpcError;
use crate::matches::Matches;
use crate::services::Services;

/// Muster's services as a module reaches them.
pub struct ServerHost {
    pub(crate) services: Arc<Services>,
    pub(crate) http: super::http_rules::HttpRules,
    /// `nk.localcache*`: this node's, shared by its VMs.
    pub(crate) local_cache: super::local_cache::LocalCache,
    /// `nk.metrics*`: the module's own figures.
    pub(crate) custom_metrics: super::custom_metrics::CustomMetrics,
    /// `nk.event`'s queue, to `registerEvent`'s function.
    pub(crate) events: super::events::Events,
    handle: tokio::runtime::Handle,
}

impl ServerHost {
    pub fn new(services: Arc<Services>, http: super::http_rules::HttpRules) -> ServerHost {
        let registry = services.metrics.registry().clone();
        ServerHost {
            services,
            http,
            local_cache: Default::default(),
            custom_metrics: super::custom_metrics::CustomMetrics::new(registry),
            events: Default::default(),
            handle: tokio::runtime::Handle::current(),
        }
    }

    /// Starts `task` in the background, on the server's runtime (a call that returns at once
    /// and leaves work behind it).
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.handle.spawn(task);
    }

    /// Runs `future` to its end from a VM's thread (counted in [`waits`]).
    pub(crate) fn wait<T>(&self, future: impl Future<Output = T>) -> Result<T, JsError> {
        WAITS.with(|w| w.set(w.get().wrapping_add(1)));
        match tokio::runtime::Handle::try_current() {
            // A thread outside the runtime.
            Err(_) => Ok(self.handle.block_on(future)),
            // An inline call's or a match's task, on a worker of the multi-threaded runtime: the
            // worker steps out of the async workers while it waits. (On a blocking thread this
            // blocks that thread.)
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                Ok(tokio::task::block_in_place(|| handle.block_on(future)))
            }
            Ok(_) => Err(JsError::new(
                "this nk function cannot be called from here (a single-threaded runtime)",
                12,
            )),
        }
    }

    pub(crate) fn matches(&self) -> Result<&Arc<Matches>, JsError> {
        Ok(&self.services.matches)
    }
}

thread_local! {
    /// How many times this thread has waited on a service in an `nk` call.
    static WAITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many times this thread has waited on a service in an `nk` call so far.
pub(crate) fn waits() -> u64 {
    WAITS.with(std::cell::Cell::get)
}

/// A domain's refusal as the script sees it: the message and gRPC code a client would get.
pub(crate) fn refused(error: impl Into<RpcError>) -> JsError {
    let error = error.into();
    JsError::new(error.message, error.code.grpc())
}

pub(crate) fn invalid(message: impl Into<String>) -> JsError {
    JsError::new(message, 3)
}

/// An `nk` call's arguments, by position.
pub(crate) struct Args(pub(crate) Vec<Value>);

static NULL: Value = Value::Null;

impl Args {
    pub(crate) fn get(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&NULL)
    }

    /// Whether argument `i` is absent, `null` or `undefined`.
    pub(crate) fn missing(&self, i: usize) -> bool {
        self.get(i).is_null()
    }

    pub(crate) fn string(&self, i: usize, what: &str) -> Result<String, JsError> {
        self.get(i)
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("{what} must be a string")))
    }

    /// A string, or `None` when absent or empty.
    pub(crate) fn opt_string(&self, i: usize) -> Option<String> {
        self.get(i)
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    pub(crate) fn user(&self, i: usize, what: &str) -> Result<Uuid, JsError> {
        parse_user(self.get(i), what)
    }

    /// A user id, or `None` when absent or empty.
    pub(crate) fn opt_user(&self, i: usize, what: &str) -> Result<Option<Uuid>, JsError> {
        match self.get(i) {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Ok(None),
            other => parse_user(other, what).map(Some),
        }
    }

    pub(crate) fn int(&self, i: usize, what: &str) -> Result<Option<i64>, JsError> {
        match self.get(i) {
            Value::Null => Ok(None),
            value => value
                .as_f64()
                .filter(|n| n.is_finite() && n.fract() == 0.0)
                .map(|n| Some(n as i64))
                .ok_or_else(|| invalid(format!("{what} must be an integer"))),
        }
    }

    pub(crate) fn bool(&self, i: usize) -> Option<bool> {
        self.get(i).as_bool()
    }

    /// A list of strings (absent: empty).
    pub(crate) fn strings(&self, i: usize, what: &str) -> Result<Vec<String>, JsError> {
        match self.get(i) {
            Value::Null => Ok(Vec::new()),
            Value::Array(list) => list
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(format!("{what} must be strings")))
                })
                .collect(),
            _ => Err(invalid(format!("{what} must be an array of strings"))),
        }
    }

    /// An object argument as JSON text (absent: `{}`); a string is taken as JSON already.
    pub(crate) fn json_text(&self, i: usize, what: &str) -> Result<String, JsError> {
        json_text(self.get(i), what)
    }
}

pub(crate) fn json_text(value: &Value, what: &str) -> Result<String, JsError> {
    match value {
        Value::Null => Ok("{}".to_owned()),
        Value::Object(_) => Ok(value.to_string()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(_)) => Ok(text.clone()),
            _ => Err(invalid(format!("{what} must be an object"))),
        },
        _ => Err(invalid(format!("{what} must be an object"))),
    }
}

pub(crate) fn parse_user(value: &Value, what: &str) -> Result<Uuid, JsError> {
    value
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| invalid(format!("{what} must be a user id")))
}

/// A REST answer (Nakama's JSON: snake_case, times as RFC 3339, objects as JSON text) in the
/// shape Nakama's JavaScript runtime gives: camelCase keys, times as Unix seconds, `metadata`,
/// `value`, `wallet` and `content` as objects, and a user's `id` as `userId`.
pub(crate) fn shaped(value: impl serde::Serialize) -> Value {
    shape(serde_json::to_value(value).unwrap_or(Value::Null), None)
}

fn shape(value: Value, key: Option<&str>) -> Value {
    match value {
        Value::Object(object) => {
            let is_user = key == Some("user") || key == Some("users");
            let mut out = Map::with_capacity(object.len());
            for (name, inner) in object {
                let name = if is_user && name == "id" {
                    "userId".to_owned()
                } else {
                    camel(&name)
                };
                let inner = match (name.as_str(), inner) {
                    // 64-bit integers the REST answers give as strings (proto3's JSON).
                    (
                        "score" | "subscore" | "numScore" | "maxNumScore" | "rank" | "rankCount",
                        Value::String(text),
                    ) => text
                        .parse::<i64>()
                        .map(Value::from)
                        .unwrap_or(Value::String(text)),
                    ("metadata" | "value" | "wallet" | "content", Value::String(text)) => {
                        match serde_json::from_str::<Value>(&text) {
                            Ok(parsed @ (Value::Object(_) | Value::Array(_))) => parsed,
                            _ => Value::String(text),
                        }
                    }
                    (n, Value::String(text)) if n.ends_with("Time") => {
                        chrono::DateTime::parse_from_rfc3339(&text)
                            .map(|t| Value::from(t.timestamp()))
                            .unwrap_or(Value::String(text))
                    }
                    (n, inner) => shape(inner, Some(n)),
                };
                out.insert(name, inner);
            }
            Value::Object(out)
        }
        Value::Array(list) => Value::Array(list.into_iter().map(|v| shape(v, key)).collect()),
        other => other,
    }
}

/// `snake_case` as `camelCase`.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_answers_take_the_javascript_runtime_shape() {
        let rest = serde_json::json!({
            "friends": [{
                "user": { "id": "u1", "display_name": "Ana", "metadata": "{\"lvl\":3}",
                          "create_time": "2026-01-01T00:00:00Z" },
                "state": 0,
                "update_time": "2026-01-01T00:00:01Z",
            }],
            "cursor": "c",
        });
        assert_eq!(
            shaped(rest),
            serde_json::json!({
                "friends": [{
                    "user": { "userId": "u1", "displayName": "Ana", "metadata": { "lvl": 3 },
                              "createTime": 1_767_225_600 },
                    "state": 0,
                    "updateTime": 1_767_225_601,
                }],
                "cursor": "c",
            })
        );
    }
}
