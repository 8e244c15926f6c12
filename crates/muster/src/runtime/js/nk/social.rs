//! Notifications, friends and groups, on any user's behalf: the `notification…`, `friends…`,
//! `friendMetadataUpdate`, `usersGetFriendStatus`, `group…`, `groupsGetId` and `userGroupsList`
//! functions of Nakama's runtime.
//!
//! `notificationSendAll(subject, content, code, persistent?)` returns at once and sends in a
//! background task, as Nakama does, through the notifications service, [`SEND_ALL_PAGE`]
//! recipients a send: a persistent one to every account (stored for each, and delivered to
//! those online), walked in pages of ids in their order; one that is not persistent to every
//! user with a socket open — on one node, this node's sessions' users; in a cluster (where a
//! node knows which users are online elsewhere but cannot list them), the accounts walked in
//! pages as for a persistent one and sent to each user online on any node. Nakama's router
//! sends one envelope to every session instead; the notifications a player gets are the same.

use muster_js::JsError;
use muster_proto::api::{CreateGroupRequest, UpdateGroupRequest};
use serde_json::{json, Value};
use uuid::Uuid;

use std::collections::BTreeSet;
use std::sync::Arc;

use super::context::{invalid, json_text, parse_user, refused, shaped, Args, ServerHost};
use crate::friends::Targets;
use crate::groups::store::{Actor, GroupChanges, MemberChange};
use crate::groups::GroupQuery;
use crate::notifications::store::{NotificationRecord, NotificationUpdate};
use crate::notifications::{NewNotification, NotificationError, Notifications};
use crate::services::Services;

pub(super) const NAMES: &[&str] = &[
    "notificationSend",
    "notificationsSend",
    "notificationsList",
    "notificationsDelete",
    "notificationsGetId",
    "notificationsDeleteId",
    "notificationsUpdate",
    "notificationSendAll",
    "friendsList",
    "friendsOfFriendsList",
    "friendsAdd",
    "friendsDelete",
    "friendsBlock",
    "friendMetadataUpdate",
    "usersGetFriendStatus",
    "groupCreate",
    "groupUpdate",
    "groupDelete",
    "groupUserJoin",
    "groupUserLeave",
    "groupUsersAdd",
    "groupUsersKick",
    "groupUsersBan",
    "groupUsersPromote",
    "groupUsersDemote",
    "groupUsersList",
    "userGroupsList",
    "groupsList",
    "groupsGetId",
    "groupsGetRandom",
];

/// Most notifications one `notificationsSend` sends.
const MAX_NOTIFICATIONS: usize = 1000;

/// Recipients of one of `notificationSendAll`'s sends: a page of the accounts walked.
const SEND_ALL_PAGE: usize = crate::notifications::MAX_PER_SEND;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    if name.starts_with("notification") {
        notifications(host, name, args)
    } else if name.starts_with("friend") || name == "usersGetFriendStatus" {
        friends(host, name, args)
    } else {
        groups(host, name, args)
    }
}

