//! Wallet, inventory and ledger statements for the SQLite engine. Each function runs on a
//! connection the caller owns: writes on the writer thread, inside the savepoint of one group
//! commit job; reads on a reader connection.
//!
//! A write reads the balances it touches, checks every one of them in Rust (checked arithmetic:
//! never below zero, never past `i64::MAX`), and only then writes. Only the writer thread writes,
//! so nothing can change between the read and the write; a refused write has written nothing.

use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use super::ledger::{
    Changes, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
    StartingGrant, STARTING_GRANT_REASON,
};
use super::StoreError;

fn db_error(error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error {
        if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY {
            return StoreError::NotFound;
        }
    }
    StoreError::Database(error.to_string())
}

/// Applies one write; see [`super::Store::apply_ledger`].
pub fn apply(conn: &Connection, write: &LedgerWrite) -> Result<LedgerOutcome, StoreError> {
    let user = write.user_id.to_string();
    if let Some(key) = &write.idempotency_key {
        let prior = conn
            .prepare_cached(
                "SELECT id, changes, reason, balances FROM ledger
                 WHERE user_id = ?1 AND idempotency_key = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![user, key], |r| {
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
            .prepare_cached("SELECT amount FROM wallets WHERE user_id = ?1 AND currency = ?2")
            .map_err(db_error)?;
        for (currency, delta) in &write.wallet {
            let balance: i64 = amount
                .query_row(params![user, currency], |r| r.get(0))
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
            .prepare_cached("SELECT count FROM inventory WHERE user_id = ?1 AND item_id = ?2")
            .map_err(db_error)?;
        for item in &write.items {
            let held: i64 = count
                .query_row(params![user, item.item_id], |r| r.get(0))
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

    let mut set_amount = conn
        .prepare_cached(
            "INSERT INTO wallets (user_id, currency, amount) VALUES (?1, ?2, ?3)
             ON CONFLICT (user_id, currency) DO UPDATE SET amount = excluded.amount",
        )
        .map_err(db_error)?;
    for (currency, amount) in &after.wallet {
        set_amount
            .execute(params![user, currency, amount])
            .map_err(db_error)?;
    }
    let mut set_count = conn
        .prepare_cached(
            "INSERT INTO inventory (user_id, item_id, kind, count, properties, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, COALESCE(?5, '{}'), ?6)
             ON CONFLICT (user_id, item_id) DO UPDATE SET
                count = excluded.count,
                properties = COALESCE(?5, properties),
                update_time_ms = excluded.update_time_ms",
        )
        .map_err(db_error)?;
    for item in &write.items {
        let count = after.items.get(&item.item_id).copied().unwrap_or(0);
        set_count
            .execute(params![
                user,
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
        &user,
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

#[allow(clippy::too_many_arguments)]
fn insert_ledger_row(
    conn: &Connection,
    user: &str,
    changes: &str,
    balances: &str,
    reason: &str,
    metadata: &str,
    key: Option<&str>,
    now_ms: i64,
) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO ledger (user_id, changes, balances, reason, metadata, idempotency_key, create_time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| s.execute(params![user, changes, balances, reason, metadata, key, now_ms]))
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
    let user = user_id.to_string();
    let mut insert = conn
        .prepare_cached("INSERT INTO wallets (user_id, currency, amount) VALUES (?1, ?2, ?3)")
        .map_err(db_error)?;
    for (currency, amount) in &grant.wallet {
        insert
            .execute(params![user, currency, amount])
            .map_err(db_error)?;
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO inventory (user_id, item_id, kind, count, properties, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, COALESCE(?5, '{}'), ?6)",
        )
        .map_err(db_error)?;
    for item in &grant.items {
        insert
            .execute(params![
                user,
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
        &user,
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
    conn.prepare_cached("SELECT currency, amount FROM wallets WHERE user_id = ?1 ORDER BY currency")
        .and_then(|mut s| {
            s.query_map([user_id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect())
        })
        .map_err(db_error)
}

pub fn inventory(conn: &Connection, user_id: Uuid) -> Result<Vec<InventoryItem>, StoreError> {
    conn.prepare_cached(
        "SELECT item_id, kind, count, properties, update_time_ms FROM inventory
         WHERE user_id = ?1 AND count > 0 ORDER BY item_id",
    )
    .and_then(|mut s| {
        s.query_map([user_id.to_string()], |r| {
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
             FROM ledger WHERE user_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
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
