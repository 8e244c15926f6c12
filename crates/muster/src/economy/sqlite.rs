//! Wallet, inventory and ledger statements for the SQLite engine. Each function runs on a
//! connection the caller owns: writes on the writer thread, inside the savepoint of one group
//! commit job; reads on a reader connection.
//!
//! Economy rows are keyed by the account's small integer key (`economy_accounts`), not its text
//! id: lookups compare integers and the ledger's per-account index stays small. An account gets
//! its key with its first write; until then it holds nothing.
//!
//! A write reads the balances it touches, checks every one of them in Rust (checked arithmetic:
//! never below zero, never past `i64::MAX`), and only then writes. Only the writer thread writes,
//! so nothing can change between the read and the write; a refused write has written nothing.

use crate::economy::store::EconomyStore;
use crate::store::sqlite::SqliteStore;
use async_trait::async_trait;

use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use crate::economy::store::{
    Changes, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
    StartingGrant, STARTING_GRANT_REASON,
};
use crate::store::sqlite::db_error;
use crate::store::StoreError;

/// Applies one write; see [`EconomyStore::apply_ledger`].
pub fn apply(conn: &Connection, write: &LedgerWrite) -> Result<LedgerOutcome, StoreError> {
    let user = write.user_id.to_string();
    let account = account_key(conn, &user)?;
    if let (Some(account), Some(key)) = (account, &write.idempotency_key) {
        let prior = conn
            .prepare_cached(
                "SELECT id, changes, reason, balances FROM ledger
                 WHERE account = ?1 AND idempotency_key = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![account, key], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .optional()
            })
            .map_err(db_error)?;
        if let Some((id, changes, reason, balances)) = prior {
            if changes != write.changes || reason != write.reason {
                return Ok(LedgerOutcome::Refused(Refusal::KeyReused));
            }
            return Ok(LedgerOutcome::Replayed(Receipt {
                ledger_id: id,
                balances: Changes::from_json(&balances)?,
            }));
        }
    }

    // Check everything before writing anything.
    let mut after = Changes::default();
    {
        let mut amount = conn
            .prepare_cached("SELECT amount FROM wallets WHERE account = ?1 AND currency = ?2")
            .map_err(db_error)?;
        for (currency, delta) in &write.wallet {
            // An account without a key yet binds NULL, which matches no row: a balance of 0.
            let balance: i64 = amount
                .query_row(params![account, currency], |r| r.get(0))
                .optional()
                .map_err(db_error)?
                .unwrap_or(0);
            match balance.checked_add(*delta) {
                Some(next) if next >= 0 => {
                    after.wallet.insert(currency.clone(), next);
                }
                Some(_) => {
                    return Ok(LedgerOutcome::Refused(Refusal::InsufficientFunds {
                        currency: currency.clone(),
                        balance,
                    }))
                }
                None => {
                    return Ok(LedgerOutcome::Refused(Refusal::BalanceOverflow {
                        currency: currency.clone(),
                    }))
                }
            }
        }
    }
    {
        let mut count = conn
            .prepare_cached("SELECT count FROM inventory WHERE account = ?1 AND item_id = ?2")
            .map_err(db_error)?;
        for item in &write.items {
            let held: i64 = count
                .query_row(params![account, item.item_id], |r| r.get(0))
                .optional()
                .map_err(db_error)?
                .unwrap_or(0);
            match held.checked_add(item.delta) {
                Some(next) if next >= 0 => {
                    after.items.insert(item.item_id.clone(), next);
                }
                Some(_) => {
                    return Ok(LedgerOutcome::Refused(Refusal::InsufficientItems {
                        item_id: item.item_id.clone(),
                        count: held,
                    }))
                }
                None => {
                    return Ok(LedgerOutcome::Refused(Refusal::CountOverflow {
                        item_id: item.item_id.clone(),
                    }))
                }
            }
        }
    }

    // Every check passed: only now may the account get its key.
    let account = match account {
        Some(account) => account,
        None => new_account(conn, &user)?,
    };
    let mut set_amount = conn
        .prepare_cached(
            "INSERT INTO wallets (account, currency, amount) VALUES (?1, ?2, ?3)
             ON CONFLICT (account, currency) DO UPDATE SET amount = excluded.amount",
        )
        .map_err(db_error)?;
    for (currency, amount) in &after.wallet {
        set_amount
            .execute(params![account, currency, amount])
            .map_err(db_error)?;
    }
    let mut set_count = conn
        .prepare_cached(
            "INSERT INTO inventory (account, item_id, kind, count, properties, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, COALESCE(?5, '{}'), ?6)
             ON CONFLICT (account, item_id) DO UPDATE SET
                count = excluded.count,
                properties = COALESCE(?5, properties),
                update_time_ms = excluded.update_time_ms",
        )
        .map_err(db_error)?;
    for item in &write.items {
        let count = after.items.get(&item.item_id).copied().unwrap_or(0);
        set_count
            .execute(params![
                account,
                item.item_id,
                item.kind,
                count,
                item.properties,
                write.now_ms
            ])
            .map_err(db_error)?;
    }
    let balances = after.to_json();
    let ledger_id = insert_ledger_row(
        conn,
        account,
        &write.changes,
        &balances,
        &write.reason,
        &write.metadata,
        write.idempotency_key.as_deref(),
        write.now_ms,
    )?;
    Ok(LedgerOutcome::Applied(Receipt {
        ledger_id,
        balances: after,
    }))
}

