//! `event(name, properties, timestamp?, external?)`: an event for the module's own
//! `initializer.registerEvent(fn)` function, which is called with
//! `(ctx, logger, nk, { name, properties, timestamp, external })` — later, on a pool VM, one
//! event at a time in the order they were sent (`super::super::hooks::start_events`); the call
//! returns at once. Nakama hands such events to the event functions of its Go runtime; its
//! JavaScript runtime has no `registerEvent`, so that function is Muster's.
//!
//! At most [`MAX_PENDING`] events wait; past that an event is dropped with a warning and
//! counted ([`Events::dropped`]). With no event function registered, events are dropped
//! without a word (as Nakama, when no event function is registered).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use muster_js::JsError;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::context::{invalid, Args, ServerHost};

pub(super) const NAMES: &[&str] = &["event"];

/// Most events waiting for the event function.
pub(crate) const MAX_PENDING: usize = 10_000;
/// Most properties one event carries.
const MAX_PROPERTIES: usize = 256;
/// Largest event (its name and properties), in bytes.
const MAX_EVENT_BYTES: usize = 64 * 1024;

/// The queue of events to the event function.
#[derive(Default)]
pub(crate) struct Events {
    queue: OnceLock<mpsc::Sender<Value>>,
    dropped: AtomicU64,
}

impl Events {
    /// The queue's receiving end: made by the first call, `None` after it.
    pub(crate) fn open(&self) -> Option<mpsc::Receiver<Value>> {
        let (sender, receiver) = mpsc::channel(MAX_PENDING);
        self.queue.set(sender).ok().map(|()| receiver)
    }

    /// Events dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn push(&self, event: Value) {
        let Some(queue) = self.queue.get() else {
            return;
        };
        match queue.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(
                    name = %event["name"].as_str().unwrap_or_default(),
                    dropped,
                    "nk.event: {MAX_PENDING} events wait for the event function already; this one is dropped"
                );
            }
        }
    }
}

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    if name != "event" {
        return Err(JsError::new(format!("nk.{name} is not available"), 12));
    }
    let event = event(args)?;
    host.events.push(event);
    Ok(Value::Null)
}

/// `{ name, properties, timestamp, external }` from the call's arguments, checked.
fn event(args: &Args) -> Result<Value, JsError> {
    let name = args.string(0, "eventName")?;
    let properties = match args.get(1) {
        Value::Null => Map::new(),
        Value::Object(object) => {
            if object.len() > MAX_PROPERTIES {
                return Err(invalid(format!(
                    "an event has at most {MAX_PROPERTIES} properties"
                )));
            }
            if let Some((key, _)) = object.iter().find(|(_, v)| !v.is_string()) {
                return Err(invalid(format!(
                    "expects properties to be strings: {key:?} is not"
                )));
            }
            object.clone()
        }
        _ => return Err(invalid("expects properties to be an object of strings")),
    };
    let size = name.len()
        + properties
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum::<usize>();
    if size > MAX_EVENT_BYTES {
        return Err(invalid(format!(
            "an event is at most {MAX_EVENT_BYTES} bytes"
        )));
    }
    let timestamp = match args.int(2, "timestamp")? {
        Some(seconds) => seconds,
        None => crate::base::clock::now_ms() / 1000,
    };
    let external = match args.get(3) {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => return Err(invalid("expects external to be a boolean")),
    };
    Ok(json!({
        "name": name,
        "properties": properties,
        "timestamp": timestamp,
        "external": external,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts() {
        let events = Events::default();
        let mut receiver = events.open().expect("the first open");
        assert!(events.open().is_none(), "one receiver");
        for i in 0..MAX_PENDING + 3 {
            events.push(json!({ "name": i.to_string() }));
        }
        assert_eq!(events.dropped(), 3);
        assert_eq!(receiver.try_recv().expect("the first")["name"], "0");
    }

    #[test]
    fn bad_input_is_refused_with_code_3() {
        let args = |list: Value| Args(list.as_array().cloned().unwrap_or_default());
        for bad in [
            json!([]),
            json!(["e", { "a": 1 }]),
            json!(["e", "props"]),
            json!(["e", {}, "now"]),
            json!(["e", {}, 1, "yes"]),
        ] {
            let error = event(&args(bad.clone())).expect_err(&bad.to_string());
            assert_eq!(error.code, 3, "{bad}");
        }
        let ok = event(&args(json!(["e", { "a": "1" }, 10, true]))).expect("valid");
        assert_eq!(
            ok,
            json!({ "name": "e", "properties": { "a": "1" }, "timestamp": 10, "external": true })
        );
    }
}
