//! Wallets, inventories and their ledger.
//!
//! - A **wallet** maps currency to a signed 64-bit amount that never goes below zero. It shows in
//!   `GET /v2/account` as Nakama shows it: a JSON object in a string, `"{\"coins\":1000000}"`.
//! - An **inventory** holds item stacks: id, kind, count, properties (a JSON object). Stacks,
//!   not instances: a million of one item is one row.
//! - Every change is one [`Change`], applied all or nothing by [`Economy::apply`]: several
//!   currencies and items at once, with one **ledger** row (who, what changed, what the balances
//!   became, why, metadata, when, idempotency key). Users page through their ledger newest first.
//! - Server functions (the RPCs that spend and grant) live in [`crate::functions`]; they call
//!   [`Economy::apply`].
//! - New accounts get their starting wallet and inventory in the transaction that creates them
//!   (`grant`).
//!
//! Durability: a change is answered only once the database has committed it (group commit on
//! both engines, see [`crate::store`]).

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod change;
pub(crate) mod grant;

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use uuid::Uuid;

pub use change::Change;

use crate::base::metrics::Metrics;
use crate::economy::store::{
    Changes, EconomyStore, InventoryItem, LedgerEntry, LedgerOutcome, Refusal,
};
use crate::store::StoreError;

/// Most ledger rows one page may hold.
pub const MAX_LEDGER_PAGE: usize = 100;
/// Largest metadata one ledger row may be given afterwards, in bytes.
pub const MAX_LEDGER_METADATA_BYTES: usize = 16 * 1024;

/// Most item stacks on one page of `GET /v2/economy/inventory`.
pub const MAX_INVENTORY_PAGE: usize = 100;

/// Why a change or a read did not happen. Messages are shown to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EconomyError {
    #[error("{0}")]
    Invalid(String),
    #[error("Insufficient {currency}: balance {balance}, needed {needed}.")]
    InsufficientFunds {
        currency: String,
        balance: i64,
        needed: i64,
    },
    #[error("The {currency} balance would pass 2^63-1.")]
    BalanceOverflow { currency: String },
    #[error("Not enough {item_id}: have {count}, needed {needed}.")]
    InsufficientItems {
        item_id: String,
        count: i64,
        needed: i64,
    },
    #[error("The {item_id} count would pass 2^63-1.")]
    CountOverflow { item_id: String },
    #[error("Idempotency key already used for a different change.")]
    KeyReused,
    #[error("Account not found.")]
    AccountNotFound,
    #[error("Ledger item not found.")]
    LedgerItemNotFound,
    /// The store is closed (shutting down) or the database cannot be reached: nothing changed.
    #[error("{0}")]
    Unavailable(&'static str),
    #[error("internal server error")]
    Internal,
}

impl From<StoreError> for EconomyError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => EconomyError::AccountNotFound,
            StoreError::Closed => EconomyError::Unavailable("Server is shutting down."),
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "database unavailable");
                EconomyError::Unavailable("The database is unavailable; try again shortly.")
            }
            StoreError::UsernameTaken
            | StoreError::CodeTaken
            | StoreError::CredentialTaken
            | StoreError::LimitReached
            | StoreError::Refused(_)
            | StoreError::Database(_) => {
                tracing::error!(%error, "economy store error");
                EconomyError::Internal
            }
        }
    }
}

/// An applied change: its ledger row and the balances and counts it left, for what it touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub ledger_id: i64,
    pub wallet: BTreeMap<String, i64>,
    pub items: BTreeMap<String, i64>,
    /// True when this is the answer first given to a change with the same idempotency key.
    pub replayed: bool,
}

/// One page of a user's ledger, newest first; `cursor` fetches the next (older) page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerPage {
    pub entries: Vec<LedgerEntry>,
    pub cursor: Option<String>,
}

/// One page of a user's item stacks, by item id; `cursor` fetches the next page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryPage {
    pub items: Vec<InventoryItem>,
    pub cursor: Option<String>,
}

/// The wallet, inventory and ledger rules over the store.
pub struct Economy {
    store: Arc<dyn EconomyStore>,
    metrics: Arc<Metrics>,
}

impl Economy {
    pub fn new(store: Arc<dyn EconomyStore>, metrics: Arc<Metrics>) -> Economy {
        Economy { store, metrics }
    }

    /// Applies `change` all or nothing and answers once it is durable. A refusal (overdraw,
    /// overflow, reused key) changes nothing.
    pub async fn apply(&self, change: Change) -> Result<Receipt, EconomyError> {
        let result = self.apply_inner(change).await;
        let outcome = match &result {
            Ok(r) if r.replayed => "replayed",
            Ok(_) => "applied",
            Err(EconomyError::Invalid(_)) => "invalid",
            Err(
                EconomyError::Internal
                | EconomyError::Unavailable(_)
                | EconomyError::AccountNotFound,
            ) => "failed",
            Err(_) => "refused",
        };
        self.metrics
            .economy_writes
            .with_label_values(&[outcome])
            .inc();
        result
    }

