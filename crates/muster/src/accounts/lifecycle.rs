//! An account after it is created, as Nakama runs it: credentials linked and unlinked (never the
//! last one), other players' public view of accounts (`GET /v2/user`), and deletion.

use muster_proto::api::User;
use uuid::Uuid;

use super::{validate_email, validate_id, validate_password, AccountError, Accounts, Login};
use crate::accounts::store::{AccountRecord, Credential};
use crate::store::StoreError;

/// Most ids and usernames one `GET /v2/user` names, together.
pub const MAX_USERS_PER_REQUEST: usize = 1000;

pub(super) const LAST_CREDENTIAL: &str =
    "Cannot unlink last account identifier. Check profile exists and is not last link.";

/// The public view of an account (no credentials, no wallet).
pub fn public_user(record: AccountRecord, online: bool) -> User {
    User {
        id: record.id.to_string(),
        username: record.username,
        display_name: record.display_name,
        avatar_url: record.avatar_url,
        lang_tag: record.lang_tag,
        location: record.location,
        timezone: record.timezone,
        metadata: record.metadata,
        online,
        create_time: crate::base::clock::rfc3339(record.create_time_ms),
        update_time: crate::base::clock::rfc3339(record.update_time_ms),
        facebook_id: record.social.facebook_id.unwrap_or_default(),
        google_id: record.social.google_id.unwrap_or_default(),
        gamecenter_id: record.social.gamecenter_id.unwrap_or_default(),
        steam_id: record.social.steam_id.unwrap_or_default(),
        facebook_instant_game_id: record.social.facebook_instant_game_id.unwrap_or_default(),
        apple_id: record.social.apple_id.unwrap_or_default(),
    }
}

/// Most accounts one `usersGetRandom` reads (Nakama's bound).
pub const MAX_RANDOM_USERS: usize = 1_000;

impl Accounts {
    /// Links a device, custom id or email (with its password) to the caller's account; one that
    /// another account has is refused (`AlreadyExists`, Nakama's messages).
    pub async fn link(&self, user_id: Uuid, login: Login) -> Result<(), AccountError> {
        let (credential, password_hash, taken) = match login {
            Login::Social(proof) => return self.link_social(user_id, proof).await.map(drop),
            Login::Device(id) => {
                validate_id(&id, 10, "Device ID")?;
                (Credential::Device(id), None, "Device ID already in use.")
            }
            Login::Custom(id) => {
                validate_id(&id, 6, "Custom ID")?;
                (Credential::Custom(id), None, "Custom ID is already in use.")
            }
            Login::Email { email, password } => {
                let email = validate_email(&email)?;
                validate_password(&password)?;
                let hash = self.hasher.hash(password).await.map_err(|e| {
                    tracing::error!("{e:#}");
                    AccountError::Internal
                })?;
                (
                    Credential::Email(email),
                    Some(hash),
                    "Email is already in use.",
                )
            }
        };
        let now = crate::base::clock::now_ms();
        match self
            .store
            .link(user_id, credential, password_hash, now)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::CredentialTaken) => Err(AccountError::AlreadyExists(taken.into())),
            Err(StoreError::NotFound) => Err(AccountError::NotFound("Account not found.".into())),
            Err(other) => Err(other.into()),
        }
    }

    /// Unlinks a device (its id required), custom id or email (an empty value: whichever the
    /// account has) from the caller's account; refused when it is not linked to it or is the
    /// account's last credential (`PermissionDenied`, as Nakama).
    pub async fn unlink(&self, user_id: Uuid, login: Login) -> Result<(), AccountError> {
        let credential = match login {
            Login::Social(proof) => return self.unlink_social(user_id, proof).await,
            Login::Device(id) if id.is_empty() => {
                return Err(AccountError::Invalid(
                    "A device ID must be supplied.".into(),
                ))
            }
            Login::Device(id) => Credential::Device(id),
            Login::Custom(id) => Credential::Custom(id),
            Login::Email { email, .. } => Credential::Email(email.to_lowercase()),
        };
        let now = crate::base::clock::now_ms();
        if self.store.unlink(user_id, credential, now).await? {
            Ok(())
        } else {
            Err(AccountError::PermissionDenied(LAST_CREDENTIAL.into()))
        }
    }

    /// The ids of the accounts `ids` and `usernames` name, each once; those that do not exist
    /// are left out.
    pub async fn existing(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<Uuid>, StoreError> {
        if ids.is_empty() && usernames.is_empty() {
            return Ok(Vec::new());
        }
        let records = self.store.users(ids, usernames).await?;
        Ok(records.into_iter().map(|record| record.id).collect())
    }

    /// The accounts of `ids` as other players see them, by id; those that do not exist are left
    /// out. `online` says whether a user has a session anywhere.
    pub async fn public_users(
        &self,
        ids: Vec<Uuid>,
        online: impl Fn(Uuid) -> bool,
    ) -> Result<std::collections::HashMap<Uuid, User>, StoreError> {
        if ids.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        let records = self.store.users(ids, Vec::new()).await?;
        Ok(records
            .into_iter()
            .map(|record| {
                let id = record.id;
                (id, public_user(record, online(id)))
            })
            .collect())
    }

    /// The accounts of `ids` and `usernames` as other players see them, each once; those that
    /// do not exist are left out. `online` says whether a user has a session anywhere.
    pub async fn users(
        &self,
        ids: &[String],
        usernames: Vec<String>,
        online: impl Fn(Uuid) -> bool,
    ) -> Result<Vec<User>, AccountError> {
        if ids.len() + usernames.len() > MAX_USERS_PER_REQUEST {
            return Err(AccountError::Invalid(format!(
                "At most {MAX_USERS_PER_REQUEST} user IDs and usernames at once."
            )));
        }
        let ids = ids
            .iter()
            .map(|id| {
                Uuid::parse_str(id).map_err(|_| {
                    AccountError::Invalid(format!("ID '{id}' is not a valid system ID."))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() && usernames.is_empty() {
            return Ok(Vec::new());
        }
        let records = self.store.users(ids, usernames).await?;
        Ok(records
            .into_iter()
            .map(|record| {
                let online = online(record.id);
                public_user(record, online)
            })
            .collect())
    }

    /// Up to `count` (at most 1,000) accounts from a random place in the table, as
    /// other players see them (Nakama's `usersGetRandom`).
    pub async fn random_users(
        &self,
        count: usize,
        online: impl Fn(Uuid) -> bool,
    ) -> Result<Vec<User>, AccountError> {
        if count > MAX_RANDOM_USERS {
            return Err(AccountError::Invalid(format!(
                "count must be 0 to {MAX_RANDOM_USERS}"
            )));
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let records = self.store.random_users(Uuid::new_v4(), count).await?;
        Ok(records
            .into_iter()
            .map(|record| {
                let online = online(record.id);
                public_user(record, online)
            })
            .collect())
    }

    /// Deletes the caller's account and what it owns (devices, wallet, inventory and ledger,
    /// storage objects, leaderboard records): its tokens are refused and its sockets end at
    /// once on every node, as for a ban, and stay refused until they would have expired.
    /// `NotFound` when it is already gone.
    pub async fn delete(&self, user_id: Uuid) -> Result<(), AccountError> {
        let now = crate::base::clock::now_ms();
        if !self.store.delete_account(user_id, now).await? {
            return Err(AccountError::NotFound("Account not found.".into()));
        }
        self.tokens.set_banned(&[user_id], true);
        if let Some(observer) = self.ban_observer.get() {
            observer.changed(&[user_id], true);
        }
        Ok(())
    }
}
