//! [`Change`]: one atomic change to one account's wallet and inventory, built step by step and
//! checked as a whole before it reaches the store.
//!
//! ```
//! # use muster::economy::Change;
//! # let user_id = uuid::Uuid::new_v4();
//! // Buy a sword: 250 coins out, one sword in, or nothing at all.
//! let change = Change::new(user_id, "buy_sword")
//!     .spend("coins", 250)
//!     .grant_item("sword", "weapon", 1, None)
//!     .idempotency_key("order-8f1c");
//! ```
//!
//! Every amount a caller gives is positive: `spend` and `consume_item` subtract, `grant` and
//! `grant_item` add. Several operations on one currency or item add up to one net delta. The
//! first invalid input is remembered and reported when the change is applied, so building never
//! fails halfway.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::EconomyError;
use crate::economy::store::{Changes, ItemDelta, LedgerWrite};

/// Most currencies one change may touch.
pub const MAX_CURRENCIES: usize = 16;
/// Most item stacks one change may touch.
pub const MAX_ITEMS: usize = 16;
/// Longest metadata or item properties, as JSON text.
pub const MAX_JSON_BYTES: usize = 4096;
/// Longest idempotency key.
pub const MAX_KEY_BYTES: usize = 128;

/// Checks a currency, item kind or reason: 1 to `max` bytes of ASCII letters, digits, `_`, `-`,
/// `.` or `:`. Names end up as JSON keys and metric-free labels; a strict alphabet keeps them
/// unambiguous.
pub fn check_name(value: &str, max: usize, what: &str) -> Result<(), EconomyError> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(EconomyError::Invalid(format!(
            "{what} {value:?} is invalid: use 1-{max} ASCII letters, digits, '_', '-', '.' or ':'."
        )))
    }
}

/// Checks that `json` is a JSON object of at most [`MAX_JSON_BYTES`].
pub fn check_object(json: &serde_json::Value, what: &str) -> Result<String, EconomyError> {
    if !json.is_object() {
        return Err(EconomyError::Invalid(format!(
            "{what} must be a JSON object."
        )));
    }
    let text = json.to_string();
    if text.len() > MAX_JSON_BYTES {
        return Err(EconomyError::Invalid(format!(
            "{what} must be at most {MAX_JSON_BYTES} bytes of JSON."
        )));
    }
    Ok(text)
}

#[derive(Debug, Clone, Default)]
struct ItemChange {
    kind: Option<String>,
    delta: i64,
    properties: Option<String>,
}

/// One change to one account; see the module documentation.
#[derive(Debug, Clone)]
pub struct Change {
    user_id: Uuid,
    reason: String,
    wallet: BTreeMap<String, i64>,
    items: BTreeMap<String, ItemChange>,
    metadata: Option<String>,
    idempotency_key: Option<String>,
    /// The first invalid input, reported by [`Change::into_write`].
    error: Option<EconomyError>,
}

impl Change {
    /// A change to `user_id`'s account; `reason` names it in the ledger (e.g. the function).
    pub fn new(user_id: Uuid, reason: &str) -> Change {
        let mut change = Change {
            user_id,
            reason: reason.to_string(),
            wallet: BTreeMap::new(),
            items: BTreeMap::new(),
            metadata: None,
            idempotency_key: None,
            error: None,
        };
        if let Err(e) = check_name(reason, 64, "Reason") {
            change.fail(e);
        }
        change
    }

    fn fail(&mut self, error: EconomyError) {
        self.error.get_or_insert(error);
    }

    fn positive(&mut self, amount: i64, what: &str) -> bool {
        if amount <= 0 {
            self.fail(EconomyError::Invalid(format!(
                "{what} must be a positive integer, got {amount}."
            )));
            return false;
        }
        true
    }

    fn add_currency(mut self, currency: &str, delta: i64) -> Change {
        if let Err(e) = check_name(currency, 64, "Currency") {
            self.fail(e);
            return self;
        }
        let entry = self.wallet.entry(currency.to_string()).or_insert(0);
        match entry.checked_add(delta) {
            Some(sum) => *entry = sum,
            None => self.fail(EconomyError::Invalid(format!(
                "Amounts of {currency} in one change add up past 2^63-1."
            ))),
        }
        self
    }

    fn add_item(mut self, item_id: &str, delta: i64) -> Change {
        if let Err(e) = check_name(item_id, 128, "Item id") {
            self.fail(e);
            return self;
        }
        let entry = self.items.entry(item_id.to_string()).or_default();
        match entry.delta.checked_add(delta) {
            Some(sum) => entry.delta = sum,
            None => self.fail(EconomyError::Invalid(format!(
                "Counts of {item_id} in one change add up past 2^63-1."
            ))),
        }
        self
    }

    /// Takes `amount` (> 0) of `currency`; refused if the balance would go below zero.
    pub fn spend(mut self, currency: &str, amount: i64) -> Change {
        if !self.positive(amount, "Amount") {
            return self;
        }
        self.add_currency(currency, -amount)
    }

    /// Adds `amount` (> 0) of `currency`; refused if the balance would pass 2^63-1.
    pub fn grant(mut self, currency: &str, amount: i64) -> Change {
        if !self.positive(amount, "Amount") {
            return self;
        }
        self.add_currency(currency, amount)
    }

    /// Adds `count` (> 0) to the stack `item_id`, creating it with `kind` if the account has
    /// none. `properties` (a JSON object), when given, replaces the stack's properties.
    pub fn grant_item(
        mut self,
        item_id: &str,
        kind: &str,
        count: i64,
        properties: Option<&serde_json::Value>,
    ) -> Change {
        if !self.positive(count, "Count") {
            return self;
        }
        if let Err(e) = check_name(kind, 64, "Item kind") {
            self.fail(e);
            return self;
        }
        let properties = match properties.map(|p| check_object(p, "Item properties")) {
            Some(Err(e)) => {
                self.fail(e);
                return self;
            }
            Some(Ok(text)) => Some(text),
            None => None,
        };
        let mut change = self.add_item(item_id, count);
        if let Some(entry) = change.items.get_mut(item_id) {
            entry.kind = Some(kind.to_string());
            if properties.is_some() {
                entry.properties = properties;
            }
        }
        change
    }

