//! Wallets and the ledger: `walletUpdate`, `walletsUpdate`, `walletLedgerList`,
//! `walletLedgerUpdate` (a ledger item's id is the number `walletLedgerList` gives, as text). Every change
//! is one atomic write of the economy (a ledger row included); a change that would take a
//! balance below zero is refused whole.

use std::collections::BTreeMap;

use muster_js::JsError;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::context::{invalid, json_text, parse_user, refused, Args, ServerHost};
use crate::economy::Change;

pub(super) const NAMES: &[&str] = &[
    "walletUpdate",
    "walletsUpdate",
    "walletLedgerList",
    "walletLedgerUpdate",
];

/// Most wallets one `walletsUpdate` changes.
const MAX_WALLETS: usize = 100;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    match name {
        // walletUpdate(userId, changeset, metadata?, updateLedger?)
        "walletUpdate" => {
            let user = args.user(0, "userId")?;
            let metadata = match args.missing(2) {
                true => None,
                false => Some(object(args.get(2))?),
            };
            let change = WalletChange::new(user, args.get(1), metadata)?;
            let mut result = apply(host, change)?;
            if let Some(result) = result.as_object_mut() {
                result.remove("userId");
            }
            Ok(result)
        }
        // walletsUpdate([{userId, changeset, metadata}], updateLedger?): every update read and
        // checked before any is applied.
        "walletsUpdate" => {
            let changes = wallet_changes(args.get(0))?;
            let results = changes
                .into_iter()
                .map(|change| apply(host, change))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Array(results))
        }
        // walletLedgerList(userId, limit?, cursor?)
        "walletLedgerList" => {
            let user = args.user(0, "userId")?;
            let limit = args.int(1, "limit")?.map(|l| l.clamp(1, 100) as usize);
            let cursor = args.opt_string(2);
            let page = host
                .wait(host.services.economy.ledger(user, limit, cursor.as_deref()))?
                .map_err(refused)?;
            let items: Vec<Value> = page
                .entries
                .into_iter()
                .map(|entry| ledger_item(user, entry))
                .collect();
            let mut answer = json!({ "items": items });
            if let Some(cursor) = page.cursor {
                answer["cursor"] = cursor.into();
            }
            Ok(answer)
        }
        // walletLedgerUpdate(itemId, metadata): the item with its metadata replaced.
        "walletLedgerUpdate" => {
            let id = match args.get(0) {
                Value::String(text) => text.parse::<i64>().ok(),
                Value::Number(n) => n.as_i64(),
                _ => None,
            }
            .filter(|id| *id > 0)
            .ok_or_else(|| invalid("expects a valid id"))?;
            if !args.get(1).is_object() {
                return Err(invalid("expects metadata object"));
            }
            let metadata = args.get(1).to_string();
            let (user, entry) = host
                .wait(host.services.economy.set_ledger_metadata(id, &metadata))?
                .map_err(refused)?;
            Ok(ledger_item(user, entry))
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// A ledger row as Nakama's runtime gives a wallet ledger item.
fn ledger_item(user: Uuid, entry: crate::economy::store::LedgerEntry) -> Value {
    json!({
        "id": entry.id.to_string(),
        "userId": user.to_string(),
        "createTime": entry.create_time_ms / 1000,
        "updateTime": entry.create_time_ms / 1000,
        "changeset": entry.changes.wallet,
        "metadata": serde_json::from_str::<Value>(&entry.metadata).unwrap_or_else(|_| json!({})),
        "reason": entry.reason,
    })
}

/// A metadata argument as an object (a string is read as JSON).
fn object(value: &Value) -> Result<Value, JsError> {
    serde_json::from_str(&json_text(value, "metadata")?)
        .map_err(|_| invalid("metadata must be an object"))
}

/// `walletsUpdate`'s (and `multiUpdate`'s) updates, `[{userId, changeset, metadata?}]`, read and
/// checked: at most [`MAX_WALLETS`].
pub(super) fn wallet_changes(updates: &Value) -> Result<Vec<WalletChange>, JsError> {
    let Some(updates) = updates.as_array() else {
        return Err(invalid("updates must be an array"));
    };
    if updates.len() > MAX_WALLETS {
        return Err(invalid(format!(
            "At most {MAX_WALLETS} wallet updates at once."
        )));
    }
    updates
        .iter()
        .map(|one| {
            let user = parse_user(&one["userId"], "userId")?;
            let metadata = match &one["metadata"] {
                Value::Null => None,
                other => Some(object(other)?),
            };
            WalletChange::new(user, &one["changeset"], metadata)
        })
        .collect()
}

/// One wallet's change, read and checked, not yet applied.
pub(super) struct WalletChange {
    user: Uuid,
    change: Change,
    /// Each currency's amount, as given (negative: spent).
    amounts: BTreeMap<String, i64>,
}

impl WalletChange {
    fn new(
        user: Uuid,
        changeset: &Value,
        metadata: Option<Value>,
    ) -> Result<WalletChange, JsError> {
        let Some(changeset) = changeset.as_object() else {
            return Err(invalid("changeset must be an object of currency to amount"));
        };
        let mut amounts = BTreeMap::new();
        let mut change = Change::new(user, "js");
        for (currency, amount) in changeset {
            let amount = amount
                .as_f64()
                .filter(|a| a.is_finite() && a.fract() == 0.0 && a.abs() < 9.0e15)
                .ok_or_else(|| invalid(format!("the amount of {currency} must be an integer")))?
                as i64;
            change = if amount < 0 {
                change.spend(currency, -amount)
            } else {
                change.grant(currency, amount)
            };
            amounts.insert(currency.clone(), amount);
        }
        if let Some(metadata) = metadata {
            change = change.metadata(&metadata);
        }
        Ok(WalletChange {
            user,
            change,
            amounts,
        })
    }
}

/// Applies one wallet change: `{userId, updated, previous}` as Nakama answers.
pub(super) fn apply(host: &ServerHost, change: WalletChange) -> Result<Value, JsError> {
    let WalletChange {
        user,
        change,
        amounts,
    } = change;
    let receipt = host
        .wait(host.services.economy.apply(change))?
        .map_err(refused)?;
    let mut previous = Map::new();
    for (currency, balance) in &receipt.wallet {
        previous.insert(
            currency.clone(),
            json!(balance - amounts.get(currency).copied().unwrap_or(0)),
        );
    }
    Ok(json!({ "userId": user.to_string(), "updated": receipt.wallet, "previous": previous }))
}
