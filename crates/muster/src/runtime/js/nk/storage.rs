//! Storage objects, as the server (any owner, system objects, every permission):
//! `storageRead`, `storageWrite`, `storageDelete`, `storageList`. An absent or empty `userId`
//! is the system.

use muster_js::JsError;
use serde_json::{json, Value};
use uuid::Uuid;

use super::context::{invalid, json_text, parse_user, refused, shaped, Args, ServerHost};
use crate::storage::api_object as object;
use crate::storage::{Caller, DeleteObject, ObjectId, WriteObject};

pub(super) const NAMES: &[&str] = &[
    "storageRead",
    "storageWrite",
    "storageDelete",
    "storageList",
];

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let storage = &host.services.storage;
    match name {
        "storageRead" => {
            let ids = list(args, "keys")?
                .iter()
                .map(|one| {
                    Ok(ObjectId {
                        collection: text(one, "collection")?,
                        key: text(one, "key")?,
                        owner: owner(one)?,
                    })
                })
                .collect::<Result<Vec<_>, JsError>>()?;
            let records = host
                .wait(storage.read(Caller::Server, ids))?
                .map_err(refused)?;
            Ok(Value::Array(
                records.into_iter().map(|r| shaped(object(r))).collect(),
            ))
        }
        "storageWrite" => {
            let objects = write_objects(list(args, "objects")?)?;
            write(host, objects)
        }
        "storageDelete" => {
            let objects = delete_objects(list(args, "keys")?)?;
            delete(host, objects)?;
            Ok(Value::Null)
        }
        // storageList(userId | null, collection, limit?, cursor?)
        "storageList" => {
            let owner = args.opt_user(0, "userId")?;
            let collection = args.string(1, "collection")?;
            let limit = args.int(2, "limit")?.map(|l| l.max(0) as usize);
            let cursor = args.opt_string(3);
            let page = host
                .wait(storage.list(Caller::Server, &collection, owner, limit, cursor.as_deref()))?
                .map_err(refused)?;
            let objects: Vec<Value> = page
                .objects
                .into_iter()
                .map(|r| shaped(object(r)))
                .collect();
            let mut answer = json!({ "objects": objects });
            if let Some(cursor) = page.cursor {
                answer["cursor"] = cursor.into();
            }
            Ok(answer)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// `storageWrite`'s objects (`{collection, key, userId?, value, version?, permissionRead?,
/// permissionWrite?}`), read.
pub(super) fn write_objects(list: &[Value]) -> Result<Vec<WriteObject>, JsError> {
    list.iter()
        .map(|one| {
            Ok(WriteObject {
                collection: text(one, "collection")?,
                key: text(one, "key")?,
                owner: owner(one)?,
                value: json_text(&one["value"], "value")?,
                version: one["version"].as_str().unwrap_or_default().to_owned(),
                read: permission(one, "permissionRead")?,
                write: permission(one, "permissionWrite")?,
            })
        })
        .collect()
}

/// Writes `objects` as the server: the acks as Nakama's runtime gives them.
pub(super) fn write(host: &ServerHost, objects: Vec<WriteObject>) -> Result<Value, JsError> {
    let acks = host
        .wait(host.services.storage.write(Caller::Server, objects))?
        .map_err(refused)?;
    Ok(Value::Array(
        acks.into_iter()
            .map(|ack| {
                json!({
                    "collection": ack.collection,
                    "key": ack.key,
                    "userId": ack.owner.map(|o| o.to_string()).unwrap_or_default(),
                    "version": ack.version,
                })
            })
            .collect(),
    ))
}

/// `storageDelete`'s keys (`{collection, key, userId?, version?}`), read.
pub(super) fn delete_objects(list: &[Value]) -> Result<Vec<DeleteObject>, JsError> {
    list.iter()
        .map(|one| {
            Ok(DeleteObject {
                collection: text(one, "collection")?,
                key: text(one, "key")?,
                owner: owner(one)?,
                version: one["version"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// Deletes `objects` as the server.
pub(super) fn delete(host: &ServerHost, objects: Vec<DeleteObject>) -> Result<(), JsError> {
    host.wait(host.services.storage.delete(Caller::Server, objects))?
        .map_err(refused)
}

/// What the storage service would refuse in a batch of `len` objects named by `names`
/// (a collection and key each), checked before anything is written: the batch's size, names
/// set and bounded. (A version that no longer matches is found only as the batch is written.)
pub(super) fn check_batch<'a>(
    host: &ServerHost,
    len: usize,
    mut names: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<(), JsError> {
    let most = host.services.config.storage.max_objects_per_request;
    if len > most {
        return Err(invalid(format!(
            "Too many objects - at most {most} per request."
        )));
    }
    let bad = |n: &str| n.is_empty() || n.len() > crate::storage::MAX_NAME_BYTES;
    if names.any(|(collection, key)| bad(collection) || bad(key)) {
        return Err(invalid(format!(
            "Invalid collection or key value supplied. They must be set, and at most {} bytes.",
            crate::storage::MAX_NAME_BYTES
        )));
    }
    Ok(())
}

/// `storageWrite`'s permissions as the storage service takes them, checked before anything is
/// written.
pub(super) fn check_permissions(objects: &[WriteObject]) -> Result<(), JsError> {
    for object in objects {
        if !(0..=2).contains(&object.read.unwrap_or(1)) {
            return Err(invalid(
                "Invalid read permission supplied. It must be either 0, 1 or 2.",
            ));
        }
        if !(0..=1).contains(&object.write.unwrap_or(1)) {
            return Err(invalid(
                "Invalid write permission supplied. It must be either 0 or 1.",
            ));
        }
    }
    Ok(())
}

fn list<'a>(args: &'a Args, what: &str) -> Result<&'a Vec<Value>, JsError> {
    args.get(0)
        .as_array()
        .ok_or_else(|| invalid(format!("{what} must be an array")))
}

fn text(object: &Value, field: &str) -> Result<String, JsError> {
    object[field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("{field} must be a string")))
}

/// `userId`: absent, empty or the nil id for the system.
fn owner(object: &Value) -> Result<Option<Uuid>, JsError> {
    match &object["userId"] {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        other => Ok(Some(parse_user(other, "userId")?).filter(|id| !id.is_nil())),
    }
}

fn permission(object: &Value, field: &str) -> Result<Option<i32>, JsError> {
    match &object[field] {
        Value::Null => Ok(None),
        value => value
            .as_i64()
            .map(|p| Some(p as i32))
            .ok_or_else(|| invalid(format!("{field} must be 0, 1 or 2"))),
    }
}
