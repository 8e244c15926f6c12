//! What the store knows about wallets, inventories and their ledger.
//!
//! A [`LedgerWrite`] is one change to one account: currency deltas, item-stack deltas, and the
//! ledger row that records them, applied all or nothing. The store enforces the two rules SQL
//! can enforce in the same transaction as the change: no balance or item count may go below zero
//! or past `i64::MAX`, and an idempotency key is used once per account (a retry finds the first
//! ledger row and gets its receipt back). Everything else (valid names, positive amounts, sizes)
//! is checked before a write gets here, by [`crate::economy`].
//!
//! Inventory is stacked: one row per (account, item id) with a count, so "1,000,000 items" is
//! one row holding 1,000,000, and granting one more item updates that row.

use async_trait::async_trait;

use crate::store::StoreError;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A change to one item stack. `kind` and `properties` matter only when the stack is created
/// (`kind`) or when `properties` is given (it replaces the stack's properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemDelta {
    pub item_id: String,
    pub kind: String,
    pub delta: i64,
    /// A JSON object, or `None` to keep the stack's properties.
    pub properties: Option<String>,
}

/// One change to one account, with its ledger row. Currencies and item ids are unique within a
/// write and sorted (so concurrent writes lock rows in the same order), deltas non-zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerWrite {
    pub user_id: Uuid,
    pub wallet: Vec<(String, i64)>,
    pub items: Vec<ItemDelta>,
    /// Why: the function or process that made the change.
    pub reason: String,
    /// A JSON object the caller attaches to the ledger row.
    pub metadata: String,
    /// Makes a retried write apply once: a second write with the same key for the same account
    /// returns the first one's receipt instead of applying again.
    pub idempotency_key: Option<String>,
    /// The deltas as canonical JSON ([`Changes::to_json`]), stored in the ledger row and compared
    /// on an idempotent retry.
    pub changes: String,
    /// Unix milliseconds.
    pub now_ms: i64,
}

/// Amounts by currency and counts by item id: the shape of a ledger row's `changes` (deltas)
/// and `balances` (what the touched balances and counts became).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Changes {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub wallet: BTreeMap<String, i64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub items: BTreeMap<String, i64>,
}

impl Changes {
    /// Canonical JSON: keys sorted, empty maps left out.
    pub fn to_json(&self) -> String {
        // Maps of strings to integers always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a ledger column written by either engine.
    pub fn from_json(text: &str) -> Result<Changes, super::StoreError> {
        serde_json::from_str(text)
            .map_err(|e| super::StoreError::Database(format!("bad ledger JSON {text:?}: {e}")))
    }
}

/// What an applied (or replayed) write returns: its ledger row and the balances and counts it
/// left behind, for the currencies and items it touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub ledger_id: i64,
    pub balances: Changes,
}

/// Why a write was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The currency's balance would go below zero.
    InsufficientFunds { currency: String, balance: i64 },
    /// The currency's balance would pass `i64::MAX`.
    BalanceOverflow { currency: String },
    /// The item's count would go below zero.
    InsufficientItems { item_id: String, count: i64 },
    /// The item's count would pass `i64::MAX`.
    CountOverflow { item_id: String },
    /// The idempotency key was already used by this account for a different change.
    KeyReused,
}

/// The outcome of [`EconomyStore::apply_ledger`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerOutcome {
    /// Applied now and durable.
    Applied(Receipt),
    /// The idempotency key was seen before with the same change: the first write's receipt.
    Replayed(Receipt),
    /// Refused; nothing changed.
    Refused(Refusal),
}

/// The wallet and inventory granted to every new account, in the transaction that creates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartingGrant {
    pub wallet: Vec<(String, i64)>,
    pub items: Vec<ItemDelta>,
    /// Canonical JSON of the grant; also the new account's balances.
    pub changes: String,
}

/// The ledger row's reason for a [`StartingGrant`].
pub const STARTING_GRANT_REASON: &str = "starting_grant";

/// One stack of an account's inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryItem {
    pub item_id: String,
    pub kind: String,
    pub count: i64,
    /// A JSON object.
    pub properties: String,
    pub update_time_ms: i64,
}

/// One ledger row, as a user lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub id: i64,
    pub changes: Changes,
    pub balances: Changes,
    pub reason: String,
    pub metadata: String,
    pub idempotency_key: Option<String>,
    pub create_time_ms: i64,
}

/// The economy: atomic ledgered changes, balances, items, the ledger.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait EconomyStore: Send + Sync {
    /// Applies `write` all or nothing, with its ledger row, durably; see this module for the
    /// rules. `NotFound` when the account does not exist.
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError>;

    /// The account's balances, sorted by currency.
    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError>;

    /// Up to `limit` of the account's item stacks with a count above zero, sorted by item id,
    /// after item `after` if given.
    async fn inventory(
        &self,
        user_id: Uuid,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InventoryItem>, StoreError>;

    /// Up to `limit` of the account's ledger rows, newest first, older than `before` if given.
    async fn ledger(
        &self,
        user_id: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, StoreError>;

    /// Replaces the metadata (a JSON object, as text) of ledger row `id`: its owner and the
    /// row as it is now, if it exists. Nothing else of a ledger row ever changes.
    async fn set_ledger_metadata(
        &self,
        id: i64,
        metadata: String,
    ) -> Result<Option<(Uuid, LedgerEntry)>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[
    crate::migration!(3, "economy", "0003_economy"),
    crate::migration!(4, "economy_account_keys", "0004_economy_account_keys"),
];
