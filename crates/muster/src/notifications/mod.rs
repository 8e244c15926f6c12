//! Notifications, as Nakama has them: a message to a user from the system or another user, with
//! a subject, a JSON object and a code (negative codes are the system's: friend requests, group
//! joins, …). Each is delivered at once to every socket the user has open, on any node (the
//! realtime `notifications` envelope); a persistent one is also stored, listed oldest first with
//! a cacheable cursor (`GET /v2/notification`) and kept until the user deletes it, the newest
//! `notifications.max_per_user` of them.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_proto::api::NotificationList;
use muster_proto::realtime::{Envelope, Message, Notification, Notifications as Delivered};
use muster_proto::wire::Timestamp;
use uuid::Uuid;

use crate::cluster::Router;
use crate::notifications::store::{NotificationRecord, NotificationStore, NotificationUpdate};
use crate::session::fanout::Encoded;
use crate::store::StoreError;

/// Nakama's system notification codes.
pub mod code {
    pub const DM_REQUEST: i32 = -1;
    pub const FRIEND_REQUEST: i32 = -2;
    pub const FRIEND_ACCEPT: i32 = -3;
    pub const GROUP_ADD: i32 = -4;
    pub const GROUP_JOIN_REQUEST: i32 = -5;
    pub const FRIEND_JOIN_GAME: i32 = -6;
    pub const SINGLE_SOCKET: i32 = -7;
    pub const USER_BANNED: i32 = -8;
    pub const FRIEND_REMOVE: i32 = -9;
}

/// Longest subject, in bytes.
pub const MAX_SUBJECT_BYTES: usize = 1024;
/// Largest content (a JSON object), in bytes.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;
/// Most notifications one send carries.
pub const MAX_PER_SEND: usize = 1000;
/// Most notifications one listing returns (Nakama's bound).
pub const MAX_LIST_LIMIT: usize = 100;
/// Most ids one delete names.
pub const MAX_DELETE_IDS: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum NotificationError {
    #[error("{0}")]
    Invalid(String),
    /// A recipient that does not exist.
    #[error("User not found.")]
    UserNotFound,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for NotificationError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => NotificationError::UserNotFound,
            other => NotificationError::Store(other),
        }
    }
}

/// A notification to send.
#[derive(Debug, Clone)]
pub struct NewNotification {
    pub user_id: Uuid,
    pub subject: String,
    /// A JSON object, as text.
    pub content: String,
    pub code: i32,
    /// `None`: from the system.
    pub sender_id: Option<Uuid>,
    /// Stored and listed until deleted, as well as delivered now.
    pub persistent: bool,
}

pub struct Notifications {
    store: Arc<dyn NotificationStore>,
    router: Arc<dyn Router>,
    max_per_user: usize,
}

impl Notifications {
    pub fn new(
        store: Arc<dyn NotificationStore>,
        router: Arc<dyn Router>,
        max_per_user: usize,
    ) -> Notifications {
        Notifications {
            store,
            router,
            max_per_user,
        }
    }

    /// Sends `batch`: the persistent ones are stored first (all or none; a recipient that does
    /// not exist fails the batch), then every one is delivered to its user's open sockets.
    pub async fn send(&self, batch: Vec<NewNotification>) -> Result<(), NotificationError> {
        if batch.len() > MAX_PER_SEND {
            return Err(NotificationError::Invalid(format!(
                "At most {MAX_PER_SEND} notifications at once."
            )));
        }
        for notification in &batch {
            validate(notification)?;
        }
        let now = crate::base::clock::now_ms();
        let records: Vec<(NotificationRecord, bool)> = batch
            .into_iter()
            .map(|n| {
                let record = NotificationRecord {
                    seq: 0,
                    id: Uuid::new_v4(),
                    user_id: n.user_id,
                    subject: n.subject,
                    content: n.content,
                    code: n.code,
                    sender_id: n.sender_id,
                    create_time_ms: now,
                };
                (record, n.persistent)
            })
            .collect();
        let stored: Vec<NotificationRecord> = records
            .iter()
            .filter(|(_, persistent)| *persistent)
            .map(|(record, _)| record.clone())
            .collect();
        if !stored.is_empty() {
            self.store
                .insert_notifications(stored, self.max_per_user)
                .await?;
        }
        let mut by_user: BTreeMap<Uuid, Vec<Notification>> = BTreeMap::new();
        for (record, persistent) in records {
            by_user
                .entry(record.user_id)
                .or_default()
                .push(to_wire(record, persistent));
        }
        for (user, notifications) in by_user {
            let envelope = Envelope::new(
                String::new(),
                Message::Notifications(Delivered { notifications }),
            );
            self.router.send_to_user(user, &Encoded::new(envelope));
        }
        Ok(())
    }

    /// `user_id`'s stored notifications, oldest first, after `cursor` (a cacheable cursor of an
    /// earlier listing; empty: from the first), in the order they were stored; `limit` 1–100, 1
    /// when 0 (as Nakama). The answer's cursor lists what comes after these next time (the same
    /// position when there was nothing).
    pub async fn list(
        &self,
        user_id: Uuid,
        limit: usize,
        cursor: &str,
    ) -> Result<NotificationList, NotificationError> {
        let limit = if limit == 0 { 1 } else { limit };
        if limit > MAX_LIST_LIMIT {
            return Err(NotificationError::Invalid(
                "Invalid limit - limit must be between 1 and 100.".into(),
            ));
        }
        let after_seq = if cursor.is_empty() {
            0
        } else {
            cursor::decode(cursor)
                .ok_or_else(|| NotificationError::Invalid("Malformed cursor was used.".into()))?
        };
        let records = self
            .store
            .list_notifications(user_id, after_seq, limit)
            .await?;
        let cacheable_cursor = cursor::encode(records.last().map_or(after_seq, |last| last.seq));
        Ok(NotificationList {
            notifications: records.into_iter().map(|r| to_wire(r, true)).collect(),
            cacheable_cursor,
        })
    }

