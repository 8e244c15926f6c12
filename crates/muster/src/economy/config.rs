//! The `[economy]` section: what a new account is given.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One stack of the starting inventory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartingItem {
    /// The item's id in the account's inventory.
    pub id: String,
    /// The item's kind (a category the game chooses).
    pub kind: String,
    /// How many: one stacked row, however large the count.
    pub count: i64,
}

/// As Nakama, a new account's wallet is `{}` and its inventory empty unless the game says
/// otherwise (the seed's economy load test gives 1,000,000 coins and items: its scenario sets them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EconomyConfig {
    /// The wallet every new account starts with (currency to amount), granted in the same
    /// transaction that creates the account.
    pub starting_wallet: BTreeMap<String, i64>,
    /// The inventory every new account starts with, granted with the starting wallet.
    pub starting_items: Vec<StartingItem>,
}
