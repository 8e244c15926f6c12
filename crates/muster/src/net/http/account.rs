//! The caller's own account — `GET`, `PUT` and `DELETE /v2/account`, credentials linked and
//! unlinked (`POST /v2/account/link/{device,custom,email}`, `/unlink/…`) — and other players'
//! public view of accounts, `GET /v2/user?ids=&usernames=&facebook_ids=` (repeatable, as Nakama's gateway reads
//! a repeated field).

use axum::extract::RawQuery;
use axum::Json;
use muster_proto::api::{
    Account, AccountCustom, AccountDevice, AccountEmail, UpdateAccountRequest, Users,
};

use uuid::Uuid;

use super::auth::Player;
use super::extract::{ApiJson, AuthRateLimit, UserRefs};
use super::response::{done, Answer, Done};
use crate::accounts::Login;

pub async fn get(Player(caller, services, _): Player) -> Answer<Account> {
    let online = services.router.is_online(caller.uid);
    Ok(Json(services.accounts.account(caller.uid, online).await?))
}

pub async fn update(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<UpdateAccountRequest>,
) -> Done {
    services.accounts.update(caller.uid, body).await?;
    done()
}

/// Deletes the account and what it owns; its ranks leave every leaderboard on every node.
pub async fn delete(Player(caller, services, _): Player) -> Done {
    services.accounts.delete(caller.uid).await?;
    services.leaderboards.forget_owner(caller.uid).await;
    done()
}

pub async fn users(Player(_, services, _): Player, RawQuery(raw): RawQuery) -> Answer<Users> {
    let mut refs = UserRefs::from_query(raw.as_deref());
    let facebook_ids = super::extract::repeated(raw.as_deref(), "facebook_ids");
    if !facebook_ids.is_empty() {
        // As many as the other lists may name; Nakama's bound for each is 100.
        if facebook_ids.len() > 100 {
            return Err(super::error::ApiError::InvalidArgument(
                "At most 100 Facebook IDs at once.".into(),
            ));
        }
        let provider = crate::accounts::providers::Provider::Facebook;
        let found = services
            .accounts
            .ids_by_social(provider, facebook_ids)
            .await?;
        refs.ids.extend(found.iter().map(Uuid::to_string));
    }
    let router = services.router.clone();
    let users = services
        .accounts
        .users(&refs.ids, refs.usernames, |id| router.is_online(id))
        .await?;
    Ok(Json(Users { users }))
}

/// A credential a player links to their account, or unlinks.
pub trait Credential: serde::de::DeserializeOwned + Send {
    fn login(self) -> Login;
}

impl Credential for AccountDevice {
    fn login(self) -> Login {
        Login::Device(self.id)
    }
}

impl Credential for AccountCustom {
    fn login(self) -> Login {
        Login::Custom(self.id)
    }
}

impl Credential for AccountEmail {
    fn login(self) -> Login {
        Login::Email {
            email: self.email,
            password: self.password,
        }
    }
}

/// `POST /v2/account/link/{device,custom}`.
pub async fn link<C: Credential>(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<C>,
) -> Done {
    services.accounts.link(caller.uid, body.login()).await?;
    done()
}

/// `POST /v2/account/link/email`, rate-limited like authentication: hashing the password is
/// slow on purpose.
pub async fn link_email(_: AuthRateLimit, player: Player, body: ApiJson<AccountEmail>) -> Done {
    link(player, body).await
}

/// `POST /v2/account/unlink/{device,custom,email}`.
pub async fn unlink<C: Credential>(
    Player(caller, services, _): Player,
    ApiJson(body): ApiJson<C>,
) -> Done {
    services.accounts.unlink(caller.uid, body.login()).await?;
    done()
}
