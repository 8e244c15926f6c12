//! Before and after hooks, as Nakama's runtime calls them: the request (or realtime envelope)
//! in the shape a module sees (camelCase keys), what a before hook answers taken back in the
//! API's shape (snake_case keys). A before hook answers the request to go on with, or nothing
//! to refuse it; a throw refuses it with the thrown code. After hooks see the answer and the
//! request and change nothing.

use std::sync::Arc;

use muster_proto::realtime::MatchmakerUser;
use serde_json::{Map, Value};

use super::Module;
use crate::matches::matchmaker::MatchedHook;
use muster_js::{Hook, JsError};

/// Keys whose values are maps the game names (their keys are kept as they are).
const FREE_MAPS: &[&str] = &[
    "vars",
    "params",
    "properties",
    "string_properties",
    "stringProperties",
    "numeric_properties",
    "numericProperties",
];

impl Module {
    /// Whether any realtime hook is registered (checked before a message's name is built).
    pub fn has_rt_hooks(&self) -> bool {
        let bundle = self.bundle.read();
        !bundle.registered.rt_before.is_empty() || !bundle.registered.rt_after.is_empty()
    }

    /// Whether a `hook` is registered for `name` (Nakama's name of the call or message).
    pub fn has_hook(&self, hook: Hook, name: &str) -> bool {
        let bundle = self.bundle.read();
        let names = match hook {
            Hook::Before => &bundle.registered.before,
            Hook::After => &bundle.registered.after,
            Hook::RtBefore => &bundle.registered.rt_before,
            Hook::RtAfter => &bundle.registered.rt_after,
            Hook::MatchmakerMatched => return bundle.registered.matchmaker_matched,
            Hook::Schedule => &bundle.registered.schedule,
            Hook::Event => &bundle.registered.event,
        };
        names.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
    }

    /// Calls a hook with `data` (and `extra`, an after hook's request) in the API's shape;
    /// what it answered, in the API's shape.
    pub async fn call_hook(
        &self,
        hook: Hook,
        name: &str,
        mut context: Value,
        data: &Value,
        extra: Option<&Value>,
    ) -> Result<Option<Value>, JsError> {
        context["node"] = serde_json::json!(self.node);
        context["env"] = self.env.clone();
        let id = name.to_owned();
        let args: Vec<Value> = std::iter::once(data).chain(extra).map(to_camel).collect();
        let cost = self.hook_cost(hook, &id);
        let answer = self
            .run(&cost, move |vm| vm.call_hook(hook, &id, &context, &args))
            .await;
        self.metrics.hook_called(hook.table(), name, answer.is_ok());
        if let Err(error) = &answer {
            self.hook_errors.write().insert(
                (hook, name.to_owned()),
                (
                    crate::base::clock::now_ms(),
                    error.code,
                    error.message.clone(),
                ),
            );
        }
        answer.map(|answer| answer.map(|a| to_snake(&a)))
    }

    /// Every registered hook and match handler with its calls on this node by outcome and its
    /// last error (for the console): `{table, hook, calls, last_error}` (the event function's
    /// with `dropped`, the events its full queue dropped).
    pub fn hooks_report(&self) -> Vec<Value> {
        let registered = self.registered();
        let mut calls = self.metrics.hook_calls();
        let errors = self.hook_errors.read();
        let tables: [(Hook, &[String]); 6] = [
            (Hook::Before, &registered.before),
            (Hook::After, &registered.after),
            (Hook::RtBefore, &registered.rt_before),
            (Hook::RtAfter, &registered.rt_after),
            (Hook::Schedule, &registered.schedule),
            (Hook::Event, &registered.event),
        ];
        let matched = registered
            .matchmaker_matched
            .then(|| (Hook::MatchmakerMatched, "matched".to_owned()));
        let hooks = tables
            .iter()
            .flat_map(|(hook, names)| names.iter().map(move |n| (*hook, n.clone())))
            .chain(matched);
        let mut report: Vec<Value> = hooks
            .map(|(hook, name)| {
                let last_error = errors.get(&(hook, name.clone())).map(|(at, code, message)| {
                    serde_json::json!({"time": at, "code": code, "message": message})
                });
                let mut row = serde_json::json!({
                    "table": hook.table(),
                    "hook": name,
                    "calls": calls.remove(&(hook.table().to_owned(), name.clone())).unwrap_or_default(),
                    "last_error": last_error,
                });
                // The event function: also the events dropped, its queue full.
                if hook == Hook::Event {
                    row["dropped"] = serde_json::json!(self.host.events.dropped());
                }
                row
            })
            .collect();
        for name in &registered.matches {
            let failures = self.metrics.failures_of(&format!("match:{name}"));
            report.push(serde_json::json!({
                "table": "match",
                "hook": name,
                "calls": {"failed": failures},
                "last_error": null,
            }));
        }
        report
    }
}

