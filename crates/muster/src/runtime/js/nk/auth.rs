//! Sign-in from server code: `authenticateDevice`, `authenticateCustom`, `authenticateEmail`
//! (`{userId, username, created}`), `authenticateTokenGenerate` (`{token, exp}`), and
//! `linkDevice`/`linkCustom`/`linkEmail`, `unlinkDevice`/`unlinkCustom`/`unlinkEmail`, and the
//! same with the identity providers (Apple, Facebook, Facebook Instant Games, Game Center,
//! Google, Steam), their proofs checked as the REST routes check them.

use std::collections::HashMap;

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, refused, Args, ServerHost};
use crate::accounts::providers::ProviderProof;
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
        _ => social(host, name, args),
    }
}

/// A provider's proof from the arguments at `at` on (Nakama's order for each provider), and
/// the index of the first argument after it. `optional`: an absent token is an empty one (the
/// unlink calls, which then unlink whatever id the account has there).
fn proof(
    name: &str,
    args: &Args,
    at: usize,
    optional: bool,
) -> Result<(ProviderProof, usize), JsError> {
    let text = |i: usize, what: &str| -> Result<String, JsError> {
        match args.opt_string(i) {
            Some(value) => Ok(value),
            None if optional => Ok(String::new()),
            None => args.string(i, what),
        }
    };
    let provider = name
        .trim_start_matches("authenticate")
        .trim_start_matches("unlink")
        .trim_start_matches("link");
    Ok(match provider {
        "Apple" => (
            ProviderProof::Apple {
                token: text(at, "token")?,
            },
            at + 1,
        ),
        "Google" => (
            ProviderProof::Google {
                token: text(at, "token")?,
            },
            at + 1,
        ),
        "Facebook" => (
            ProviderProof::Facebook {
                token: text(at, "token")?,
            },
            at + 1,
        ),
        "Steam" => (
            ProviderProof::Steam {
                token: text(at, "token")?,
            },
            at + 1,
        ),
        "FacebookInstantGame" => (
            ProviderProof::FacebookInstantGame {
                signed_player_info: text(at, "signedPlayerInfo")?,
            },
            at + 1,
        ),
        "GameCenter" => (
            ProviderProof::GameCenter {
                player_id: text(at, "playerId")?,
                bundle_id: text(at + 1, "bundleId")?,
                timestamp_seconds: match args.int(at + 2, "ts")? {
                    Some(ts) => ts,
                    None if optional => 0,
                    None => return Err(invalid("ts must be a number")),
                },
                salt: text(at + 3, "salt")?,
                signature: text(at + 4, "signature")?,
                public_key_url: text(at + 5, "publicKeyURL")?,
            },
            at + 6,
        ),
        _ => return Err(JsError::new(format!("nk.{name} is not a function"), 12)),
    })
}

/// The providers' sign-in, link and unlink, with Nakama's argument orders:
/// `authenticateApple(token, username?, create?)`, `authenticateFacebook(token,
/// importFriends?, username?, create?)`, `authenticateGameCenter(playerId, bundleId, ts, salt,
/// signature, publicKeyURL, username?, create?)`, `linkApple(userId, token)`,
/// `linkFacebook(userId, username, token, importFriends?)`, `linkSteam(userId, username, token,
/// importFriends)`, `unlinkApple(userId, token?)`, and the same for the others.
fn social(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let accounts = &host.services.accounts;
    if name.starts_with("authenticate") {
        let (proof, mut rest) = proof(name, args, 0, false)?;
        let import = if name == "authenticateFacebook" {
            rest += 1;
            args.bool(1).unwrap_or(true)
        } else {
            false
        };
        let username = args.opt_string(rest).filter(|u| !u.is_empty());
        let create = args.bool(rest + 1).unwrap_or(true);
        let token = proof.friends_token();
        let signed_in = host
            .wait(accounts.sign_in(Login::Social(proof), create, username, HashMap::new()))?
            .map_err(refused)?;
        if let (true, Some(token), Some(profile)) = (import, token, &signed_in.profile) {
            let friends = &host.services.friends;
            let (user, name) = (signed_in.user_id, signed_in.username.as_str());
            host.wait(friends.import_from_provider(user, name, token, &profile.id, false))?
                .map_err(refused)?;
        }
        return Ok(json!({
            "userId": signed_in.user_id.to_string(),
            "username": signed_in.username,
            "created": signed_in.session.created,
        }));
    }
    let user = args.user(0, "userId")?;
    if name.starts_with("unlink") {
        let (proof, _) = proof(name, args, 1, true)?;
        host.wait(accounts.unlink_social(user, proof))?
            .map_err(refused)?;
        return Ok(Value::Null);
    }
    // linkFacebook and linkSteam take the username before the token, and importFriends after.
    let with_username = matches!(name, "linkFacebook" | "linkSteam");
    let username = if with_username {
        args.string(1, "username")?
    } else {
        String::new()
    };
    let (proof, rest) = proof(name, args, if with_username { 2 } else { 1 }, false)?;
    let import = with_username && args.bool(rest).unwrap_or(name == "linkFacebook");
    let token = proof.friends_token();
    let profile = host
        .wait(accounts.link_social(user, proof))?
        .map_err(refused)?;
    if let (true, Some(token)) = (import, token) {
        let friends = &host.services.friends;
        host.wait(friends.import_from_provider(user, &username, token, &profile.id, false))?
            .map_err(refused)?;
    }
    Ok(Value::Null)
}
