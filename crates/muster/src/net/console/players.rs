//! Players: search, an account with everything it holds, and an operator's changes to it
//! (metadata, wallet, ban, ending its sessions, deletion), each audited; an export of the
//! account's data as JSON.

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::{domain, user_id};
use super::player_data;
use super::{Answer, ConsoleApiError};
use crate::economy::store::{InventoryItem, LedgerEntry};
use crate::economy::Change;
use crate::net::state::AppState;

/// Items and ledger rows an account page shows at first (the ledger pages on).
const PAGE: usize = 100;

#[derive(Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
    after: Option<String>,
}

/// `GET /api/accounts?q=&after=`: accounts by id, device, email, custom id, or the start of a
/// username or display name; with no `q`, every account by username (`after` pages).
pub async fn search(As { state, .. }: As<Readonly>, Query(query): Query<SearchQuery>) -> Answer {
    let found = console(&state)?
        .search_accounts(&query.q, query.after)
        .await?;
    let next = (query.q.trim().is_empty() && found.len() >= crate::console::MAX_ACCOUNT_PAGE)
        .then(|| found.last().map(|a| a.username.clone()))
        .flatten();
    let accounts: Vec<Value> = found
        .into_iter()
        .map(|a| {
            json!({
                "id": a.id,
                "username": a.username,
                "display_name": a.display_name,
                "create_time": a.create_time_ms / 1000,
                "banned": a.disable_time_ms.is_some(),
                "online": state.services.router.is_online(a.id),
            })
        })
        .collect();
    Ok(Json(json!({"accounts": accounts, "next": next})))
}

fn ledger_json(entries: &[LedgerEntry]) -> Vec<Value> {
    entries
        .iter()
        .map(|e| {
            json!({
                "id": e.id,
                "time": e.create_time_ms,
                "reason": e.reason,
                "changes": e.changes.wallet,
                "items": e.changes.items,
                "balances": e.balances.wallet,
                "metadata": serde_json::from_str::<Value>(&e.metadata).unwrap_or(Value::Null),
            })
        })
        .collect()
}