    /// Deletes those of `ids` that are `user_id`'s stored notifications (others' and unknown ids
    /// are ignored, as in Nakama).
    pub async fn delete(&self, user_id: Uuid, ids: &[String]) -> Result<(), NotificationError> {
        if ids.len() > MAX_DELETE_IDS {
            return Err(NotificationError::Invalid(format!(
                "At most {MAX_DELETE_IDS} notification IDs at once."
            )));
        }
        let ids = ids
            .iter()
            .map(|id| {
                Uuid::parse_str(id).map_err(|_| {
                    NotificationError::Invalid(format!("Invalid notification ID '{id}'."))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !ids.is_empty() {
            self.store.delete_notifications(user_id, ids).await?;
        }
        Ok(())
    }

    /// The stored notifications of `ids` (only `user_id`'s, when given), in the order asked;
    /// unknown ids are left out. At most [`MAX_DELETE_IDS`] ids.
    pub async fn get_by_id(
        &self,
        ids: &[String],
        user_id: Option<Uuid>,
    ) -> Result<Vec<NotificationRecord>, NotificationError> {
        let ids = parse_ids(ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = self.store.notifications_by_id(ids.clone(), user_id).await?;
        found.sort_by_key(|record| ids.iter().position(|id| *id == record.id));
        Ok(found)
    }

    /// Deletes the stored notifications of `ids` (only `user_id`'s, when given); unknown ids
    /// are ignored. At most [`MAX_DELETE_IDS`] ids.
    pub async fn delete_by_id(
        &self,
        ids: &[String],
        user_id: Option<Uuid>,
    ) -> Result<(), NotificationError> {
        let ids = parse_ids(ids)?;
        if ids.is_empty() {
            return Ok(());
        }
        match user_id {
            Some(user) => self.store.delete_notifications(user, ids).await?,
            None => self.store.delete_notifications_by_id(ids).await?,
        };
        Ok(())
    }

    /// Changes the subject, content or sender of stored notifications (all or none; each id
    /// once, at most [`MAX_DELETE_IDS`]); unknown ids are ignored, as in Nakama. Nothing is
    /// delivered again.
    pub async fn update(&self, updates: Vec<NotificationUpdate>) -> Result<(), NotificationError> {
        if updates.len() > MAX_DELETE_IDS {
            return Err(NotificationError::Invalid(format!(
                "At most {MAX_DELETE_IDS} notification updates at once."
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(updates.len());
        for update in &updates {
            if !seen.insert(update.id) {
                return Err(NotificationError::Invalid(format!(
                    "Notification ID '{}' is updated twice.",
                    update.id
                )));
            }
            if let Some(subject) = &update.subject {
                check_subject(subject)?;
            }
            if let Some(content) = &update.content {
                check_content(content)?;
            }
        }
        if !updates.is_empty() {
            self.store.update_notifications(updates).await?;
        }
        Ok(())
    }
}

/// Notification ids as given, at most [`MAX_DELETE_IDS`]; the first that is not a UUID
/// refuses them all.
fn parse_ids(ids: &[String]) -> Result<Vec<Uuid>, NotificationError> {
    if ids.len() > MAX_DELETE_IDS {
        return Err(NotificationError::Invalid(format!(
            "At most {MAX_DELETE_IDS} notification IDs at once."
        )));
    }
    let mut parsed = Vec::with_capacity(ids.len());
    for id in ids {
        let id = Uuid::parse_str(id)
            .map_err(|_| NotificationError::Invalid(format!("Invalid notification ID '{id}'.")))?;
        if !parsed.contains(&id) {
            parsed.push(id);
        }
    }
    Ok(parsed)
}

fn check_subject(subject: &str) -> Result<(), NotificationError> {
    if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
        return Err(NotificationError::Invalid(format!(
            "Notification subject must be 1-{MAX_SUBJECT_BYTES} bytes."
        )));
    }
    Ok(())
}

fn check_content(content: &str) -> Result<(), NotificationError> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(NotificationError::Invalid(format!(
            "Notification content must be at most {MAX_CONTENT_BYTES} bytes."
        )));
    }
    match serde_json::from_str::<serde_json::Value>(content) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(NotificationError::Invalid(
            "Notification content must be a JSON object.".into(),
        )),
    }
}

fn validate(notification: &NewNotification) -> Result<(), NotificationError> {
    check_subject(&notification.subject)?;
    check_content(&notification.content)
}

fn to_wire(record: NotificationRecord, persistent: bool) -> Notification {
    Notification {
        id: record.id.to_string(),
        subject: record.subject,
        content: record.content,
        code: record.code,
        sender_id: record
            .sender_id
            .map(|id| id.to_string())
            .unwrap_or_default(),
        create_time: Some(Timestamp::from_unix_ms(record.create_time_ms)),
        persistent,
    }
}