/// The account's economy key, if it has one yet.
fn account_key(conn: &Connection, user: &str) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached("SELECT key FROM economy_accounts WHERE user_id = ?1")
        .and_then(|mut s| s.query_row([user], |r| r.get(0)).optional())
        .map_err(db_error)
}

/// Gives the account its economy key; [`StoreError::NotFound`] if there is no such account.
fn new_account(conn: &Connection, user: &str) -> Result<i64, StoreError> {
    conn.prepare_cached("INSERT INTO economy_accounts (user_id) VALUES (?1)")
        .and_then(|mut s| s.execute([user]))
        .map_err(db_error)?;
    Ok(conn.last_insert_rowid())
}

#[allow(clippy::too_many_arguments)]
fn insert_ledger_row(
    conn: &Connection,
    account: i64,
    changes: &str,
    balances: &str,
    reason: &str,
    metadata: &str,
    key: Option<&str>,
    now_ms: i64,
) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO ledger (account, changes, balances, reason, metadata, idempotency_key, create_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| s.execute(params![account, changes, balances, reason, metadata, key, now_ms]))
    .map_err(db_error)?;
    Ok(conn.last_insert_rowid())
}

/// Gives a new account its starting wallet and inventory, with its ledger row; called in the
/// job that inserts the account.
pub fn grant(
    conn: &Connection,
    user_id: Uuid,
    grant: &StartingGrant,
    now_ms: i64,
) -> Result<(), StoreError> {
    let account = new_account(conn, &user_id.to_string())?;
    let mut insert = conn
        .prepare_cached("INSERT INTO wallets (account, currency, amount) VALUES (?1, ?2, ?3)")
        .map_err(db_error)?;
    for (currency, amount) in &grant.wallet {
        insert
            .execute(params![account, currency, amount])
            .map_err(db_error)?;
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO inventory (account, item_id, kind, count, properties, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, COALESCE(?5, '{}'), ?6)",
        )
        .map_err(db_error)?;
    for item in &grant.items {
        insert
            .execute(params![
                account,
                item.item_id,
                item.kind,
                item.delta,
                item.properties,
                now_ms
            ])
            .map_err(db_error)?;
    }
    insert_ledger_row(
        conn,
        account,
        &grant.changes,
        &grant.changes,
        STARTING_GRANT_REASON,
        "{}",
        None,
        now_ms,
    )?;
    Ok(())
}

