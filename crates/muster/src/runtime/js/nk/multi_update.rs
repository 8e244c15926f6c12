//! `multiUpdate(accountUpdates, storageObjectsUpdates, storageObjectsDeletes, walletUpdates,
//! updateLedger?)` → `{ storageWriteAcks, walletUpdateAcks }`; a `null` part is skipped.
//!
//! **Not atomic across its parts.** Nakama makes the whole call one database transaction;
//! Muster's accounts, storage and economy each have a write path of their own, so the parts run
//! in order — the account updates (one at a time), the storage writes (one batch, all or none),
//! the storage deletes (one batch, all or none), the wallet updates (one at a time, each
//! atomic) — and a part that fails leaves the parts before it applied (and, within the account
//! and wallet updates, the ones before it). What can be checked without writing is checked for
//! every part before anything is applied: the shapes, ids, names, sizes and bounds (a taken
//! username, a storage version that no longer matches or a balance that would go below zero is
//! found only as its part runs). Each part goes through the path its own function takes
//! (`accountUpdateId`, `storageWrite`, `storageDelete`, `walletsUpdate`). `updateLedger` is
//! accepted and changes nothing: every wallet change writes its ledger row in Muster.

use muster_js::JsError;
use serde_json::{json, Value};

use super::accounts::{self, AccountChange};
use super::context::{invalid, Args, ServerHost};
use super::{economy, storage};

pub(super) const NAMES: &[&str] = &["multiUpdate"];

/// Most account updates one call makes.
const MAX_ACCOUNTS: usize = 100;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    if name != "multiUpdate" {
        return Err(JsError::new(format!("nk.{name} is not available"), 12));
    }
    // Every part read and checked first.
    let account_changes = match part(args, 0, "expects an array of account updates")? {
        None => Vec::new(),
        Some(list) => {
            if list.len() > MAX_ACCOUNTS {
                return Err(invalid(format!(
                    "At most {MAX_ACCOUNTS} account updates at once."
                )));
            }
            list.iter()
                .map(AccountChange::from_object)
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    let writes = match part(args, 1, "expects a valid array of data")? {
        None => Vec::new(),
        Some(list) => {
            let writes = storage::write_objects(list)?;
            let names = writes
                .iter()
                .map(|w| (w.collection.as_str(), w.key.as_str()));
            storage::check_batch(host, writes.len(), names)?;
            storage::check_permissions(&writes)?;
            writes
        }
    };
    let deletes = match part(args, 2, "expects a valid array of data")? {
        None => Vec::new(),
        Some(list) => {
            let deletes = storage::delete_objects(list)?;
            let names = deletes
                .iter()
                .map(|d| (d.collection.as_str(), d.key.as_str()));
            storage::check_batch(host, deletes.len(), names)?;
            deletes
        }
    };
    let wallets = match args.get(3) {
        Value::Null => Vec::new(),
        updates => economy::wallet_changes(updates)?,
    };
    match args.get(4) {
        Value::Null | Value::Bool(_) => {}
        _ => return Err(invalid("expects updateLedger to be a boolean")),
    }

    // Then applied, part by part.
    for change in account_changes {
        accounts::update(host, change)?;
    }
    let storage_acks = match writes.is_empty() {
        true => json!([]),
        false => storage::write(host, writes)?,
    };
    if !deletes.is_empty() {
        storage::delete(host, deletes)?;
    }
    let wallet_acks = wallets
        .into_iter()
        .map(|change| economy::apply(host, change))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "storageWriteAcks": storage_acks,
        "walletUpdateAcks": wallet_acks,
    }))
}

/// Argument `i` as a list, `None` when `null` or absent.
fn part<'a>(args: &'a Args, i: usize, refusal: &str) -> Result<Option<&'a Vec<Value>>, JsError> {
    match args.get(i) {
        Value::Null => Ok(None),
        Value::Array(list) => Ok(Some(list)),
        _ => Err(invalid(refusal)),
    }
}
