//! Our own read API for the economy (Nakama has none for clients), for the caller's account:
//!
//! - `GET /v2/economy/wallet` → `{"wallet": {"coins": 1000000}}`
//! - `GET /v2/economy/inventory?limit=100&cursor=` → `{"items": [{"id", "kind", "count",
//!   "properties": {...}, "update_time"}], "cursor"}`, by item id; pass `cursor` back for the
//!   next page; no `cursor` means the last page.
//! - `GET /v2/economy/ledger?limit=100&cursor=` → `{"entries": [{"id", "changes", "balances",
//!   "reason", "metadata", "idempotency_key", "create_time"}], "cursor"}`, newest first; pass
//!   `cursor` back for the next (older) page; no `cursor` means the last page.
//!
//! Amounts and counts are JSON integers (up to 2^63-1); ids are strings.

use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Player;
use super::extract::ApiQuery;
use super::response::Done;

/// A stored JSON object column, as a JSON value (an empty object if it does not parse).
fn object(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!({}))
}

pub async fn wallet(Player(caller, services, _): Player) -> Done {
    let wallet = services.economy.wallet(caller.uid).await?;
    Ok(Json(json!({ "wallet": wallet })))
}

pub async fn inventory(
    Player(caller, services, _): Player,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Done {
    let page = services
        .economy
        .inventory(caller.uid, query.limit, query.cursor.as_deref())
        .await?;
    let items: Vec<Value> = page
        .items
        .into_iter()
        .map(|item| {
            json!({
                "id": item.item_id,
                "kind": item.kind,
                "count": item.count,
                "properties": object(&item.properties),
                "update_time": crate::base::clock::rfc3339(item.update_time_ms),
            })
        })
        .collect();
    let mut body = json!({ "items": items });
    if let Some(cursor) = page.cursor {
        body["cursor"] = cursor.into();
    }
    Ok(Json(body))
}

/// `?limit=&cursor=` of a paged listing.
#[derive(Deserialize)]
pub struct PageQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

pub async fn ledger(
    Player(caller, services, _): Player,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Done {
    let page = services
        .economy
        .ledger(caller.uid, query.limit, query.cursor.as_deref())
        .await?;
    let entries: Vec<Value> = page
        .entries
        .into_iter()
        .map(|entry| {
            let mut row = json!({
                "id": entry.id.to_string(),
                "changes": entry.changes,
                "balances": entry.balances,
                "reason": entry.reason,
                "metadata": object(&entry.metadata),
                "create_time": crate::base::clock::rfc3339(entry.create_time_ms),
            });
            if let Some(key) = entry.idempotency_key {
                row["idempotency_key"] = key.into();
            }
            row
        })
        .collect();
    let mut body = json!({ "entries": entries });
    if let Some(cursor) = page.cursor {
        body["cursor"] = cursor.into();
    }
    Ok(Json(body))
}
