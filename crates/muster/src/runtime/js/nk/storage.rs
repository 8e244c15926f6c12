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
            let objects = list(args, "objects")?
                .iter()
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
                .collect::<Result<Vec<_>, JsError>>()?;
            let acks = host
                .wait(storage.write(Caller::Server, objects))?
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
        "storageDelete" => {
            let objects = list(args, "keys")?
                .iter()
                .map(|one| {
                    Ok(DeleteObject {
                        collection: text(one, "collection")?,
                        key: text(one, "key")?,
                        owner: owner(one)?,
                        version: one["version"].as_str().unwrap_or_default().to_owned(),
                    })
                })
                .collect::<Result<Vec<_>, JsError>>()?;
            host.wait(storage.delete(Caller::Server, objects))?
                .map_err(refused)?;
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
