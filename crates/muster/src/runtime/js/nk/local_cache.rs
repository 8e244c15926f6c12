//! `localcacheGet`, `localcachePut`, `localcacheDelete`, `localcacheClear`: values every VM of
//! this node shares (not other nodes), each with an optional time to live — Nakama's local
//! cache. Values are strings, numbers or booleans, as Nakama takes them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use muster_js::JsError;
use parking_lot::Mutex;
use serde_json::Value;

use super::context::{invalid, Args};

pub(super) const NAMES: &[&str] = &[
    "localcacheGet",
    "localcachePut",
    "localcacheDelete",
    "localcacheClear",
];

/// Most entries the cache holds; a put of a new key past it is refused (RESOURCE_EXHAUSTED).
pub const MAX_ENTRIES: usize = 100_000;

/// Longest key, in bytes.
const MAX_KEY_BYTES: usize = 256;

/// Longest string value, in bytes.
const MAX_VALUE_BYTES: usize = 64 * 1024;

/// The node's cache.
#[derive(Default)]
pub struct LocalCache {
    entries: Mutex<HashMap<String, (Value, Option<Instant>)>>,
}

impl LocalCache {
    pub(super) fn call(&self, name: &str, args: &Args) -> Result<Value, JsError> {
        if name == "localcacheClear" {
            self.entries.lock().clear();
            return Ok(Value::Null);
        }
        let key = args.string(0, "key")?;
        if key.is_empty() {
            return Err(invalid("expects non empty key string"));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(invalid(format!("key is longer than {MAX_KEY_BYTES} bytes")));
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        match name {
            // localcacheGet(key, defaultValue?)
            "localcacheGet" => match entries.get(&key) {
                Some((_, Some(expires))) if *expires <= now => {
                    entries.remove(&key);
                    Ok(args.get(1).clone())
                }
                Some((value, _)) => Ok(value.clone()),
                None => Ok(args.get(1).clone()),
            },
            // localcachePut(key, value, ttlSeconds?)
            "localcachePut" => {
                let value = args.get(1).clone();
                match &value {
                    Value::String(s) if s.is_empty() => {
                        return Err(invalid("expects a non empty value"))
                    }
                    Value::String(s) if s.len() > MAX_VALUE_BYTES => {
                        return Err(invalid(format!(
                            "value is longer than {MAX_VALUE_BYTES} bytes"
                        )))
                    }
                    Value::String(_) | Value::Number(_) | Value::Bool(_) => {}
                    Value::Null => return Err(invalid("expects a non empty value")),
                    _ => {
                        return Err(invalid(
                            "unsupported value type: must be string, numeric or boolean",
                        ))
                    }
                }
                let ttl = args.int(2, "ttl")?.unwrap_or(0);
                if ttl < 0 {
                    return Err(invalid("ttl must be 0 or more"));
                }
                let expires = (ttl > 0).then(|| now + Duration::from_secs(ttl as u64));
                if !entries.contains_key(&key) && entries.len() >= MAX_ENTRIES {
                    // Expired entries make room first.
                    entries.retain(|_, (_, e)| e.is_none_or(|at| at > now));
                    if entries.len() >= MAX_ENTRIES {
                        return Err(JsError::new(
                            format!("the local cache holds its most entries ({MAX_ENTRIES})"),
                            8,
                        ));
                    }
                }
                entries.insert(key, (value, expires));
                Ok(Value::Null)
            }
            "localcacheDelete" => {
                entries.remove(&key);
                Ok(Value::Null)
            }
            _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(cache: &LocalCache, name: &str, args: Value) -> Result<Value, JsError> {
        cache.call(name, &Args(args.as_array().expect("array").clone()))
    }

    #[test]
    fn puts_gets_defaults_deletes_and_refuses_bad_values() {
        let cache = LocalCache::default();
        assert_eq!(
            call(&cache, "localcacheGet", json!(["k", 7])).unwrap(),
            json!(7)
        );
        call(&cache, "localcachePut", json!(["k", "v"])).unwrap();
        assert_eq!(
            call(&cache, "localcacheGet", json!(["k"])).unwrap(),
            json!("v")
        );
        call(&cache, "localcachePut", json!(["n", 3.5, 60])).unwrap();
        assert_eq!(
            call(&cache, "localcacheGet", json!(["n"])).unwrap(),
            json!(3.5)
        );
        call(&cache, "localcacheDelete", json!(["k"])).unwrap();
        assert_eq!(
            call(&cache, "localcacheGet", json!(["k"])).unwrap(),
            Value::Null
        );
        for bad in [
            json!(["", 1]),
            json!(["k", {"a": 1}]),
            json!(["k", 1, -1]),
            json!(["k"]),
        ] {
            assert_eq!(call(&cache, "localcachePut", bad).unwrap_err().code, 3);
        }
        call(&cache, "localcacheClear", json!([])).unwrap();
        assert_eq!(
            call(&cache, "localcacheGet", json!(["n"])).unwrap(),
            Value::Null
        );
    }
}