    /// Takes `count` (> 0) from the stack `item_id`; refused if it would go below zero.
    pub fn consume_item(mut self, item_id: &str, count: i64) -> Change {
        if !self.positive(count, "Count") {
            return self;
        }
        self.add_item(item_id, -count)
    }

    /// Attaches a JSON object to the ledger row.
    pub fn metadata(mut self, metadata: &serde_json::Value) -> Change {
        match check_object(metadata, "Metadata") {
            Ok(text) => self.metadata = Some(text),
            Err(e) => self.fail(e),
        }
        self
    }

    /// Makes the change apply at most once for this account: applying it again with the same
    /// key returns the first receipt; the same key with a different change is refused.
    pub fn idempotency_key(mut self, key: &str) -> Change {
        if key.is_empty() || key.len() > MAX_KEY_BYTES || key.chars().any(char::is_control) {
            self.fail(EconomyError::Invalid(format!(
                "Idempotency key must be 1-{MAX_KEY_BYTES} bytes without control characters."
            )));
        } else {
            self.idempotency_key = Some(key.to_string());
        }
        self
    }

    /// The checked write for the store.
    pub fn into_write(self, now_ms: i64) -> Result<LedgerWrite, EconomyError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let wallet: Vec<(String, i64)> = self.wallet.into_iter().filter(|(_, d)| *d != 0).collect();
        let items: Vec<ItemDelta> = self
            .items
            .into_iter()
            .filter(|(_, c)| c.delta != 0)
            .map(|(item_id, c)| ItemDelta {
                item_id,
                kind: c.kind.unwrap_or_default(),
                delta: c.delta,
                properties: c.properties,
            })
            .collect();
        if wallet.is_empty() && items.is_empty() {
            return Err(EconomyError::Invalid(
                "The change changes nothing: give a non-zero amount or count.".into(),
            ));
        }
        if wallet.len() > MAX_CURRENCIES || items.len() > MAX_ITEMS {
            return Err(EconomyError::Invalid(format!(
                "One change may touch at most {MAX_CURRENCIES} currencies and {MAX_ITEMS} items."
            )));
        }
        let changes = Changes {
            wallet: wallet.iter().cloned().collect(),
            items: items.iter().map(|i| (i.item_id.clone(), i.delta)).collect(),
        };
        Ok(LedgerWrite {
            user_id: self.user_id,
            wallet,
            items,
            reason: self.reason,
            metadata: self.metadata.unwrap_or_else(|| "{}".into()),
            idempotency_key: self.idempotency_key,
            changes: changes.to_json(),
            now_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(change: Change) -> String {
        match change.into_write(0) {
            Err(EconomyError::Invalid(message)) => message,
            other => panic!("expected an invalid change, got {other:?}"),
        }
    }

    #[test]
    fn builds_a_canonical_write() {
        let user = Uuid::new_v4();
        let write = Change::new(user, "trade")
            .spend("coins", 250)
            .grant("gems", 2)
            .spend("coins", 50)
            .grant_item("sword", "weapon", 1, Some(&serde_json::json!({"level": 3})))
            .consume_item("potion", 2)
            .idempotency_key("k1")
            .into_write(7)
            .expect("valid");
        assert_eq!(
            write.wallet,
            vec![("coins".into(), -300), ("gems".into(), 2)]
        );
        assert_eq!(write.items.len(), 2);
        assert_eq!(write.items[0].item_id, "potion");
        assert_eq!(write.items[1].kind, "weapon");
        assert_eq!(write.items[1].properties.as_deref(), Some(r#"{"level":3}"#));
        assert_eq!(
            write.changes,
            r#"{"wallet":{"coins":-300,"gems":2},"items":{"potion":-2,"sword":1}}"#
        );
        assert_eq!(write.metadata, "{}");
        assert_eq!(write.idempotency_key.as_deref(), Some("k1"));
    }

    #[test]
    fn refuses_bad_input() {
        let user = Uuid::new_v4();
        assert!(invalid(Change::new(user, "t").spend("coins", -5)).contains("positive"));
        assert!(invalid(Change::new(user, "t").spend("coins", 0)).contains("positive"));
        assert!(invalid(Change::new(user, "t").grant("co ins", 5)).contains("Currency"));
        assert!(invalid(Change::new(user, "t").grant("", 5)).contains("Currency"));
        assert!(invalid(Change::new(user, "t")).contains("changes nothing"));
        assert!(invalid(Change::new(user, "t").grant("c", 5).spend("c", 5)).contains("nothing"));
        assert!(
            invalid(Change::new(user, "t").grant("c", i64::MAX).grant("c", 1)).contains("2^63-1")
        );
        assert!(invalid(
            Change::new(user, "t")
                .grant("c", 1)
                .metadata(&serde_json::json!([1]))
        )
        .contains("Metadata"));
        assert!(
            invalid(Change::new(user, "t").grant("c", 1).idempotency_key(""))
                .contains("Idempotency")
        );
        let many = (0..17).fold(Change::new(user, "t"), |c, i| c.grant(&format!("c{i}"), 1));
        assert!(invalid(many).contains("at most"));
        // The first problem is the one reported.
        let first = Change::new(user, "t").spend("coins", -1).grant("x y", 1);
        assert!(invalid(first).contains("positive"));
    }
}
