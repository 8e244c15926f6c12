//! Sign-in, link and unlink with an identity provider, and friends imported from Facebook and
//! Steam: `POST /v2/account/authenticate/{apple,google,facebook,facebookinstantgame,steam,
//! gamecenter}` (the server key, `?create=&username=`, and `?sync=` for Facebook and Steam),
//! `POST /v2/account/link/…` and `/unlink/…` (a session), `POST /v2/friend/{facebook,steam}`
//! (`?reset=`). The proof is checked by [`crate::accounts::providers`], the account changed by
//! [`crate::accounts::Accounts`].

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use muster_proto::api::{AccountFacebookInstantGame, AccountGameCenter, AccountToken, Session};
use serde::Deserialize;
use uuid::Uuid;

use super::auth::{Player, ServerKey};
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery, AuthRateLimit};
use super::response::{done, Answer, Done};
use crate::accounts::providers::{Provider, ProviderProof};
use crate::accounts::Login;
use crate::friends::ImportError;
use crate::net::state::AppState;
use crate::services::Services;

/// A provider's body as Nakama's routes take it: the proof and the session's variables.
pub trait SocialBody: serde::de::DeserializeOwned + Send {
    fn proof(self) -> (ProviderProof, HashMap<String, String>);
}

macro_rules! token_body {
    ($($(#[$doc:meta])* $name:ident => $variant:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Deserialize)]
        #[serde(transparent)]
        pub struct $name(AccountToken);

        impl SocialBody for $name {
            fn proof(self) -> (ProviderProof, HashMap<String, String>) {
                (ProviderProof::$variant { token: self.0.token }, self.0.vars)
            }
        }
    )*};
}

token_body! {
    /// `AccountApple`: Sign in with Apple's identity token.
    Apple => Apple;
    /// `AccountGoogle`: a Google ID token.
    Google => Google;
    /// `AccountFacebook`: a Facebook access token or Limited Login token.
    Facebook => Facebook;
    /// `AccountSteam`: a Steam session ticket.
    Steam => Steam;
}

impl SocialBody for AccountFacebookInstantGame {
    fn proof(self) -> (ProviderProof, HashMap<String, String>) {
        let proof = ProviderProof::FacebookInstantGame {
            signed_player_info: self.signed_player_info,
        };
        (proof, self.vars)
    }
}

impl SocialBody for AccountGameCenter {
    fn proof(self) -> (ProviderProof, HashMap<String, String>) {
        let proof = ProviderProof::GameCenter {
            player_id: self.player_id,
            bundle_id: self.bundle_id,
            timestamp_seconds: self.timestamp_seconds,
            salt: self.salt,
            signature: self.signature,
            public_key_url: self.public_key_url,
        };
        (proof, self.vars)
    }
}

/// `?create=&username=&sync=` of a provider's sign-in; `create` defaults to true, as in Nakama.
#[derive(Deserialize)]
pub struct SignInQuery {
    create: Option<bool>,
    username: Option<String>,
    sync: Option<bool>,
}

/// `POST /v2/account/authenticate/{provider}`. With `?sync=true` (Facebook and Steam) the
/// player's friends there who play are made their friends here; a failed import is logged and
/// the sign-in stands, as in Nakama.
pub async fn authenticate<B: SocialBody>(
    _: AuthRateLimit,
    _: ServerKey,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<SignInQuery>,
    ApiJson(body): ApiJson<B>,
) -> Answer<Session> {
    let (proof, vars) = body.proof();
    let token = proof.friends_token();
    let username = query.username.filter(|u| !u.is_empty());
    let services = &state.services;
    let signed_in = services
        .accounts
        .sign_in(
            Login::Social(proof),
            query.create.unwrap_or(true),
            username,
            vars,
        )
        .await?;
    if query.sync == Some(true) {
        if let (Some(profile), Some(token)) = (&signed_in.profile, token) {
            let (user, name) = (signed_in.user_id, signed_in.username.clone());
            sync_friends(services, user, &name, token, &profile.id).await;
        }
    }
    Ok(Json(signed_in.session))
}

/// Imports friends after a sign-in or link with `sync`: failures are logged, not answered, as
/// in Nakama.
async fn sync_friends(
    services: &Arc<Services>,
    user: Uuid,
    username: &str,
    token: (Provider, String),
    provider_id: &str,
) {
    let provider = token.0;
    let imported = services
        .friends
        .import_from_provider(user, username, token, provider_id, false);
    if let Err(error) = imported.await {
        tracing::warn!(%error, provider = provider.name(), "could not import friends");
    }
}

impl From<ImportError> for ApiError {
    fn from(error: ImportError) -> Self {
        match error {
            ImportError::Refused(_) => ApiError::Unauthenticated(error.to_string()),
            ImportError::NoFriendsList => ApiError::InvalidArgument(error.to_string()),
            ImportError::Accounts(error) => error.into(),
            ImportError::Friends(error) => error.into(),
        }
    }
}

/// `POST /v2/account/link/{provider}` for the bodies that are the whole request.
pub async fn link<B: SocialBody>(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<B>,
) -> Done {
    let (proof, _) = body.proof();
    services.accounts.link_social(caller.uid, proof).await?;
    done()
}

/// `?sync=` of `POST /v2/account/link/facebook`.
#[derive(Deserialize)]
pub struct SyncQuery {
    sync: Option<bool>,
}

/// `POST /v2/account/link/facebook?sync=`: the body is the `account`.
pub async fn link_facebook(
    Player(caller, services, _): Player,
    ApiQuery(query): ApiQuery<SyncQuery>,
    ApiJson(body): ApiJson<Facebook>,
) -> Done {
    let (proof, _) = body.proof();
    let token = proof.friends_token();
    let profile = services.accounts.link_social(caller.uid, proof).await?;
    if let (Some(true), Some(token)) = (query.sync, token) {
        sync_friends(&services, caller.uid, &caller.usn, token, &profile.id).await;
    }
    done()
}

/// `LinkSteamRequest`: `{"account": {...}, "sync": bool}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct LinkSteamRequest {
    account: AccountToken,
    sync: Option<bool>,
}

