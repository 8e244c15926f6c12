//! `partyList(limit?, open?, query?, cursor?)` → `{ parties: [{partyId, open, maxSize, label}],
//! cursor? }`: the parties **this node** holds (those created by its sessions), in the order of
//! their ids, filtered by `open` when given and by Nakama's label query (`+label.mode:ranked`,
//! the syntax match listings take) when given; hidden parties are left out. Other nodes'
//! parties are not listed (Nakama indexes every node's). `limit` is 1–100 (10 when absent); the
//! cursor is the last party listed's key, for the next page. Nakama's newer form with a
//! `showHidden` flag third (`partyList(limit, open, showHidden, query, cursor)`) is taken too:
//! a boolean third argument is that flag.

use muster_js::JsError;
use serde_json::{json, Value};
use uuid::Uuid;

use super::context::{invalid, Args, ServerHost};
use crate::matches::listing::LabelFields;
use crate::matches::query::Query;

pub(super) const NAMES: &[&str] = &["partyList"];

/// Longest label query, in bytes.
const MAX_QUERY_BYTES: usize = 4096;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    if name != "partyList" {
        return Err(JsError::new(format!("nk.{name} is not available"), 12));
    }
    let limit = args.int(0, "limit")?.unwrap_or(10);
    if !(1..=100).contains(&limit) {
        return Err(invalid("limit must be 1-100"));
    }
    let open = match args.get(1) {
        Value::Null => None,
        Value::Bool(b) => Some(*b),
        _ => return Err(invalid("expects open to be a boolean")),
    };
    // Nakama's newer form: showHidden third, then the query and the cursor.
    let (show_hidden, rest) = match args.get(2) {
        Value::Bool(b) => (*b, 3),
        _ => (false, 2),
    };
    let query = match args.get(rest) {
        Value::Null => None,
        Value::String(text) if text.is_empty() || text == "*" => None,
        Value::String(text) if text.len() > MAX_QUERY_BYTES => {
            return Err(invalid(format!(
                "query must be at most {MAX_QUERY_BYTES} bytes"
            )))
        }
        Value::String(text) => Some(
            Query::parse_fields(text, "label")
                .map_err(|e| invalid(format!("error parsing query string: {e}")))?,
        ),
        _ => return Err(invalid("expects query to be a string")),
    };
    let after = match args.get(rest + 1) {
        Value::Null => None,
        Value::String(text) if text.is_empty() => None,
        Value::String(text) => Some(Uuid::parse_str(text).map_err(|_| invalid("invalid cursor"))?),
        _ => return Err(invalid("expects cursor to be a string")),
    };
    let (parties, more) = host
        .services
        .parties
        .list_owned(after, limit as usize, |party| {
            (show_hidden || !party.hidden)
                && open.is_none_or(|open| party.open == open)
                && query
                    .as_ref()
                    .is_none_or(|query| LabelFields::of(Some(party.label.as_str())).satisfy(query))
        });
    let cursor = match more {
        true => parties.last().map(|p| p.key.to_string()),
        false => None,
    };
    let parties: Vec<Value> = parties
        .into_iter()
        .map(|party| {
            json!({
                "partyId": party.id,
                "open": party.open,
                "maxSize": party.max_size,
                // As Nakama keeps a party without a label.
                "label": if party.label.is_empty() { "{}".to_owned() } else { party.label },
            })
        })
        .collect();
    let mut answer = json!({ "parties": parties });
    if let Some(cursor) = cursor {
        answer["cursor"] = json!(cursor);
    }
    Ok(answer)
}
