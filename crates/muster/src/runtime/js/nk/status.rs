//! Status follows on a session's behalf: `statusFollow(sessionId, userIds)` and
//! `statusUnfollow(sessionId, userIds)`, as Nakama's runtime has them. The session must be open
//! on this node (a module runs on the node that holds the socket it is called about, e.g. in a
//! realtime hook); one elsewhere, or closed already, is refused with "session not found" (5).

use muster_js::JsError;
use serde_json::Value;
use uuid::Uuid;

use super::context::{invalid, Args, ServerHost};
use crate::status::StatusError;

pub(super) const NAMES: &[&str] = &["statusFollow", "statusUnfollow"];

/// Most user ids one call names (the service then holds a session to
/// `status.max_follows_per_session`).
const MAX_USER_IDS: usize = 1000;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let session_id = args
        .get(0)
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| invalid("expects a valid session id"))?;
    let user_ids = args.strings(1, "userIds")?;
    if user_ids.len() > MAX_USER_IDS {
        return Err(invalid(format!("At most {MAX_USER_IDS} user ids at once.")));
    }
    if let Some(bad) = user_ids.iter().find(|id| Uuid::parse_str(id).is_err()) {
        return Err(invalid(format!("expects a valid user id: {bad:?}")));
    }
    if user_ids.is_empty() {
        return Ok(Value::Null);
    }
    let session = host
        .services
        .registry
        .session(session_id)
        .ok_or_else(|| JsError::new("session not found (not on this node, or closed)", 5))?;
    let status = &host.services.status;
    let done = match name {
        "statusFollow" => host.wait(status.follow_users(&session, user_ids))?,
        "statusUnfollow" => status.unfollow_users(&session, user_ids),
        _ => return Err(JsError::new(format!("nk.{name} is not available"), 12)),
    };
    done.map_err(status_refused)?;
    Ok(Value::Null)
}

fn status_refused(error: StatusError) -> JsError {
    let code = match &error {
        StatusError::Invalid(_) => 3,
        StatusError::TooMany(_) => 8,
        StatusError::Store(crate::store::StoreError::Unavailable(_)) => 14,
        StatusError::Store(_) => 13,
    };
    JsError::new(error.to_string(), code)
}