fn notifications(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let service = &host.services.notifications;
    match name {
        // notificationSend(userId, subject, content, code, senderId?, persistent?)
        "notificationSend" => {
            let one = json!({
                "userId": args.get(0), "subject": args.get(1), "content": args.get(2),
                "code": args.get(3), "senderId": args.get(4), "persistent": args.get(5),
            });
            let batch = vec![notification(&one)?];
            host.wait(service.send(batch))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // notificationsSend([{userId, subject, content, code, senderId, persistent}])
        "notificationsSend" => {
            let list = args
                .get(0)
                .as_array()
                .ok_or_else(|| invalid("notifications must be an array"))?;
            if list.len() > MAX_NOTIFICATIONS {
                return Err(invalid(format!(
                    "At most {MAX_NOTIFICATIONS} notifications at once."
                )));
            }
            let batch = list.iter().map(notification).collect::<Result<_, _>>()?;
            host.wait(service.send(batch))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // notificationsList(userId, limit?, cursor?)
        "notificationsList" => {
            let user = args.user(0, "userId")?;
            let limit = args.int(1, "limit")?.unwrap_or(100).clamp(1, 1000) as usize;
            let cursor = args.opt_string(2).unwrap_or_default();
            let list = host
                .wait(service.list(user, limit, &cursor))?
                .map_err(refused)?;
            Ok(shaped(list))
        }
        // notificationsDelete([{userId, notificationId}])
        "notificationsDelete" => {
            let list = args
                .get(0)
                .as_array()
                .ok_or_else(|| invalid("notifications must be an array"))?;
            for one in list {
                let user = parse_user(&one["userId"], "userId")?;
                let id = one["notificationId"]
                    .as_str()
                    .ok_or_else(|| invalid("notificationId must be a string"))?
                    .to_owned();
                host.wait(service.delete(user, &[id]))?.map_err(refused)?;
            }
            Ok(Value::Null)
        }
        // notificationsGetId(ids, userId?): the stored ones found, in the order asked.
        "notificationsGetId" => {
            let ids = args.strings(0, "ids")?;
            let user = args.opt_user(1, "userId")?;
            let found = host.wait(service.get_by_id(&ids, user))?.map_err(refused)?;
            Ok(Value::Array(found.into_iter().map(stored).collect()))
        }
        // notificationsDeleteId(ids, userId?); also [{userId, notificationId}] as
        // notificationsDelete takes them.
        "notificationsDeleteId" => {
            let list = args
                .get(0)
                .as_array()
                .ok_or_else(|| invalid("ids must be an array"))?;
            if list.iter().all(Value::is_string) {
                let ids = args.strings(0, "ids")?;
                let user = args.opt_user(1, "userId")?;
                host.wait(service.delete_by_id(&ids, user))?
                    .map_err(refused)?;
                return Ok(Value::Null);
            }
            if list.len() > MAX_NOTIFICATIONS {
                return Err(invalid(format!(
                    "At most {MAX_NOTIFICATIONS} notifications at once."
                )));
            }
            let mut pairs = Vec::with_capacity(list.len());
            for one in list {
                if !one.is_object() {
                    return Err(invalid(
                        "ids must be notification ids, or {userId, notificationId} objects",
                    ));
                }
                let user = parse_user(&one["userId"], "userId")?;
                let id = one["notificationId"]
                    .as_str()
                    .ok_or_else(|| invalid("notificationId must be a string"))?
                    .to_owned();
                pairs.push((user, id));
            }
            for (user, id) in pairs {
                host.wait(service.delete_by_id(&[id], Some(user)))?
                    .map_err(refused)?;
            }
            Ok(Value::Null)
        }
        // notificationsUpdate([{id, subject?, content?, sender?}])
        "notificationsUpdate" => {
            let list = args
                .get(0)
                .as_array()
                .ok_or_else(|| invalid("expects an array of notification updates objects"))?;
            if list.len() > MAX_NOTIFICATIONS {
                return Err(invalid(format!(
                    "At most {MAX_NOTIFICATIONS} notification updates at once."
                )));
            }
            let updates = list.iter().map(update).collect::<Result<Vec<_>, _>>()?;
            host.wait(service.update(updates))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // notificationSendAll(subject, content, code, persistent?): from the system, to
        // everyone, in the background (see the module's documentation).
        "notificationSendAll" => {
            let subject = args
                .get(0)
                .as_str()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| invalid("expects subject to be a non empty string"))?;
            if subject.len() > crate::notifications::MAX_SUBJECT_BYTES {
                return Err(invalid(format!(
                    "expects subject to be at most {} bytes",
                    crate::notifications::MAX_SUBJECT_BYTES
                )));
            }
            if !args.get(1).is_object() {
                return Err(invalid("expects content to be an object"));
            }
            let content = args.get(1).to_string();
            if content.len() > crate::notifications::MAX_CONTENT_BYTES {
                return Err(invalid(format!(
                    "expects content to be at most {} bytes",
                    crate::notifications::MAX_CONTENT_BYTES
                )));
            }
            let code = args
                .int(2, "code")?
                .filter(|c| (1..=i64::from(i32::MAX)).contains(c))
                .ok_or_else(|| invalid("expects code number to be a positive integer"))?;
            let persistent = match args.get(3) {
                Value::Null => false,
                Value::Bool(b) => *b,
                _ => return Err(invalid("expects persistent to be a boolean")),
            };
            let template = NewNotification {
                user_id: Uuid::nil(),
                subject: subject.to_owned(),
                content,
                code: code as i32,
                sender_id: None,
                persistent,
            };
            host.spawn(send_all(host.services.clone(), template));
            Ok(Value::Null)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// `notificationSendAll`'s work: `template` to every recipient (see the module's
/// documentation), [`SEND_ALL_PAGE`] at a time.
async fn send_all(services: Arc<Services>, template: NewNotification) {
    let to = |user_id: Uuid| NewNotification {
        user_id,
        ..template.clone()
    };
    if !template.persistent && services.cluster.is_none() {
        let users: BTreeSet<Uuid> = services
            .registry
            .all_sessions()
            .into_iter()
            .map(|(_, user)| user)
            .collect();
        let users: Vec<Uuid> = users.into_iter().collect();
        for page in users.chunks(SEND_ALL_PAGE) {
            deliver(
                &services.notifications,
                page.iter().copied().map(to).collect(),
            )
            .await;
        }
        return;
    }
    let mut after = None;
    loop {
        let ids = match services
            .stores
            .accounts
            .user_ids_after(after, SEND_ALL_PAGE)
            .await
        {
            Ok(ids) => ids,
            Err(error) => {
                tracing::error!(%error, subject = %template.subject, "nk.notificationSendAll: the accounts could not be read; the rest is not sent");
                return;
            }
        };
        let Some(last) = ids.last().copied() else {
            return;
        };
        after = Some(last);
        let batch: Vec<NewNotification> = ids
            .iter()
            .copied()
            .filter(|id| template.persistent || services.router.is_online(*id))
            .map(to)
            .collect();
        if !batch.is_empty() {
            deliver(&services.notifications, batch).await;
        }
        if ids.len() < SEND_ALL_PAGE {
            return;
        }
    }
}

/// Sends `batch`; when a recipient is gone (an account deleted since its id was read), the
/// others one by one.
async fn deliver(notifications: &Notifications, batch: Vec<NewNotification>) {
    match notifications.send(batch.clone()).await {
        Ok(()) => {}
        Err(NotificationError::UserNotFound) => {
            for one in batch {
                match notifications.send(vec![one]).await {
                    Ok(()) | Err(NotificationError::UserNotFound) => {}
                    Err(error) => {
                        tracing::warn!(%error, "nk.notificationSendAll: a notification was not sent")
                    }
                }
            }
        }
        Err(error) => {
            tracing::warn!(%error, recipients = batch.len(), "nk.notificationSendAll: a page of notifications was not sent")
        }
    }
}

/// One of `notificationsUpdate`'s changes, checked as Nakama checks them.
fn update(one: &Value) -> Result<NotificationUpdate, JsError> {
    if !one.is_object() {
        return Err(invalid("expects an array of notification updates objects"));
    }
    let id = one["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("expects 'id' value to be a non-empty string"))?;
    let id = Uuid::parse_str(id).map_err(|_| invalid("expects 'id' value to be a valid id"))?;
    let content = match &one["content"] {
        Value::Null => None,
        content @ Value::Object(_) => Some(content.to_string()),
        _ => return Err(invalid("expects 'content' value to be a non-empty map")),
    };
    let subject = match &one["subject"] {
        Value::Null => None,
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => return Err(invalid("expects 'subject' value to be a non-empty string")),
    };
    let sender_id = match &one["sender"] {
        Value::Null => None,
        Value::String(s) if !s.is_empty() => Some(
            Uuid::parse_str(s).map_err(|_| invalid("expects 'sender' value to be a user id"))?,
        ),
        _ => return Err(invalid("expects 'sender' value to be a non-empty string")),
    };
    Ok(NotificationUpdate {
        id,
        subject,
        content,
        sender_id,
    })
}

/// A stored notification as Nakama's `notificationsGetId` gives one.
fn stored(record: NotificationRecord) -> Value {
    json!({
        "id": record.id.to_string(),
        "userId": record.user_id.to_string(),
        "subject": record.subject,
        "persistent": true,
        "content": serde_json::from_str::<Value>(&record.content).unwrap_or_else(|_| json!({})),
        "code": record.code,
        "sender": record.sender_id.map(|id| id.to_string()).unwrap_or_default(),
        "createTime": record.create_time_ms / 1000,
    })
}

fn notification(one: &Value) -> Result<NewNotification, JsError> {
    let sender_id = match &one["senderId"] {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        other => Some(parse_user(other, "senderId")?),
    };
    Ok(NewNotification {
        user_id: parse_user(&one["userId"], "userId")?,
        subject: one["subject"].as_str().unwrap_or_default().to_owned(),
        content: json_text(&one["content"], "content")?,
        code: one["code"].as_i64().unwrap_or(0) as i32,
        sender_id,
        persistent: one["persistent"].as_bool().unwrap_or(false),
    })
}

fn friends(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let service = &host.services.friends;
    let user = args.user(0, "userId")?;
    match name {
        // friendsList(userId, limit?, state?, cursor?)
        "friendsList" => {
            let limit = args.int(1, "limit")?.unwrap_or(100).clamp(1, 1000) as usize;
            let state = args.int(2, "state")?.map(|s| s as i32);
            let cursor = args.opt_string(3).unwrap_or_default();
            let list = host
                .wait(service.list(user, limit, state, &cursor))?
                .map_err(refused)?;
            Ok(with_list(shaped(list), "friends"))
        }
        // friendsOfFriendsList(userId, limit?, cursor?)
        // usersGetFriendStatus(userId, userIds): userId's edges to those it has one to.
        "usersGetFriendStatus" => {
            let others = args.strings(1, "userIds")?;
            let found = host
                .wait(service.status_among(user, &others))?
                .map_err(refused)?;
            Ok(Value::Array(found.into_iter().map(shaped).collect()))
        }
        // friendMetadataUpdate(userId, friendUserId, metadata): replaces the metadata of
        // userId's edge to friendUserId (none: nothing changes, as in Nakama).
        "friendMetadataUpdate" => {
            let friend = args.user(1, "friendUserId")?;
            if !args.get(2).is_object() {
                return Err(invalid("expects metadata to be an object"));
            }
            let metadata = args.get(2).to_string();
            host.wait(service.set_metadata(user, friend, &metadata))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        "friendsOfFriendsList" => {
            let limit = args.int(1, "limit")?.unwrap_or(10).clamp(1, 100) as usize;
            let cursor = args.opt_string(2).unwrap_or_default();
            let list = host
                .wait(service.friends_of_friends(user, limit, &cursor))?
                .map_err(refused)?;
            Ok(with_list(shaped(list), "friendsOfFriends"))
        }
        // friendsAdd / friendsDelete / friendsBlock(userId, username, ids, usernames)
        _ => {
            let username = args.opt_string(1).unwrap_or_default();
            let targets = Targets {
                ids: args.strings(2, "ids")?,
                usernames: args.strings(3, "usernames")?,
            };
            let done = match name {
                "friendsAdd" => host.wait(service.add(user, &username, targets))?,
                "friendsDelete" => host.wait(service.delete(user, &username, targets))?,
                "friendsBlock" => host.wait(service.block(user, targets))?,
                _ => return Err(JsError::new(format!("nk.{name} is not available"), 12)),
            };
            done.map_err(refused)?;
            Ok(json!({}))
        }
    }
}

fn groups(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let service = &host.services.groups;
    let text = |i: usize| args.get(i).as_str().map(str::to_owned);
    match name {
        // groupCreate(userId, name, creatorId?, lang?, description?, avatarURL?, open?,
        // metadata?, limit?)
        "groupCreate" => {
            let user = args.user(0, "userId")?;
            let request = CreateGroupRequest {
                name: args.string(1, "name")?,
                description: text(4).unwrap_or_default(),
                lang_tag: text(3).unwrap_or_default(),
                avatar_url: text(5).unwrap_or_default(),
                open: args.bool(6).unwrap_or(false),
                max_count: args.int(8, "limit")?.unwrap_or(0) as i32,
            };
            let group = host.wait(service.create(user, request))?.map_err(refused)?;
            let mut group = shaped(group);
            if !args.missing(7) {
                let metadata = args.json_text(7, "metadata")?;
                let id = group["id"].as_str().and_then(|s| Uuid::parse_str(s).ok());
                if let Some(id) = id {
                    let changes = GroupChanges {
                        metadata: Some(metadata.clone()),
                        ..GroupChanges::default()
                    };
                    host.wait(service.update_as_server(id, changes))?
                        .map_err(refused)?;
                    group["metadata"] = serde_json::from_str(&metadata).unwrap_or(json!({}));
                }
            }
            Ok(group)
        }
        // groupUpdate(groupId, userId | null, name?, creatorId?, lang?, description?,
        // avatarURL?, open?, metadata?, limit?)
        "groupUpdate" => {
            let id = args.user(0, "groupId")?;
            let changes = GroupChanges {
                name: text(2),
                lang_tag: text(4),
                description: text(5),
                avatar_url: text(6),
                open: args.bool(7),
                metadata: match args.missing(8) {
                    true => None,
                    false => Some(args.json_text(8, "metadata")?),
                },
                max_count: args.int(9, "limit")?.map(|l| l as i32),
            };
            match args.opt_user(1, "userId")? {
                // As that user: held to their rights in the group.
                Some(user) if changes.metadata.is_none() && changes.max_count.is_none() => {
                    let request = UpdateGroupRequest {
                        group_id: id.to_string(),
                        name: changes.name,
                        description: changes.description,
                        lang_tag: changes.lang_tag,
                        avatar_url: changes.avatar_url,
                        open: changes.open,
                    };
                    host.wait(service.update(Actor::User(user), &id.to_string(), request))?
                        .map_err(refused)?;
                }
                _ => {
                    host.wait(service.update_as_server(id, changes))?
                        .map_err(refused)?;
                }
            }
            Ok(Value::Null)
        }
        "groupDelete" => {
            let id = args.string(0, "groupId")?;
            host.wait(service.delete(Actor::Server, &id))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        // groupUserJoin / groupUserLeave(groupId, userId, username)
        "groupUserJoin" => {
            let id = args.string(0, "groupId")?;
            let user = args.user(1, "userId")?;
            let username = args.opt_string(2).unwrap_or_default();
            host.wait(service.join(user, &username, &id))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        "groupUserLeave" => {
            let id = args.string(0, "groupId")?;
            let user = args.user(1, "userId")?;
            host.wait(service.leave(user, &id))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // groupUsersAdd / Kick / Ban / Promote / Demote(groupId, userIds, callerId?)
        "groupUsersAdd" | "groupUsersKick" | "groupUsersBan" | "groupUsersPromote"
        | "groupUsersDemote" => {
            let id = args.string(0, "groupId")?;
            let users = args.strings(1, "userIds")?;
            let actor = match args.opt_user(2, "callerId")? {
                Some(caller) => Actor::User(caller),
                None => Actor::Server,
            };
            let change = match name {
                "groupUsersAdd" => MemberChange::Add,
                "groupUsersKick" => MemberChange::Kick,
                "groupUsersBan" => MemberChange::Ban,
                "groupUsersPromote" => MemberChange::Promote,
                _ => MemberChange::Demote,
            };
            host.wait(service.change_users(actor, &id, change, &users))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        // groupUsersList(groupId, limit?, state?, cursor?)
        "groupUsersList" => {
            let id = args.string(0, "groupId")?;
            let (limit, state, cursor) = page(args)?;
            let list = host
                .wait(service.users(&id, limit, state, &cursor))?
                .map_err(refused)?;
            Ok(shaped(list))
        }
        // userGroupsList(userId, limit?, state?, cursor?)
        "userGroupsList" => {
            let user = args.user(0, "userId")?;
            let (limit, state, cursor) = page(args)?;
            let list = host
                .wait(service.of_user(&user.to_string(), limit, state, &cursor))?
                .map_err(refused)?;
            Ok(shaped(list))
        }
        // groupsList(name?, langTag?, open?, members?, limit?, cursor?)
        "groupsList" => {
            let query = GroupQuery {
                name: args.opt_string(0),
                lang_tag: args.opt_string(1),
                open: args.bool(2),
                members: args.int(3, "members")?.map(|m| m as i32),
                limit: args.int(4, "limit")?.map(|l| l.max(1) as usize),
                cursor: args.opt_string(5).unwrap_or_default(),
            };
            let list = host.wait(service.list(query))?.map_err(refused)?;
            Ok(shaped(list))
        }
        // groupsGetId(groupIds): the groups found, in the order asked.
        "groupsGetId" => {
            if args.missing(0) {
                return Err(invalid("expects an array of group ids"));
            }
            let ids = args.strings(0, "groupIds")?;
            let found = host.wait(service.get_many(&ids))?.map_err(refused)?;
            Ok(Value::Array(found.into_iter().map(shaped).collect()))
        }
        // groupsGetRandom(count): at most 1,000.
        "groupsGetRandom" => {
            let count = args
                .int(0, "count")?
                .filter(|n| *n >= 0)
                .ok_or_else(|| invalid("count must be a number of at least 0"))?;
            let found = host
                .wait(service.random(count as usize))?
                .map_err(refused)?;
            Ok(Value::Array(found.into_iter().map(shaped).collect()))
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// `(limit, state, cursor)` from arguments 1 to 3.
fn page(args: &Args) -> Result<(Option<usize>, Option<i32>, String), JsError> {
    Ok((
        args.int(1, "limit")?.map(|l| l.max(1) as usize),
        args.int(2, "state")?.map(|s| s as i32),
        args.opt_string(3).unwrap_or_default(),
    ))
}

/// `answer` with its list `key` present, empty when the REST shape left it out: Nakama's
/// runtime always gives the list.
fn with_list(mut answer: Value, key: &str) -> Value {
    if let Value::Object(object) = &mut answer {
        object
            .entry(key.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    answer
}
