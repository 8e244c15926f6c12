//! Sign-in from server code: `authenticateDevice`, `authenticateCustom`, `authenticateEmail`
//! (`{userId, username, created}`), `authenticateTokenGenerate` (`{token, exp}`), and
//! `linkDevice`/`linkCustom`/`linkEmail`, `unlinkDevice`/`unlinkCustom`/`unlinkEmail`. The
//! stores' and social providers' identities (Apple, Facebook, Game Center, Google, Steam) are
//! refused by name: Muster does not verify them.

use std::collections::HashMap;

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, refused, Args, ServerHost};
use crate::accounts::tokens::Claims;
use crate::accounts::Login;

pub(super) const NAMES: &[&str] = &[
    "authenticateDevice",
    "authenticateCustom",
    "authenticateEmail",
    "authenticateTokenGenerate",
    "linkDevice",
    "linkCustom",
    "linkEmail",
    "unlinkDevice",
    "unlinkCustom",
    "unlinkEmail",
    "authenticateApple",
    "authenticateFacebook",
    "authenticateFacebookInstantGame",
    "authenticateGameCenter",
    "authenticateGoogle",
    "authenticateSteam",
    "linkApple",
    "linkFacebook",
    "linkFacebookInstantGame",
    "linkGameCenter",
    "linkGoogle",
    "linkSteam",
    "unlinkApple",
    "unlinkFacebook",
    "unlinkFacebookInstantGame",
    "unlinkGameCenter",
    "unlinkGoogle",
    "unlinkSteam",
];

/// Most session variables one generated token may carry.
const MAX_VARS: usize = 32;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let accounts = &host.services.accounts;
    match name {
        // authenticateDevice(id, username?, create = true), authenticateCustom(...),
        // authenticateEmail(email, password, username?, create = true)
        "authenticateDevice" | "authenticateCustom" | "authenticateEmail" => {
            let (login, rest) = match name {
                "authenticateDevice" => (Login::Device(args.string(0, "id")?), 1),
                "authenticateCustom" => (Login::Custom(args.string(0, "id")?), 1),
                _ => (
                    Login::Email {
                        email: args.string(0, "email")?,
                        password: args.string(1, "password")?,
                    },
                    2,
                ),
            };
            let username = args.opt_string(rest);
            let create = args.bool(rest + 1).unwrap_or(true);
            let session = host
                .wait(accounts.authenticate(login, create, username, HashMap::new()))?
                .map_err(refused)?;
            let claims = host
                .services
                .tokens
                .verify_session(&session.token)
                .map_err(|e| JsError::new(format!("the new session: {e}"), 13))?;
            Ok(json!({
                "userId": claims.uid.to_string(),
                "username": claims.usn,
                "created": session.created,
            }))
        }
        // authenticateTokenGenerate(userId, username?, exp?, vars?)
        "authenticateTokenGenerate" => {
            let user = args.user(0, "userId")?;
            let username = match args.opt_string(1) {
                Some(name) => name,
                None => {
                    host.wait(accounts.account(user, false))?
                        .map_err(refused)?
                        .user
                        .username
                }
            };
            let now = host.services.clock.now_secs();
            let exp = match args.int(2, "exp")? {
                Some(exp) if exp > 0 => exp,
                _ => now + host.services.config.session.token_expiry_sec as i64,
            };
            if exp <= now {
                return Err(invalid("exp must be in the future"));
            }
            let vars: HashMap<String, String> = match args.get(3) {
                Value::Null => HashMap::new(),
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| {
                        v.as_str()
                            .map(|s| (k.clone(), s.to_owned()))
                            .ok_or_else(|| invalid("vars must be an object of strings"))
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(invalid("vars must be an object of strings")),
            };
            if vars.len() > MAX_VARS {
                return Err(invalid(format!("at most {MAX_VARS} vars")));
            }
            let claims = Claims {
                tid: uuid::Uuid::new_v4(),
                uid: user,
                usn: username,
                vrs: vars,
                exp,
                iat: now,
            };
            let token = host.services.tokens.sign_session_claims(&claims);
            Ok(json!({ "token": token, "exp": exp }))
        }
        // linkDevice(userId, id), linkCustom(userId, id), linkEmail(userId, email, password)
        "linkDevice" | "linkCustom" | "linkEmail" => {
            let user = args.user(0, "userId")?;
            let login = match name {
                "linkDevice" => Login::Device(args.string(1, "deviceId")?),
                "linkCustom" => Login::Custom(args.string(1, "customId")?),
                _ => Login::Email {
                    email: args.string(1, "email")?,
                    password: args.string(2, "password")?,
                },
            };
            host.wait(accounts.link(user, login))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // unlinkDevice(userId, id), unlinkCustom(userId, id?), unlinkEmail(userId, email?)
        "unlinkDevice" | "unlinkCustom" | "unlinkEmail" => {
            let user = args.user(0, "userId")?;
            let value = args.opt_string(1).unwrap_or_default();
            let login = match name {
                "unlinkDevice" => Login::Device(value),
                "unlinkCustom" => Login::Custom(value),
                _ => Login::Email {
                    email: value,
                    password: String::new(),
                },
            };
            host.wait(accounts.unlink(user, login))?.map_err(refused)?;
            Ok(Value::Null)
        }
        _ => Err(JsError::new(
            format!(
                "nk.{name} is not supported by Muster: it does not verify {} identities",
                provider(name)
            ),
            12,
        )),
    }
}

fn provider(name: &str) -> &'static str {
    let name = name
        .trim_start_matches("authenticate")
        .trim_start_matches("unlink")
        .trim_start_matches("link");
    match name {
        "Apple" => "Apple",
        "Facebook" => "Facebook",
        "FacebookInstantGame" => "Facebook Instant Games",
        "GameCenter" => "Game Center",
        "Google" => "Google",
        "Steam" => "Steam",
        _ => "such",
    }
}