fn inventory_json(items: &[InventoryItem]) -> Vec<Value> {
    items
        .iter()
        .map(|i| {
            json!({
                "item_id": i.item_id,
                "kind": i.kind,
                "count": i.count,
                "properties": serde_json::from_str::<Value>(&i.properties).unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// Everything the account page shows.
async fn account_json(state: &AppState, id: Uuid) -> Result<Value, ConsoleApiError> {
    let online = state.services.router.is_online(id);
    let account = state
        .services
        .accounts
        .account(id, online)
        .await
        .map_err(domain)?;
    let economy = &state.services.economy;
    let inventory = economy
        .inventory(id, Some(PAGE), None)
        .await
        .map_err(domain)?;
    let ledger = economy.ledger(id, Some(PAGE), None).await.map_err(domain)?;
    let friends = state
        .services
        .friends
        .list(id, PAGE, None, "")
        .await
        .map_err(domain)?;
    let groups = state
        .services
        .groups
        .of_user(&id.to_string(), Some(PAGE), None, "")
        .await
        .map_err(domain)?;
    let notifications = state
        .services
        .notifications
        .list(id, 100, "")
        .await
        .map_err(domain)?;
    let sessions: Vec<Value> = state
        .services
        .registry
        .sessions_of(id)
        .iter()
        .map(|s| {
            json!({
                "session_id": s.session_id, "format": format!("{:?}", s.format),
                "status": state.services.status.status_of(s.session_id),
            })
        })
        .collect();
    let (storage, storage_cursor) = player_data::storage_page(state, id, None, true).await?;
    let (messages, messages_before) = player_data::messages_page(state, id, None).await?;
    let purchases_service = &state.services.purchases;
    let purchases = purchases_service
        .list_purchases(Some(id), PAGE, "")
        .await
        .map_err(domain)?;
    let subscriptions = purchases_service
        .list_subscriptions(Some(id), PAGE, "")
        .await
        .map_err(domain)?;
    Ok(json!({
        "account": account,
        "online": online,
        "sessions": sessions,
        "inventory": inventory_json(&inventory.items),
        "inventory_cursor": inventory.cursor,
        "ledger": ledger_json(&ledger.entries),
        "ledger_cursor": ledger.cursor,
        "friends": friends,
        "groups": groups,
        "notifications": notifications,
        "storage": storage,
        "storage_cursor": storage_cursor,
        "messages": messages,
        "messages_before": messages_before,
        "purchases": purchases,
        "subscriptions": subscriptions,
    }))
}

/// `GET /api/purchases/{transaction_id}`: a validated purchase, whoever made it.
pub async fn purchase(
    As { state, .. }: As<Readonly>,
    Path(transaction_id): Path<String>,
) -> Answer {
    let found = state
        .services
        .purchases
        .purchase_by_transaction_id(&transaction_id)
        .await
        .map_err(domain)?;
    found
        .map(|p| Json(json!(p)))
        .ok_or(ConsoleApiError::NotFound)
}

/// `GET /api/accounts/{id}`.
pub async fn account(As { state, .. }: As<Readonly>, Path(id): Path<String>) -> Answer {
    Ok(Json(account_json(&state, user_id(&id)?).await?))
}

#[derive(Deserialize)]
pub struct LedgerQuery {
    cursor: Option<String>,
}

/// `GET /api/accounts/{id}/ledger?cursor=`: the next page of the ledger, newest first.
pub async fn ledger(
    As { state, .. }: As<Readonly>,
    Path(id): Path<String>,
    Query(query): Query<LedgerQuery>,
) -> Answer {
    let page = state
        .services
        .economy
        .ledger(user_id(&id)?, Some(PAGE), query.cursor.as_deref())
        .await
        .map_err(domain)?;
    Ok(Json(
        json!({"ledger": ledger_json(&page.entries), "cursor": page.cursor}),
    ))
}

/// `GET /api/accounts/{id}/export`: the account's data as a JSON file (developer).
pub async fn export(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleApiError> {
    let id = user_id(&id)?;
    let mut data = account_json(&state, id).await?;
    // The whole ledger and inventory, page by page.
    let economy = &state.services.economy;
    let ledger = every_page(|cursor| async move {
        let page = economy
            .ledger(id, Some(PAGE), cursor.as_deref())
            .await
            .map_err(domain)?;
        Ok((ledger_json(&page.entries), page.cursor))
    })
    .await?;
    let items = every_page(|cursor| async move {
        let page = economy
            .inventory(id, Some(PAGE), cursor.as_deref())
            .await
            .map_err(domain)?;
        Ok((inventory_json(&page.items), page.cursor))
    })
    .await?;
    let storage = every_page(|cursor| {
        let state = &state;
        async move { player_data::storage_page(state, id, cursor.as_deref(), false).await }
    })
    .await?;
    let messages = every_page(|before| {
        let state = &state;
        async move {
            let before = before.and_then(|b| b.parse().ok());
            let (messages, next) = player_data::messages_page(state, id, before).await?;
            Ok((messages, next.map(|n| n.to_string())))
        }
    })
    .await?;
    data["ledger"] = Value::Array(ledger);
    data["inventory"] = Value::Array(items);
    data["storage"] = Value::Array(storage);
    data["messages"] = Value::Array(messages);
    for cursor in [
        "ledger_cursor",
        "inventory_cursor",
        "storage_cursor",
        "messages_before",
    ] {
        data[cursor] = Value::Null;
    }
    console(&state)?
        .audit(&operator, "account_export", &id.to_string(), json!({}))
        .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"account-{id}.json\""),
            ),
        ],
        data.to_string(),
    )
        .into_response())
}

/// Every row of a paged listing: `page(cursor)` answers one page's rows and the next cursor.
async fn every_page<F, Fut>(mut page: F) -> Result<Vec<Value>, ConsoleApiError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<Value>, Option<String>), ConsoleApiError>>,
{
    let mut rows = Vec::new();
    let mut cursor = None;
    loop {
        let (more, next) = page(cursor).await?;
        rows.extend(more);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(rows),
        }
    }
}

