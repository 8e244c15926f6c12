//! Matches from server code: `matchCreate` (an authoritative match of a handler, JavaScript or
//! Rust, on this node), `matchGet`, `matchList` (label queries in the matchmaker's syntax,
//! across the cluster) and `matchSignal`.

use std::collections::HashMap;

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, refused, shaped, Args, ServerHost};
use crate::functions::{RpcCode, RpcError};
use crate::matches::error::MatchError;
use crate::matches::handler::MatchParams;
use crate::matches::listing::ListAsk;

pub(super) const NAMES: &[&str] = &["matchCreate", "matchGet", "matchList", "matchSignal"];

/// The players a match made by `matchCreate` may hold (its handler refuses sooner, as
/// Nakama's handlers do, in `matchJoinAttempt`).
const CREATED_CAPACITY: usize = 1024;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let matches = host.matches()?;
    match name {
        // matchCreate(module, params?)
        "matchCreate" => {
            let module = args.string(0, "module")?;
            let data = match args.get(1) {
                Value::Null => json!({}),
                Value::Object(_) => args.get(1).clone(),
                _ => return Err(invalid("params must be an object")),
            };
            let params = MatchParams {
                capacity: CREATED_CAPACITY,
                params: flat(&data),
                data: Some(data),
                ..MatchParams::default()
            };
            // Inside the runtime: the match's task is spawned there.
            let handle = host
                .wait(async { matches.create_authoritative(&module, params, None) })?
                .map_err(match_error)?;
            Ok(Value::String(handle.id_text.clone()))
        }
        "matchGet" => {
            let id = args.string(0, "id")?;
            Ok(match matches.authoritative_here(&id) {
                Ok(handle) => json!({
                    "matchId": handle.id_text,
                    "authoritative": true,
                    "label": handle.label().unwrap_or_default(),
                    "size": handle.size(),
                    "tickRate": handle.tick_rate_hz(),
                    "handlerName": handle.handler,
                }),
                Err(_) => Value::Null,
            })
        }
        // matchList(limit, authoritative?, label?, minSize?, maxSize?, query?)
        "matchList" => {
            let size = |i: usize, what: &str| -> Result<Option<usize>, JsError> {
                Ok(args.int(i, what)?.map(|n| n.max(0) as usize))
            };
            let ask = ListAsk {
                limit: args.int(0, "limit")?.unwrap_or(1).clamp(1, 100) as usize,
                authoritative: args.bool(1),
                label: args.opt_string(2),
                min_size: size(3, "minSize")?,
                max_size: size(4, "maxSize")?,
                query: args.opt_string(5),
            };
            let found = host
                .wait(matches.list_matches(&ask))?
                .map_err(|message| refused(RpcError::invalid(message)))?;
            Ok(Value::Array(found.into_iter().map(shaped).collect()))
        }
        // matchSignal(id, data)
        "matchSignal" => {
            let id = args.string(0, "id")?;
            let data = args.opt_string(1).unwrap_or_default();
            host.wait(matches.signal(&id, data))?
                .map(Value::String)
                .map_err(match_error)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// Top-level parameters as text, for Rust handlers (which read `params`).
fn flat(data: &Value) -> HashMap<String, String> {
    data.as_object()
        .map(|object| {
            object
                .iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn match_error(error: MatchError) -> JsError {
    let code = match &error {
        MatchError::NotFound(_) | MatchError::Ended(_) => RpcCode::NotFound,
        MatchError::BadInput(_) => RpcCode::InvalidArgument,
        _ => RpcCode::FailedPrecondition,
    };
    refused(RpcError::new(code, error.to_string()))
}
