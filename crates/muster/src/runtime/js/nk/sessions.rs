//! Sessions from server code: `sessionDisconnect(sessionId, reason?)` closes a socket of this
//! node (as Nakama's, whose session registry is the node's); `sessionLogout(userId, token?,
//! refreshToken?)` ends a session's tokens, as the player's own logout does.

use muster_js::JsError;
use serde_json::Value;
use uuid::Uuid;

use super::context::{invalid, refused, Args, ServerHost};

pub(super) const NAMES: &[&str] = &["sessionDisconnect", "sessionLogout"];

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    match name {
        "sessionDisconnect" => {
            let id = args.string(0, "sessionId")?;
            let id = Uuid::parse_str(&id).map_err(|_| invalid("expects a valid session id"))?;
            let session = host
                .services
                .registry
                .session(id)
                .ok_or_else(|| JsError::new("session not found on this node", 5))?;
            session.outbox.kick();
            Ok(Value::Null)
        }
        "sessionLogout" => {
            let user = args.user(0, "userId")?;
            let token = args.opt_string(1).unwrap_or_default();
            let refresh = args.opt_string(2).unwrap_or_default();
            let tokens = &host.services.tokens;
            // The pair the call names: by its session token, else by its refresh token.
            let claims = if !token.is_empty() {
                tokens.verify_session(&token).ok()
            } else if !refresh.is_empty() {
                tokens.verify_refresh(&refresh).ok()
            } else {
                return Err(invalid(
                    "expects a token or a refresh token: Muster keeps no list of a user's sessions",
                ));
            };
            // A token that no longer holds has nothing left to end.
            let Some(claims) = claims else {
                return Ok(Value::Null);
            };
            if claims.uid != user {
                return Err(invalid("the token is not the user's"));
            }
            host.wait(host.services.accounts.logout(&claims, &token, &refresh))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}