#[derive(Deserialize)]
pub struct WalletBody {
    /// Currency to a signed amount: positive grants, negative takes.
    changeset: BTreeMap<String, i64>,
    /// Why, in the ledger's metadata.
    #[serde(default)]
    reason: String,
}

/// `POST /api/accounts/{id}/wallet`: grants and takes currencies through the economy's one
/// write path (a ledger row, reason `console`); an overdraw is refused and changes nothing.
pub async fn wallet(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<WalletBody>,
) -> Answer {
    let id = user_id(&id)?;
    if body.changeset.is_empty() || body.changeset.values().any(|a| *a == 0) {
        return Err(ConsoleApiError::BadRequest(
            "A change names at least one currency, each with a non-zero amount.".into(),
        ));
    }
    if body.reason.len() > 256 {
        return Err(ConsoleApiError::BadRequest(
            "A reason is at most 256 bytes.".into(),
        ));
    }
    let mut change = Change::new(id, "console");
    for (currency, amount) in &body.changeset {
        change = if *amount < 0 {
            change.spend(currency, amount.checked_neg().unwrap_or(i64::MAX))
        } else {
            change.grant(currency, *amount)
        };
    }
    change = change.metadata(&json!({"console_user": operator.username, "reason": body.reason}));
    let receipt = state.services.economy.apply(change).await.map_err(domain)?;
    console(&state)?
        .audit(
            &operator,
            "wallet_update",
            &id.to_string(),
            json!({"changeset": body.changeset, "reason": body.reason, "ledger_id": receipt.ledger_id}),
        )
        .await?;
    Ok(Json(
        json!({"wallet": receipt.wallet, "ledger_id": receipt.ledger_id}),
    ))
}

#[derive(Deserialize)]
pub struct MetadataBody {
    /// A JSON object (or its text).
    metadata: Value,
}

/// `POST /api/accounts/{id}/metadata`: replaces the account's metadata.
pub async fn metadata(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<MetadataBody>,
) -> Answer {
    let id = user_id(&id)?;
    let text = match &body.metadata {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    state
        .services
        .accounts
        .set_metadata(id, &text)
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(
            &operator,
            "account_metadata",
            &id.to_string(),
            json!({"metadata": text}),
        )
        .await?;
    Ok(Json(json!({})))
}

/// `POST /api/accounts/{id}/ban` and `/unban`.
pub async fn ban(
    As {
        state, operator, ..
    }: As<Developer>,
    Path((id, action)): Path<(String, String)>,
) -> Answer {
    let id = user_id(&id)?;
    let found = match action.as_str() {
        "ban" => state.services.accounts.ban(&[id]).await,
        "unban" => state.services.accounts.unban(&[id]).await,
        _ => return Err(ConsoleApiError::NotFound),
    }
    .map_err(domain)?;
    if found.is_empty() {
        return Err(ConsoleApiError::NotFound);
    }
    console(&state)?
        .audit(
            &operator,
            &format!("account_{action}"),
            &id.to_string(),
            json!({}),
        )
        .await?;
    Ok(Json(json!({})))
}

/// `POST /api/accounts/{id}/sessions/end`: closes every socket of the player, on every node.
pub async fn end_sessions(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
) -> Answer {
    let id = user_id(&id)?;
    state.services.accounts.end_sessions(&[id]);
    console(&state)?
        .audit(&operator, "sessions_end", &id.to_string(), json!({}))
        .await?;
    Ok(Json(json!({})))
}

/// `DELETE /api/accounts/{id}`: the account and what it owns, as a player's own deletion.
pub async fn delete(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
) -> Answer {
    let id = user_id(&id)?;
    state.services.accounts.delete(id).await.map_err(domain)?;
    state.services.leaderboards.forget_owner(id).await;
    console(&state)?
        .audit(&operator, "account_delete", &id.to_string(), json!({}))
        .await?;
    Ok(Json(json!({})))
}
