//! The built-in server functions: spending and granting value ("spend some coins", "grant an
//! item", what a load test of wallet and inventory writes calls) and their counterpart, and
//! banning players. Each is registered when listed in `runtime.builtin_functions`.
//!
//! The value functions spend and grant, so players may not call them unless the studio opts in
//! (`runtime.player_builtin_functions`): by default only server code and HTTP-key calls may, and
//! a player's call is refused with `PERMISSION_DENIED` before its payload is read.
//!
//! | id | payload | answer |
//! |---|---|---|
//! | `wallet_spend` | `{"amount": 10, "currency": "coins"}` (currency defaults to `coins`), or `{"amounts": {"coins": 10, "gems": 1}}` to spend several currencies at once | `{"ledger_id": "42", "wallet": {"coins": 999990}}` |
//! | `inventory_grant` | `{"item": "sword", "count": 1, "kind": "weapon", "properties": {...}}` (count defaults to 1, kind to `default`) | `{"ledger_id": "43", "items": {"sword": 3}}` |
//! | `inventory_consume` | `{"item": "sword", "count": 1}` | `{"ledger_id": "44", "items": {"sword": 2}}` |
//! | `ban_users`, `unban_users` | `{"user_ids": ["..."]}` | `{"user_ids": [...]}` (those that exist); never callable by players |
//! | `notifications_send` | `{"notifications": [{"user_id": "...", "subject": "...", "content": {...}, "code": 1, "persistent": true, "sender_id": "..."}]}` (`sender_id` optional: the system) | `{}`; never callable by players |
//!
//! Every payload may also carry `"metadata": {...}` (stored in the ledger row),
//! `"idempotency_key": "..."` (a retry with the same key applies once and gets the first answer)
//! and, in server-to-server calls made with the HTTP key only, `"user_id": "..."` naming the
//! account. The answer's `wallet` / `items` hold the new balances of what the call touched.
//! Unknown payload keys are refused, so a typo cannot silently spend nothing.
//!
//! `inventory_grant` trusts its caller, as a load test of inventory writes needs; a real game
//! would rather register its own function deciding what to grant, and drop `inventory_grant`
//! from the list. Load tests opt players in to it.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Call, Functions, RpcCode, RpcError, ServerFunction};
use crate::economy::{Change, Receipt};

/// Registers the built-ins named in `names` that `functions` does not already have (a game's
/// own function of the same id wins). Those named in `for_players` players may call too.
pub fn register(functions: &mut Functions, names: &[String], for_players: &[String]) {
    for name in names {
        if functions.contains(name) {
            continue;
        }
        let players = for_players.contains(name);
        // The ids are constants known to be valid.
        let _ = match name.as_str() {
            "wallet_spend" => functions.register(name, Guarded::new(WalletSpend, players)),
            "inventory_grant" => functions.register(name, Guarded::new(InventoryGrant, players)),
            "inventory_consume" => {
                functions.register(name, Guarded::new(InventoryConsume, players))
            }
            // Never a player's: the configuration refuses them in the players' list.
            "ban_users" => functions.register(name, Guarded::new(Ban { ban: true }, false)),
            "unban_users" => functions.register(name, Guarded::new(Ban { ban: false }, false)),
            "notifications_send" => {
                functions.register(name, Guarded::new(NotificationsSend, false))
            }
            _ => continue,
        };
    }
}

