//! The after-authenticate hook: the starting wallet and inventory every new account gets
//! (`economy.starting_wallet`, `economy.starting_items`; none by default, as Nakama; its 2M-CCU
//! economy test gives 1,000,000 coins and 1,000,000 items).
//!
//! It runs inside the store's account creation, in the same transaction as the account insert,
//! not after it: a crash between "account created" and "grant given" cannot happen, so no
//! account ever exists without its grant, and the grant is never given twice. Its ledger row has
//! the reason `starting_grant`. The million items are one stacked row (`count = 1000000`).

use crate::economy::change::check_name;
use crate::economy::config::EconomyConfig;
use crate::economy::store::{Changes, ItemDelta, StartingGrant};

impl StartingGrant {
    /// The grant `config` describes, checked; `None` when it grants nothing.
    pub fn from_config(config: &EconomyConfig) -> Result<Option<StartingGrant>, String> {
        let mut changes = Changes::default();
        for (currency, amount) in &config.starting_wallet {
            check_name(currency, 64, "currency").map_err(|e| format!("starting_wallet: {e}"))?;
            if *amount < 0 {
                return Err(format!(
                    "starting_wallet.{currency} must be at least 0, got {amount}"
                ));
            }
            if *amount > 0 {
                changes.wallet.insert(currency.clone(), *amount);
            }
        }
        let mut items = Vec::new();
        for item in &config.starting_items {
            check_name(&item.id, 128, "item id").map_err(|e| format!("starting_items: {e}"))?;
            check_name(&item.kind, 64, "item kind").map_err(|e| format!("starting_items: {e}"))?;
            if item.count < 0 {
                return Err(format!(
                    "starting_items: count of {} must be at least 0, got {}",
                    item.id, item.count
                ));
            }
            if changes.items.contains_key(&item.id) {
                return Err(format!("starting_items: item {} is listed twice", item.id));
            }
            if item.count > 0 {
                changes.items.insert(item.id.clone(), item.count);
                items.push(ItemDelta {
                    item_id: item.id.clone(),
                    kind: item.kind.clone(),
                    delta: item.count,
                    properties: None,
                });
            }
        }
        if changes == Changes::default() {
            return Ok(None);
        }
        items.sort_by(|a, b| a.item_id.cmp(&b.item_id));
        Ok(Some(StartingGrant {
            wallet: changes
                .wallet
                .iter()
                .map(|(c, a)| (c.clone(), *a))
                .collect(),
            items,
            changes: changes.to_json(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::economy::config::StartingItem;

    /// The seed's economy load test: 1,000,000 coins and 1,000,000 items.
    fn seed_scenario() -> EconomyConfig {
        EconomyConfig {
            starting_wallet: [("coins".to_string(), 1_000_000)].into(),
            starting_items: vec![StartingItem {
                id: "item".into(),
                kind: "default".into(),
                count: 1_000_000,
            }],
        }
    }

    #[test]
    fn the_default_grants_nothing() {
        assert_eq!(
            StartingGrant::from_config(&EconomyConfig::default()),
            Ok(None)
        );
    }

    #[test]
    fn the_seed_scenarios_grant_is_one_row_per_stack() {
        let grant = StartingGrant::from_config(&seed_scenario())
            .expect("valid")
            .expect("grants something");
        assert_eq!(grant.wallet, vec![("coins".to_string(), 1_000_000)]);
        assert_eq!(grant.items.len(), 1, "one stacked row");
        assert_eq!(grant.items[0].delta, 1_000_000);
        assert_eq!(
            grant.changes,
            r#"{"wallet":{"coins":1000000},"items":{"item":1000000}}"#
        );
    }

    #[test]
    fn bad_grants_are_named_and_empty_ones_grant_nothing() {
        let mut config = seed_scenario();
        config.starting_wallet.insert("gems".into(), -1);
        assert!(StartingGrant::from_config(&config)
            .unwrap_err()
            .contains("gems"));
        let mut config = seed_scenario();
        config.starting_items.push(StartingItem {
            id: "item".into(),
            kind: "default".into(),
            count: 1,
        });
        assert!(StartingGrant::from_config(&config)
            .unwrap_err()
            .contains("twice"));
        let none = EconomyConfig {
            starting_wallet: Default::default(),
            starting_items: vec![],
        };
        assert_eq!(StartingGrant::from_config(&none), Ok(None));
    }
}