    async fn apply_inner(&self, change: Change) -> Result<Receipt, EconomyError> {
        let write = change.into_write(crate::base::clock::now_ms())?;
        let needed = |changes: &[(String, i64)], name: &str| {
            changes
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, d)| -d)
        };
        match self.store.apply_ledger(write.clone()).await? {
            LedgerOutcome::Applied(r) => Ok(receipt(r.ledger_id, r.balances, false)),
            LedgerOutcome::Replayed(r) => Ok(receipt(r.ledger_id, r.balances, true)),
            LedgerOutcome::Refused(refusal) => Err(match refusal {
                Refusal::InsufficientFunds { currency, balance } => {
                    EconomyError::InsufficientFunds {
                        needed: needed(&write.wallet, &currency),
                        currency,
                        balance,
                    }
                }
                Refusal::BalanceOverflow { currency } => EconomyError::BalanceOverflow { currency },
                Refusal::InsufficientItems { item_id, count } => {
                    let needed = write
                        .items
                        .iter()
                        .find(|i| i.item_id == item_id)
                        .map_or(0, |i| -i.delta);
                    EconomyError::InsufficientItems {
                        item_id,
                        count,
                        needed,
                    }
                }
                Refusal::CountOverflow { item_id } => EconomyError::CountOverflow { item_id },
                Refusal::KeyReused => EconomyError::KeyReused,
            }),
        }
    }

    /// The account's balances by currency.
    pub async fn wallet(&self, user_id: Uuid) -> Result<BTreeMap<String, i64>, EconomyError> {
        Ok(self.store.wallet(user_id).await?.into_iter().collect())
    }

    /// A page of the account's item stacks (count above zero), by item id. `limit` is 1 to
    /// [`MAX_INVENTORY_PAGE`] (default 100); `cursor` is the previous page's.
    pub async fn inventory(
        &self,
        user_id: Uuid,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<InventoryPage, EconomyError> {
        let limit = limit.unwrap_or(MAX_INVENTORY_PAGE);
        if limit == 0 || limit > MAX_INVENTORY_PAGE {
            return Err(EconomyError::Invalid(format!(
                "Limit must be 1-{MAX_INVENTORY_PAGE}."
            )));
        }
        // The cursor is the last item id of the previous page. Forging one cannot read more
        // than the caller's own stacks; it is encoded only so that clients treat it as opaque.
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(text)
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or_else(|| EconomyError::Invalid("Cursor is invalid.".into()))?,
            ),
        };
        let mut items = self.store.inventory(user_id, after, limit + 1).await?;
        let cursor = if items.len() > limit {
            items.truncate(limit);
            items
                .last()
                .map(|i| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&i.item_id))
        } else {
            None
        };
        Ok(InventoryPage { items, cursor })
    }

    /// A page of the account's ledger, newest first. `limit` is 1 to [`MAX_LEDGER_PAGE`]
    /// (default 100); `cursor` is the previous page's.
    pub async fn ledger(
        &self,
        user_id: Uuid,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<LedgerPage, EconomyError> {
        let limit = limit.unwrap_or(MAX_LEDGER_PAGE);
        if limit == 0 || limit > MAX_LEDGER_PAGE {
            return Err(EconomyError::Invalid(format!(
                "Limit must be 1-{MAX_LEDGER_PAGE}."
            )));
        }
        let before = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(
                text.parse::<i64>()
                    .ok()
                    .filter(|id| *id > 0)
                    .ok_or_else(|| EconomyError::Invalid("Cursor is invalid.".into()))?,
            ),
        };
        // One more than asked tells whether there is a next page.
        let mut entries = self.store.ledger(user_id, before, limit + 1).await?;
        let cursor = if entries.len() > limit {
            entries.truncate(limit);
            entries.last().map(|e| e.id.to_string())
        } else {
            None
        };
        Ok(LedgerPage { entries, cursor })
    }
}

impl Economy {
    /// Replaces the metadata of ledger row `id` (a JSON object of at most
    /// [`MAX_LEDGER_METADATA_BYTES`]; nothing else of a row ever changes): its owner and the row.
    pub async fn set_ledger_metadata(
        &self,
        id: i64,
        metadata: &str,
    ) -> Result<(Uuid, LedgerEntry), EconomyError> {
        if id <= 0 {
            return Err(EconomyError::Invalid("expects a valid id".into()));
        }
        if metadata.len() > MAX_LEDGER_METADATA_BYTES {
            return Err(EconomyError::Invalid(format!(
                "Ledger metadata must be at most {MAX_LEDGER_METADATA_BYTES} bytes."
            )));
        }
        if !serde_json::from_str::<serde_json::Value>(metadata).is_ok_and(|v| v.is_object()) {
            return Err(EconomyError::Invalid("expects metadata object".into()));
        }
        self.store
            .set_ledger_metadata(id, metadata.to_owned())
            .await?
            .ok_or(EconomyError::LedgerItemNotFound)
    }
}

fn receipt(ledger_id: i64, balances: Changes, replayed: bool) -> Receipt {
    Receipt {
        ledger_id,
        wallet: balances.wallet,
        items: balances.items,
        replayed,
    }
}

/// A wallet as Nakama's account shows it: a JSON object in a string.
pub fn wallet_json(wallet: &[(String, i64)]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = wallet
        .iter()
        .map(|(currency, amount)| (currency.clone(), (*amount).into()))
        .collect();
    serde_json::Value::Object(map).to_string()
}