/// `ban_users` / `unban_users`: `{"user_ids": ["..."]}` (at most 1,000) →
/// `{"user_ids": [...]}`, the accounts that exist, now banned (or no longer). A ban refuses the
/// players' tokens and ends their sockets at once, on every node (see `Accounts::ban`).
struct Ban {
    ban: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BanPayload {
    user_ids: Vec<String>,
}

#[async_trait::async_trait]
impl ServerFunction for Ban {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let payload: BanPayload = call.json()?;
        let ids = payload
            .user_ids
            .iter()
            .map(|id| {
                uuid::Uuid::parse_str(id)
                    .map_err(|_| RpcError::invalid(format!("Invalid user ID {id:?}.")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let done = if self.ban {
            call.accounts.ban(&ids).await?
        } else {
            call.accounts.unban(&ids).await?
        };
        Ok(serde_json::json!({ "user_ids": done }).to_string())
    }
}

/// `notifications_send`: `{"notifications": [...]}` (at most 1,000), each to one user; the
/// persistent ones are stored (all or none), then every one is delivered to its user's open
/// sockets on any node. Codes must be above 0: the negative ones are the system's own (as in
/// Nakama's `notificationSend`).
struct NotificationsSend;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NotificationsPayload {
    notifications: Vec<NotificationPayload>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NotificationPayload {
    user_id: String,
    subject: String,
    content: serde_json::Value,
    code: i32,
    #[serde(default)]
    persistent: bool,
    #[serde(default)]
    sender_id: Option<String>,
}

fn user_id(text: &str) -> Result<uuid::Uuid, RpcError> {
    uuid::Uuid::parse_str(text).map_err(|_| RpcError::invalid(format!("Invalid user ID {text:?}.")))
}

#[async_trait::async_trait]
impl ServerFunction for NotificationsSend {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let payload: NotificationsPayload = call.json()?;
        let mut batch = Vec::with_capacity(payload.notifications.len());
        for n in payload.notifications {
            if n.code <= 0 {
                return Err(RpcError::invalid(
                    "A notification's code must be above 0 (negative codes are the system's).",
                ));
            }
            batch.push(crate::notifications::NewNotification {
                user_id: user_id(&n.user_id)?,
                subject: n.subject,
                content: n.content.to_string(),
                code: n.code,
                sender_id: n.sender_id.as_deref().map(user_id).transpose()?,
                persistent: n.persistent,
            });
        }
        call.notifications.send(batch).await?;
        Ok("{}".into())
    }
}

/// A built-in that refuses players' calls unless they were opted in.
struct Guarded<F> {
    function: F,
    players: bool,
}

impl<F> Guarded<F> {
    fn new(function: F, players: bool) -> Guarded<F> {
        Guarded { function, players }
    }
}

#[async_trait::async_trait]
impl<F: ServerFunction> ServerFunction for Guarded<F> {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        if call.caller.is_some() && !self.players {
            return Err(RpcError::new(
                RpcCode::PermissionDenied,
                format!(
                    "{} may be called only by the server (runtime.http_key or server code).",
                    call.id
                ),
            ));
        }
        self.function.call(call).await
    }
}

/// The keys every built-in payload may have. (Each payload type lists them itself: serde cannot
/// combine `flatten` with `deny_unknown_fields`.)
struct Common {
    metadata: Option<serde_json::Value>,
    idempotency_key: Option<String>,
    user_id: Option<String>,
}

impl Common {
    fn change(&self, call: &Call<'_>) -> Result<Change, RpcError> {
        let user = call.user(self.user_id.as_deref())?;
        let mut change = Change::new(user, call.id);
        if let Some(metadata) = &self.metadata {
            change = change.metadata(metadata);
        }
        if let Some(key) = &self.idempotency_key {
            change = change.idempotency_key(key);
        }
        Ok(change)
    }
}

fn answer(receipt: &Receipt, wallet: bool) -> String {
    let balances: &BTreeMap<String, i64> = if wallet {
        &receipt.wallet
    } else {
        &receipt.items
    };
    let key = if wallet { "wallet" } else { "items" };
    serde_json::json!({ "ledger_id": receipt.ledger_id.to_string(), key: balances }).to_string()
}

/// `wallet_spend`.
pub struct WalletSpend;

#[async_trait::async_trait]
impl ServerFunction for WalletSpend {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let payload: SpendRequest = call.json()?;
        let mut change = payload.common().change(&call)?;
        match (payload.amount, payload.amounts) {
            (Some(amount), None) => {
                let currency = payload.currency.as_deref().unwrap_or("coins");
                change = change.spend(currency, amount);
            }
            (None, Some(amounts)) if payload.currency.is_none() => {
                if amounts.is_empty() {
                    return Err(RpcError::invalid(
                        "amounts must name at least one currency.",
                    ));
                }
                for (currency, amount) in &amounts {
                    change = change.spend(currency, *amount);
                }
            }
            _ => {
                return Err(RpcError::invalid(
                    "Give either amount (and optionally currency) or amounts, not both.",
                ))
            }
        }
        let receipt = call.economy.apply(change).await?;
        Ok(answer(&receipt, true))
    }
}

/// The `wallet_spend` payload.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendRequest {
    amount: Option<i64>,
    currency: Option<String>,
    amounts: Option<BTreeMap<String, i64>>,
    metadata: Option<serde_json::Value>,
    idempotency_key: Option<String>,
    user_id: Option<String>,
}

impl SpendRequest {
    fn common(&self) -> Common {
        Common {
            metadata: self.metadata.clone(),
            idempotency_key: self.idempotency_key.clone(),
            user_id: self.user_id.clone(),
        }
    }
}

/// `inventory_grant`.
pub struct InventoryGrant;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantRequest {
    item: String,
    count: Option<i64>,
    kind: Option<String>,
    properties: Option<serde_json::Value>,
    metadata: Option<serde_json::Value>,
    idempotency_key: Option<String>,
    user_id: Option<String>,
}

#[async_trait::async_trait]
impl ServerFunction for InventoryGrant {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let p: GrantRequest = call.json()?;
        let common = Common {
            metadata: p.metadata,
            idempotency_key: p.idempotency_key,
            user_id: p.user_id,
        };
        let change = common.change(&call)?.grant_item(
            &p.item,
            p.kind.as_deref().unwrap_or("default"),
            p.count.unwrap_or(1),
            p.properties.as_ref(),
        );
        let receipt = call.economy.apply(change).await?;
        Ok(answer(&receipt, false))
    }
}

/// `inventory_consume`.
pub struct InventoryConsume;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsumeRequest {
    item: String,
    count: Option<i64>,
    metadata: Option<serde_json::Value>,
    idempotency_key: Option<String>,
    user_id: Option<String>,
}

#[async_trait::async_trait]
impl ServerFunction for InventoryConsume {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let p: ConsumeRequest = call.json()?;
        let common = Common {
            metadata: p.metadata,
            idempotency_key: p.idempotency_key,
            user_id: p.user_id,
        };
        let change = common
            .change(&call)?
            .consume_item(&p.item, p.count.unwrap_or(1));
        let receipt = call.economy.apply(change).await?;
        Ok(answer(&receipt, false))
    }
}