pub fn wallet(conn: &Connection, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
    conn.prepare_cached(
        "SELECT currency, amount FROM wallets
         WHERE account = (SELECT key FROM economy_accounts WHERE user_id = ?1)
         ORDER BY currency",
    )
    .and_then(|mut s| {
        s.query_map([user_id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
    })
    .map_err(db_error)
}

pub fn inventory(
    conn: &Connection,
    user_id: Uuid,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<InventoryItem>, StoreError> {
    conn.prepare_cached(
        "SELECT item_id, kind, count, properties, update_time_ms FROM inventory
         WHERE account = (SELECT key FROM economy_accounts WHERE user_id = ?1) AND count > 0
           AND item_id > ?2
         ORDER BY item_id LIMIT ?3",
    )
    .and_then(|mut s| {
        let args = params![
            user_id.to_string(),
            after.unwrap_or(""),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ];
        s.query_map(args, |r| {
            Ok(InventoryItem {
                item_id: r.get(0)?,
                kind: r.get(1)?,
                count: r.get(2)?,
                properties: r.get(3)?,
                update_time_ms: r.get(4)?,
            })
        })
        .and_then(|rows| rows.collect())
    })
    .map_err(db_error)
}

/// A ledger row as read, before its JSON columns are parsed.
struct RawEntry {
    id: i64,
    changes: String,
    balances: String,
    reason: String,
    metadata: String,
    idempotency_key: Option<String>,
    create_time_ms: i64,
}

pub fn ledger(
    conn: &Connection,
    user_id: Uuid,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<LedgerEntry>, StoreError> {
    let rows: Vec<RawEntry> = conn
        .prepare_cached(
            "SELECT id, changes, balances, reason, metadata, idempotency_key, create_time_ms
             FROM ledger
             WHERE account = (SELECT key FROM economy_accounts WHERE user_id = ?1) AND id < ?2
             ORDER BY id DESC LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    user_id.to_string(),
                    before.unwrap_or(i64::MAX),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| {
                    Ok(RawEntry {
                        id: r.get(0)?,
                        changes: r.get(1)?,
                        balances: r.get(2)?,
                        reason: r.get(3)?,
                        metadata: r.get(4)?,
                        idempotency_key: r.get(5)?,
                        create_time_ms: r.get(6)?,
                    })
                },
            )
            .and_then(|rows| rows.collect())
        })
        .map_err(db_error)?;
    rows.into_iter()
        .map(|raw| {
            Ok(LedgerEntry {
                id: raw.id,
                changes: Changes::from_json(&raw.changes)?,
                balances: Changes::from_json(&raw.balances)?,
                reason: raw.reason,
                metadata: raw.metadata,
                idempotency_key: raw.idempotency_key,
                create_time_ms: raw.create_time_ms,
            })
        })
        .collect()
}

#[async_trait]
impl EconomyStore for SqliteStore {
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError> {
        self.write("apply_ledger", move |conn| apply(conn, &write))
            .await
    }

    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        self.read("wallet", move |conn| wallet(conn, user_id)).await
    }

    async fn inventory(
        &self,
        user_id: Uuid,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InventoryItem>, StoreError> {
        self.read("inventory", move |conn| {
            inventory(conn, user_id, after.as_deref(), limit)
        })
        .await
    }

    async fn ledger(
        &self,
        user_id: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        self.read("ledger", move |conn| ledger(conn, user_id, before, limit))
            .await
    }

    async fn set_ledger_metadata(
        &self,
        id: i64,
        metadata: String,
    ) -> Result<Option<(Uuid, LedgerEntry)>, StoreError> {
        self.write("ledger_metadata", move |conn| {
            let changed = conn
                .prepare_cached("UPDATE ledger SET metadata = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, metadata]))
                .map_err(db_error)?;
            if changed == 0 {
                return Ok(None);
            }
            let row = conn
                .prepare_cached(
                    "SELECT l.id, l.changes, l.balances, l.reason, l.metadata, l.idempotency_key,
                            l.create_time_ms, a.user_id
                     FROM ledger l JOIN economy_accounts a ON a.key = l.account WHERE l.id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([id], |r| {
                        Ok((
                            RawEntry {
                                id: r.get(0)?,
                                changes: r.get(1)?,
                                balances: r.get(2)?,
                                reason: r.get(3)?,
                                metadata: r.get(4)?,
                                idempotency_key: r.get(5)?,
                                create_time_ms: r.get(6)?,
                            },
                            r.get::<_, String>(7)?,
                        ))
                    })
                    .optional()
                })
                .map_err(db_error)?;
            let Some((raw, user)) = row else {
                return Ok(None);
            };
            let user = crate::store::sqlite::parse_uuid(&user)?;
            Ok(Some((
                user,
                LedgerEntry {
                    id: raw.id,
                    changes: Changes::from_json(&raw.changes)?,
                    balances: Changes::from_json(&raw.balances)?,
                    reason: raw.reason,
                    metadata: raw.metadata,
                    idempotency_key: raw.idempotency_key,
                    create_time_ms: raw.create_time_ms,
                },
            )))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory database with the economy's migrations up to `version`, over the one
    /// table of the accounts' they stand on (`users`, which their rows reference).
    fn migrated_to(version: i64) -> Connection {
        let conn = Connection::open_in_memory().expect("open");
        conn.pragma_update(None, "foreign_keys", "ON")
            .expect("pragma");
        conn.execute_batch(
            "CREATE TABLE users (id TEXT PRIMARY KEY NOT NULL, username TEXT NOT NULL,
                                 create_time_ms BIGINT NOT NULL, update_time_ms BIGINT NOT NULL)",
        )
        .expect("users");
        let migrations = crate::economy::store::MIGRATIONS.iter();
        for migration in migrations.filter(|m| m.version <= version) {
            conn.execute_batch(migration.sqlite).expect(migration.name);
        }
        conn
    }

    fn add_user(conn: &Connection, id: Uuid) {
        conn.execute(
            "INSERT INTO users (id, username, create_time_ms, update_time_ms) VALUES (?1, ?1, 0, 0)",
            [id.to_string()],
        )
        .expect("user");
    }

    fn spend(user_id: Uuid, coins: i64, key: Option<&str>) -> LedgerWrite {
        let mut changes = Changes::default();
        changes.wallet.insert("coins".into(), -coins);
        LedgerWrite {
            user_id,
            wallet: vec![("coins".into(), -coins)],
            items: vec![],
            reason: "test".into(),
            metadata: "{}".into(),
            idempotency_key: key.map(str::to_owned),
            changes: changes.to_json(),
            now_ms: 1,
        }
    }

    #[test]
    fn account_keys_migration_keeps_every_balance_item_and_ledger_row() {
        let conn = migrated_to(3);
        let (alice, bob) = (Uuid::new_v4(), Uuid::new_v4());
        for (user, coins) in [(alice, 100), (bob, 7)] {
            add_user(&conn, user);
            let user = user.to_string();
            conn.execute_batch(&format!(
                "INSERT INTO wallets VALUES ('{user}', 'coins', {coins});
                 INSERT INTO inventory VALUES ('{user}', 'sword', 'weapon', 2, '{{\"edge\":1}}', 5);
                 INSERT INTO ledger (user_id, changes, balances, reason, idempotency_key, create_time_ms)
                    VALUES ('{user}', '{{\"wallet\":{{\"coins\":{coins}}}}}', '{{\"wallet\":{{\"coins\":{coins}}}}}', 'grant', 'k1', 3);"
            ))
            .expect("version 3 rows");
        }
        let ledger_ids: Vec<i64> = [alice, bob]
            .iter()
            .map(|u| {
                conn.query_row(
                    "SELECT id FROM ledger WHERE user_id = ?1",
                    [u.to_string()],
                    |r| r.get(0),
                )
                .expect("ledger before")
            })
            .collect();

        let fourth = crate::economy::store::MIGRATIONS
            .iter()
            .find(|m| m.version == 4);
        conn.execute_batch(fourth.expect("migration 4").sqlite)
            .expect("migration 4");

        assert_eq!(
            wallet(&conn, alice).expect("wallet"),
            [("coins".to_owned(), 100)]
        );
        assert_eq!(
            wallet(&conn, bob).expect("wallet"),
            [("coins".to_owned(), 7)]
        );
        let items = inventory(&conn, alice, None, 100).expect("inventory");
        assert_eq!((items[0].item_id.as_str(), items[0].count), ("sword", 2));
        assert_eq!(items[0].properties, r#"{"edge":1}"#);
        for (user, &id) in [alice, bob].into_iter().zip(&ledger_ids) {
            let rows = ledger(&conn, user, None, 10).expect("ledger after");
            assert_eq!(rows.len(), 1);
            assert_eq!(
                rows[0].id, id,
                "ledger ids are clients' cursors and must not move"
            );
        }
        // Writes after the migration see the migrated rows: the idempotency key still replays,
        // a spend is checked against the migrated balance, and a new row gets a new id.
        let replay = apply(&conn, &spend(alice, 1, Some("k1"))).expect("replay");
        assert!(
            matches!(replay, LedgerOutcome::Refused(Refusal::KeyReused)),
            "{replay:?}"
        );
        let over = apply(&conn, &spend(bob, 8, None)).expect("overdraw");
        assert!(matches!(
            over,
            LedgerOutcome::Refused(Refusal::InsufficientFunds { balance: 7, .. })
        ));
        let LedgerOutcome::Applied(receipt) = apply(&conn, &spend(bob, 7, None)).expect("spend")
        else {
            panic!("spend not applied");
        };
        assert_eq!(receipt.balances.wallet["coins"], 0);
        assert!(receipt.ledger_id > ledger_ids[1]);
        // Deleting an account still takes its economy rows with it.
        conn.execute("DELETE FROM users WHERE id = ?1", [bob.to_string()])
            .expect("delete");
        let left: i64 = conn
            .query_row("SELECT count(*) FROM ledger", [], |r| r.get(0))
            .expect("count");
        assert_eq!(left, 1);
    }

    #[test]
    fn an_account_without_economy_rows_gets_its_key_only_when_a_write_applies() {
        let conn = migrated_to(4);
        let user = Uuid::new_v4();
        add_user(&conn, user);
        let keys = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM economy_accounts", [], |r| r.get(0))
                .expect("count")
        };
        let refused = apply(&conn, &spend(user, 1, None)).expect("refused");
        assert!(matches!(
            refused,
            LedgerOutcome::Refused(Refusal::InsufficientFunds { balance: 0, .. })
        ));
        assert_eq!(keys(&conn), 0, "a refused write writes nothing");
        assert!(wallet(&conn, user).expect("wallet").is_empty());
        let LedgerOutcome::Applied(_) = apply(&conn, &spend(user, -5, None)).expect("grant") else {
            panic!("grant not applied");
        };
        assert_eq!(keys(&conn), 1);
        assert_eq!(
            wallet(&conn, user).expect("wallet"),
            [("coins".to_owned(), 5)]
        );
        let missing = apply(&conn, &spend(Uuid::new_v4(), -5, None));
        assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
    }
}