/// Starts the task that hands each `nk.event` to `registerEvent`'s function, one at a time in
/// the order they were sent, on a pool VM (the bundle in force decides whether there is one:
/// with none, the event is dropped). It ends with the module.
pub(super) fn start_events(module: &Arc<Module>) {
    let Some(mut queue) = module.host.events.open() else {
        return;
    };
    let weak = Arc::downgrade(module);
    module.host.spawn(async move {
        while let Some(event) = queue.recv().await {
            let Some(module) = weak.upgrade() else { return };
            if !module.has_hook(Hook::Event, "event") {
                continue;
            }
            let context = serde_json::json!({
                "executionMode": "event",
                "queryParams": {},
                "headers": {},
                "vars": {},
            });
            let answer = module
                .call_hook(Hook::Event, "event", context, &event, None)
                .await;
            if let Err(error) = answer {
                tracing::warn!(message = %error.message, "the JavaScript event function failed");
            }
        }
    });
}

/// `registerMatchmakerMatched`: told of every group the matchmaker forms, it may answer the
/// id of a match it made for them.
pub struct JsMatched(pub Arc<Module>);

#[async_trait::async_trait]
impl MatchedHook for JsMatched {
    async fn matched(&self, users: Vec<MatchmakerUser>) -> Result<Option<String>, String> {
        let entries: Vec<Value> = users
            .into_iter()
            .map(|user| {
                let presence = user.presence.unwrap_or_default();
                let mut properties = Map::new();
                for (k, v) in user.string_properties {
                    properties.insert(k, Value::from(v));
                }
                for (k, v) in user.numeric_properties {
                    properties.insert(k, serde_json::json!(v));
                }
                serde_json::json!({
                    "presence": {
                        "user_id": presence.user_id,
                        "session_id": presence.session_id,
                        "username": presence.username,
                        "node": self.0.node,
                    },
                    "properties": properties,
                    "party_id": user.party_id,
                })
            })
            .collect();
        let context = serde_json::json!({ "executionMode": "matchmaker" });
        match self
            .0
            .call_hook(
                Hook::MatchmakerMatched,
                "matched",
                context,
                &Value::Array(entries),
                None,
            )
            .await
        {
            Ok(Some(Value::String(id))) if !id.is_empty() => Ok(Some(id)),
            Ok(_) => Ok(None),
            Err(error) => Err(error.message),
        }
    }
}

/// `snake_case` keys as `camelCase`, recursively (free maps kept).
pub fn to_camel(value: &Value) -> Value {
    convert(value, &super::nk::context::camel)
}

/// `camelCase` keys as `snake_case`, recursively (free maps kept).
pub fn to_snake(value: &Value) -> Value {
    convert(value, &|key| {
        let mut out = String::with_capacity(key.len() + 4);
        for c in key.chars() {
            if c.is_ascii_uppercase() {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    })
}

fn convert(value: &Value, rename: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::Object(object) => {
            let mut out = Map::with_capacity(object.len());
            for (key, inner) in object {
                let inner = if FREE_MAPS.contains(&key.as_str()) {
                    inner.clone()
                } else {
                    convert(inner, rename)
                };
                out.insert(rename(key), inner);
            }
            Value::Object(out)
        }
        Value::Array(list) => Value::Array(list.iter().map(|v| convert(v, rename)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_case_both_ways_and_free_maps_stay() {
        let api = serde_json::json!({
            "account": { "id": "d1", "vars": { "first_login": "1" } },
            "objects": [{ "permission_read": 2, "value": "{\"a_b\":1}" }],
        });
        let module = to_camel(&api);
        assert_eq!(
            module,
            serde_json::json!({
                "account": { "id": "d1", "vars": { "first_login": "1" } },
                "objects": [{ "permissionRead": 2, "value": "{\"a_b\":1}" }],
            })
        );
        assert_eq!(to_snake(&module), api);
    }
}
