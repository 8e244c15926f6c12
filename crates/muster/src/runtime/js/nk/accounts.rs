//! Accounts and users: `accountGetId`, `accountsGetId`, `accountUpdateId`, `accountDeleteId`,
//! `usersGetId`, `usersGetUsername`, `usersGetRandom`, `usersBanId`, `usersUnbanId`.

use muster_js::JsError;
use muster_proto::api::UpdateAccountRequest;
use serde_json::{json, Value};
use uuid::Uuid;

use super::context::{invalid, refused, shaped, Args, ServerHost};

pub(super) const NAMES: &[&str] = &[
    "accountGetId",
    "accountsGetId",
    "accountUpdateId",
    "accountDeleteId",
    "usersGetId",
    "usersGetUsername",
    "usersBanId",
    "usersUnbanId",
    "usersGetRandom",
];

/// Most accounts one `accountsGetId` reads.
const MAX_ACCOUNTS: usize = 100;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let accounts = &host.services.accounts;
    match name {
        "accountGetId" => {
            let user = args.user(0, "userId")?;
            account(host, user)
        }
        "accountsGetId" => {
            let ids = user_ids(args, 0, "userIds")?;
            if ids.len() > MAX_ACCOUNTS {
                return Err(invalid(format!("At most {MAX_ACCOUNTS} user IDs at once.")));
            }
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                match account(host, id) {
                    Ok(account) => found.push(account),
                    Err(error) if error.code == 5 => {}
                    Err(error) => return Err(error),
                }
            }
            Ok(Value::Array(found))
        }
        // accountUpdateId(userId, username, displayName, timezone, location, language, avatar,
        // metadata)
        "accountUpdateId" => {
            let user = args.user(0, "userId")?;
            let text = |i: usize| args.get(i).as_str().map(str::to_owned);
            let change = AccountChange {
                user,
                request: UpdateAccountRequest {
                    username: text(1).filter(|s| !s.is_empty()),
                    display_name: text(2),
                    timezone: text(3),
                    location: text(4),
                    lang_tag: text(5),
                    avatar_url: text(6),
                },
                metadata: match args.missing(7) {
                    true => None,
                    false => Some(args.json_text(7, "metadata")?),
                },
            };
            update(host, change)?;
            Ok(Value::Null)
        }
        "accountDeleteId" => {
            let user = args.user(0, "userId")?;
            host.wait(async {
                accounts.delete(user).await?;
                host.services.leaderboards.forget_owner(user).await;
                Ok::<_, crate::accounts::AccountError>(())
            })?
            .map_err(refused)?;
            Ok(Value::Null)
        }
        "usersGetId" | "usersGetUsername" => {
            let list = args.strings(
                0,
                if name == "usersGetId" {
                    "userIds"
                } else {
                    "usernames"
                },
            )?;
            let (ids, usernames) = if name == "usersGetId" {
                (list, Vec::new())
            } else {
                (Vec::new(), list)
            };
            let router = host.services.router.clone();
            let users = host
                .wait(accounts.users(&ids, usernames, |id| router.is_online(id)))?
                .map_err(refused)?;
            Ok(Value::Array(users.into_iter().map(user).collect()))
        }
        // usersGetRandom(count): at most 1,000.
        "usersGetRandom" => {
            let count = args
                .int(0, "count")?
                .filter(|n| *n >= 0)
                .ok_or_else(|| invalid("count must be a number of at least 0"))?;
            let router = host.services.router.clone();
            let users = host
                .wait(accounts.random_users(count as usize, |id| router.is_online(id)))?
                .map_err(refused)?;
            Ok(Value::Array(users.into_iter().map(user).collect()))
        }
        "usersBanId" | "usersUnbanId" => {
            let ids = user_ids(args, 0, "userIds")?;
            let done = if name == "usersBanId" {
                host.wait(accounts.ban(&ids))?
            } else {
                host.wait(accounts.unban(&ids))?
            };
            done.map_err(refused)?;
            Ok(Value::Null)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// One account's change, as `accountUpdateId` and `multiUpdate` make it.
pub(super) struct AccountChange {
    pub(super) user: Uuid,
    pub(super) request: UpdateAccountRequest,
    /// The metadata's new JSON text, when it changes.
    pub(super) metadata: Option<String>,
}

impl AccountChange {
    /// One of `multiUpdate`'s account updates (`{userId, username?, displayName?, timezone?,
    /// location?, langTag?, avatarUrl?, metadata?}`), read and checked as far as can be before
    /// anything is written: the username's form and the metadata's size.
    pub(super) fn from_object(one: &Value) -> Result<AccountChange, JsError> {
        if !one.is_object() {
            return Err(invalid("expects an array of account updates"));
        }
        let user = match &one["userId"] {
            Value::String(s) => Uuid::parse_str(s)
                .map_err(|_| invalid("expects 'userId' value to be a valid id"))?,
            _ => return Err(invalid("expects 'userId' value to be a string")),
        };
        let text = |field: &str| match &one[field] {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(invalid(format!("expects '{field}' value to be a string"))),
        };
        let request = UpdateAccountRequest {
            username: text("username")?.filter(|s| !s.is_empty()),
            display_name: text("displayName")?,
            timezone: text("timezone")?,
            location: text("location")?,
            lang_tag: text("langTag")?,
            avatar_url: text("avatarUrl")?,
        };
        if let Some(username) = &request.username {
            crate::accounts::validate_username(username).map_err(refused)?;
        }
        let metadata = match &one["metadata"] {
            Value::Null => None,
            Value::Object(_) => Some(one["metadata"].to_string()),
            _ => return Err(invalid("expects metadata to be a key value object")),
        };
        if metadata
            .as_ref()
            .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
        {
            return Err(invalid(format!(
                "Metadata must be at most {MAX_METADATA_BYTES} bytes."
            )));
        }
        Ok(AccountChange {
            user,
            request,
            metadata,
        })
    }
}

/// Largest account metadata, in bytes (the accounts service's bound).
const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Applies one account's change: its profile, then its metadata.
pub(super) fn update(host: &ServerHost, change: AccountChange) -> Result<(), JsError> {
    let accounts = &host.services.accounts;
    host.wait(accounts.update(change.user, change.request))?
        .map_err(refused)?;
    if let Some(metadata) = change.metadata {
        host.wait(accounts.set_metadata(change.user, &metadata))?
            .map_err(refused)?;
    }
    Ok(())
}

fn account(host: &ServerHost, id: Uuid) -> Result<Value, JsError> {
    let online = host.services.router.is_online(id);
    let account = host
        .wait(host.services.accounts.account(id, online))?
        .map_err(refused)?;
    let mut shaped = shaped(&account);
    if let Some(object) = shaped.as_object_mut() {
        object.insert("user".into(), user(account.user));
        // Nakama's runtime gives the wallet as an object of amounts.
        object.insert(
            "wallet".into(),
            serde_json::from_str(&account.wallet).unwrap_or_else(|_| json!({})),
        );
    }
    Ok(shaped)
}

/// A user as Nakama's runtime gives one: `userId`, camelCase fields, metadata an object.
pub(super) fn user(user: muster_proto::api::User) -> Value {
    let mut value = shaped(&user);
    if let Some(object) = value.as_object_mut() {
        if let Some(id) = object.remove("id") {
            object.insert("userId".into(), id);
        }
    }
    value
}

pub(super) fn user_ids(args: &Args, i: usize, what: &str) -> Result<Vec<Uuid>, JsError> {
    args.strings(i, what)?
        .iter()
        .map(|s| Uuid::parse_str(s).map_err(|_| invalid(format!("{what}: {s:?} is not a user id"))))
        .collect()
}