/// `POST /v2/account/link/steam`.
pub async fn link_steam(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<LinkSteamRequest>,
) -> Done {
    let (proof, _) = Steam(body.account).proof();
    let token = proof.friends_token();
    let profile = services.accounts.link_social(caller.uid, proof).await?;
    if let (Some(true), Some(token)) = (body.sync, token) {
        sync_friends(&services, caller.uid, &caller.usn, token, &profile.id).await;
    }
    done()
}

/// `POST /v2/account/unlink/{provider}`: the proof is checked, as in Nakama.
pub async fn unlink<B: SocialBody>(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<B>,
) -> Done {
    let (proof, _) = body.proof();
    services.accounts.unlink_social(caller.uid, proof).await?;
    done()
}

/// `?reset=` of the friends' imports: drop the player's other friends first.
#[derive(Deserialize)]
pub struct ResetQuery {
    reset: Option<bool>,
}

/// `POST /v2/friend/{facebook,steam}?reset=`: the body is the `account` with its token.
pub async fn import_friends<B: SocialBody>(
    Player(caller, services, _): Player,
    ApiQuery(query): ApiQuery<ResetQuery>,
    ApiJson(body): ApiJson<B>,
) -> Done {
    let (proof, _) = body.proof();
    let Some((provider, token)) = proof.friends_token() else {
        return Err(ApiError::InvalidArgument(
            "Friends are imported from Facebook and Steam only.".into(),
        ));
    };
    if token.is_empty() {
        return Err(ApiError::InvalidArgument(format!(
            "{} access token is required.",
            provider.name()
        )));
    }
    let profile = services.accounts.verify_proof(&proof, false).await?;
    let reset = query.reset.unwrap_or(false);
    services
        .friends
        .import_from_provider(
            caller.uid,
            &caller.usn,
            (provider, token),
            &profile.id,
            reset,
        )
        .await?;
    done()
}
