//! Account rules: who may authenticate and how, what makes a valid identifier, username or
//! profile, and how a session is issued, refreshed and ended. HTTP handlers call in here; this
//! module calls the store and never sees HTTP.

pub mod config;
pub(crate) mod postgres;
pub mod providers;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod bans;
pub(crate) mod cluster;
pub(crate) mod lifecycle;
pub mod password;
mod social;
pub mod tokens;

use std::collections::HashMap;
use std::sync::Arc;

use muster_proto::api::{Account, AccountDevice, Session, UpdateAccountRequest};
use rand::Rng;
use uuid::Uuid;

use crate::accounts::password::Hasher;
use crate::accounts::store::{AccountStore, AccountUpdate, Credential, Identity, NewUser};
use crate::accounts::tokens::{Claims, TokenService};
use crate::base::metrics::Metrics;
use crate::economy::store::StartingGrant;
use crate::store::StoreError;

const MAX_VARS: usize = 32;
const MAX_VAR_KEY_BYTES: usize = 64;
const MAX_VAR_VALUE_BYTES: usize = 256;
const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Why an account request failed. Messages are shown to the client; the HTTP edge maps each
/// kind to its status and Nakama code.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The request is malformed: a missing or oversized field, a bad username or email.
    #[error("{0}")]
    Invalid(String),
    /// Wrong credentials, or a bad or expired token.
    #[error("{0}")]
    Unauthenticated(String),
    #[error("User account banned.")]
    Banned,
    #[error("{0}")]
    NotFound(String),
    /// A credential another account has.
    #[error("{0}")]
    AlreadyExists(String),
    /// Not allowed, e.g. unlinking the last credential.
    #[error("{0}")]
    PermissionDenied(String),
    /// The store refused or failed (a taken username, a closed database).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A provider's settings are missing ("Apple authentication is not configured.").
    #[error("{0}")]
    NotConfigured(String),
    /// A provider's signed data could not be read or checked (Nakama's answer to a bad
    /// Facebook Instant Games sign-in).
    #[error("{0}")]
    DataLoss(String),
    /// Something on the server failed; the cause is logged, not shown.
    #[error("internal server error")]
    Internal,
}

/// How a caller proves who they are, as received.
pub enum Login {
    Device(String),
    Custom(String),
    Email {
        email: String,
        password: String,
    },
    /// A proof checked by an identity provider (Apple, Google, Facebook, Steam, Game Center).
    Social(providers::ProviderProof),
}

impl Login {
    fn method(&self) -> &'static str {
        match self {
            Login::Device(_) => "device",
            Login::Custom(_) => "custom",
            Login::Email { .. } => "email",
            Login::Social(proof) => match proof.provider() {
                providers::Provider::Apple => "apple",
                providers::Provider::Google => "google",
                providers::Provider::Facebook => "facebook",
                providers::Provider::FacebookInstantGame => "facebookinstantgame",
                providers::Provider::Steam => "steam",
                providers::Provider::GameCenter => "gamecenter",
            },
        }
    }
}

/// Who signed in, with their new session.
pub struct SignedIn {
    pub session: Session,
    pub user_id: Uuid,
    pub username: String,
    /// What the identity provider told, for a sign-in with one.
    pub profile: Option<providers::ProviderProfile>,
}

pub struct Accounts {
    store: Arc<dyn AccountStore>,
    tokens: Arc<TokenService>,
    hasher: Hasher,
    metrics: Arc<Metrics>,
    /// The identity providers' checks.
    providers: Arc<providers::Providers>,
    /// Given to every new account in the transaction creating it (the after-authenticate hook).
    starting_grant: Option<Arc<StartingGrant>>,
    /// Told of every ban and unban made here (the app ends the banned players' sockets, on
    /// every node).
    ban_observer: std::sync::OnceLock<Arc<dyn bans::BanObserver>>,
}

/// Most accounts one ban or unban names.
pub const MAX_BAN_IDS: usize = 1000;

impl Accounts {
    pub fn new(
        store: Arc<dyn AccountStore>,
        tokens: Arc<TokenService>,
        hasher: Hasher,
        metrics: Arc<Metrics>,
    ) -> Self {
        Accounts {
            store,
            tokens,
            hasher,
            metrics,
            providers: providers::Providers::new(providers::SocialConfig::default()),
            starting_grant: None,
            ban_observer: std::sync::OnceLock::new(),
        }
    }

    /// Checks identity providers' proofs with `providers`.
    pub fn with_providers(mut self, providers: Arc<providers::Providers>) -> Self {
        self.providers = providers;
        self
    }

    /// The identity providers' checks (friends' lists for imports).
    pub fn providers(&self) -> &Arc<providers::Providers> {
        &self.providers
    }

    /// Gives every account created from now on `grant` (see `crate::economy::grant`).
    pub fn with_starting_grant(mut self, grant: Option<StartingGrant>) -> Self {
        self.starting_grant = grant.map(Arc::new);
        self
    }

    /// Authenticates `login`, creating the account on first use when `create` is set.
    pub async fn authenticate(
        &self,
        login: Login,
        create: bool,
        username: Option<String>,
        vars: HashMap<String, String>,
    ) -> Result<Session, AccountError> {
        self.sign_in(login, create, username, vars)
            .await
            .map(|signed_in| signed_in.session)
    }

    /// Authenticates `login` as [`Accounts::authenticate`] does, answering who signed in too
    /// (friends' imports need the account and the id at the provider).
    pub async fn sign_in(
        &self,
        login: Login,
        create: bool,
        username: Option<String>,
        vars: HashMap<String, String>,
    ) -> Result<SignedIn, AccountError> {
        let method = login.method();
        let result = self.authenticate_inner(login, create, username, vars).await;
        let outcome = match &result {
            Ok(signed_in) if signed_in.session.created => "created",
            Ok(_) => "ok",
            Err(_) => "refused",
        };
        self.metrics
            .authentications
            .with_label_values(&[method, outcome])
            .inc();
        if outcome == "created" {
            self.metrics.accounts_created.inc();
        }
        result
    }

    async fn authenticate_inner(
        &self,
        login: Login,
        create: bool,
        username: Option<String>,
        vars: HashMap<String, String>,
    ) -> Result<SignedIn, AccountError> {
        validate_vars(&vars)?;
        if let Some(name) = &username {
            validate_username(name)?;
        }
        let mut profile = None;
        let (identity, created) = match login {
            Login::Device(id) => {
                validate_id(&id, 10, "Device ID")?;
                self.find_or_create(
                    Credential::Device(id),
                    create,
                    username,
                    None,
                    "Device ID not found.",
                )
                .await?
            }
            Login::Custom(id) => {
                validate_id(&id, 6, "Custom ID")?;
                self.find_or_create(
                    Credential::Custom(id),
                    create,
                    username,
                    None,
                    "Custom ID not found.",
                )
                .await?
            }
            Login::Email { email, password } => {
                self.email(email, password, create, username).await?
            }
            Login::Social(proof) => {
                let (identity, created, found) =
                    self.social_identity(proof, create, username).await?;
                profile = Some(found);
                (identity, created)
            }
        };
        if identity.disabled {
            return Err(AccountError::Banned);
        }
        let pair = self
            .tokens
            .issue(identity.user_id, &identity.username, vars);
        Ok(SignedIn {
            session: Session {
                token: pair.token,
                refresh_token: pair.refresh_token,
                created,
            },
            user_id: identity.user_id,
            username: identity.username,
            profile,
        })
    }

    async fn find_or_create(
        &self,
        credential: Credential,
        create: bool,
        username: Option<String>,
        password_hash: Option<String>,
        not_found: &str,
    ) -> Result<(Identity, bool), AccountError> {
        if !create {
            return match self.store.find_identity(&credential).await? {
                Some(identity) => Ok((identity, false)),
                None => Err(AccountError::NotFound(not_found.into())),
            };
        }
        // A generated username may, rarely, clash: draw another. A chosen one that clashes is
        // the caller's to change.
        let chosen = username.is_some();
        let mut attempts = 0;
        loop {
            let new_user = NewUser {
                id: Uuid::new_v4(),
                username: username.clone().unwrap_or_else(generate_username),
                password_hash: password_hash.clone(),
                now_ms: crate::base::clock::now_ms(),
                grant: self.starting_grant.clone(),
            };
            match self.store.find_or_create(&credential, new_user).await {
                Err(StoreError::UsernameTaken) if !chosen && attempts < 5 => attempts += 1,
                other => return Ok(other?),
            }
        }
    }

    async fn email(
        &self,
        email: String,
        password: String,
        create: bool,
        username: Option<String>,
    ) -> Result<(Identity, bool), AccountError> {
        let email = validate_email(&email)?;
        validate_password(&password)?;
        let credential = Credential::Email(email);
        let invalid = || AccountError::Unauthenticated("Invalid credentials.".into());
        let existing = self.store.find_identity(&credential).await?;
        match existing {
            Some(identity) => {
                let hash = identity.password_hash.clone();
                if self.hasher.verify(password, hash).await {
                    Ok((identity, false))
                } else {
                    Err(invalid())
                }
            }
            None if !create => {
                // Same work and same answer as a wrong password: no hint the email is unknown.
                self.hasher.verify(password, None).await;
                Err(invalid())
            }
            None => {
                let hash = self.hasher.hash(password.clone()).await.map_err(|e| {
                    tracing::error!("{e:#}");
                    AccountError::Internal
                })?;
                let (identity, created) = self
                    .find_or_create(credential, true, username, Some(hash), "")
                    .await?;
                // Lost a race with another creation of this email: check against its password.
                if !created
                    && !self
                        .hasher
                        .verify(password, identity.password_hash.clone())
                        .await
                {
                    return Err(invalid());
                }
                Ok((identity, created))
            }
        }
    }

    /// A new token pair for a valid refresh token. The old session token works on until it
    /// expires (as in Nakama); the refresh token works once unless
    /// `session.refresh_token_single_use` is off: of concurrent refreshes with it, on any nodes,
    /// one succeeds.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        vars: HashMap<String, String>,
    ) -> Result<Session, AccountError> {
        if refresh_token.is_empty() {
            return Err(AccountError::Invalid("Refresh token is required.".into()));
        }
        validate_vars(&vars)?;
        let claims = self.tokens.verify_refresh(refresh_token).map_err(|e| {
            AccountError::Unauthenticated(e.to_string().replace("Auth token", "Refresh token"))
        })?;
        let identity = self.store.account(claims.uid).await?;
        let Some(account) = identity else {
            return Err(AccountError::NotFound("Account not found.".into()));
        };
        if account.disable_time_ms.is_some() {
            return Err(AccountError::Banned);
        }
        if !self.tokens.consume_refresh(&claims).await? {
            return Err(AccountError::Unauthenticated(
                "Refresh token revoked".into(),
            ));
        }
        let vars = if vars.is_empty() { claims.vrs } else { vars };
        let pair = self.tokens.issue(claims.uid, &account.username, vars);
        Ok(Session {
            token: pair.token,
            refresh_token: pair.refresh_token,
            created: false,
        })
    }

    /// Revokes the caller's session and any of its tokens named in the request.
    pub async fn logout(
        &self,
        caller: &Claims,
        token: &str,
        refresh_token: &str,
    ) -> Result<(), AccountError> {
        let mut pairs = vec![(caller.tid, caller.iat)];
        for (text, verify) in [
            (
                token,
                TokenService::verify_session as fn(&TokenService, &str) -> _,
            ),
            (refresh_token, TokenService::verify_refresh),
        ] {
            if text.is_empty() {
                continue;
            }
            // Tokens of other users are not the caller's to revoke; bad ones are ignored.
            if let Ok(claims) = verify(&self.tokens, text) {
                if claims.uid == caller.uid {
                    pairs.push((claims.tid, claims.iat));
                }
            }
        }
        self.tokens.revoke(&pairs).await?;
        Ok(())
    }

    /// The caller's account as `GET /v2/account` shows it.
    pub async fn account(&self, user_id: Uuid, online: bool) -> Result<Account, AccountError> {
        let mut record = self
            .store
            .account(user_id)
            .await?
            .ok_or_else(|| AccountError::NotFound("Account not found.".into()))?;
        let wallet = crate::economy::wallet_json(&record.wallet);
        let email = record.email.clone().unwrap_or_default();
        let devices = std::mem::take(&mut record.devices);
        let custom_id = record.custom_id.clone().unwrap_or_default();
        let disable_time = record.disable_time_ms.map(crate::base::clock::rfc3339);
        Ok(Account {
            user: lifecycle::public_user(record, online),
            wallet,
            email,
            devices: devices
                .into_iter()
                .map(|id| AccountDevice {
                    id,
                    ..AccountDevice::default()
                })
                .collect(),
            custom_id,
            disable_time,
        })
    }

    /// Sets an account's metadata (a JSON object): server code only — players cannot, since
    /// games keep roles and entitlements there.
    pub async fn set_metadata(&self, user_id: Uuid, metadata: &str) -> Result<(), AccountError> {
        validate_metadata(metadata)?;
        let update = AccountUpdate {
            metadata: Some(metadata.to_owned()),
            ..AccountUpdate::default()
        };
        self.store
            .update_account(user_id, update, crate::base::clock::now_ms())
            .await?;
        Ok(())
    }

    /// Bans the accounts of `user_ids` (as Nakama's `usersBanId`): they cannot authenticate or
    /// refresh, every token of theirs is refused at once, and every socket of theirs ends, on
    /// every node. Answers the ids that exist (the others are ignored). Server code only.
    pub async fn ban(&self, user_ids: &[Uuid]) -> Result<Vec<Uuid>, AccountError> {
        self.set_banned(user_ids, true).await
    }

    /// Lifts the ban of `user_ids` (as Nakama's `usersUnbanId`): they may authenticate again,
    /// and their tokens that have not expired work again (Nakama's stay refused).
    pub async fn unban(&self, user_ids: &[Uuid]) -> Result<Vec<Uuid>, AccountError> {
        self.set_banned(user_ids, false).await
    }

    async fn set_banned(&self, user_ids: &[Uuid], banned: bool) -> Result<Vec<Uuid>, AccountError> {
        if user_ids.len() > MAX_BAN_IDS {
            return Err(AccountError::Invalid(format!(
                "At most {MAX_BAN_IDS} user IDs at once."
            )));
        }
        let when = banned.then(crate::base::clock::now_ms);
        let found = self.store.set_disabled(user_ids.to_vec(), when).await?;
        self.tokens.set_banned(&found, banned);
        if let Some(observer) = self.ban_observer.get() {
            observer.changed(&found, banned);
        }
        Ok(found)
    }

    /// Ends every socket of `users` on every node, without a ban: they may connect again with
    /// their tokens (an operator's "end sessions"; a ban keeps them out).
    pub fn end_sessions(&self, users: &[Uuid]) {
        if let Some(observer) = self.ban_observer.get() {
            observer.end_sessions(users);
        }
    }

    /// Sets who is told of bans made here (once; later calls are ignored).
    pub fn observe_bans(&self, observer: Arc<dyn bans::BanObserver>) {
        let _ = self.ban_observer.set(observer);
    }

    /// Reads the banned accounts from the store into the token checks (at start, and
    /// periodically, in case another node's message was lost).
    pub async fn reload_bans(&self) -> Result<(), AccountError> {
        // Deleted accounts too, while a token of theirs may be alive.
        let since = crate::base::clock::now_ms() - self.tokens.longest_lifetime_secs() * 1000;
        let banned = self.store.disabled_users(since).await?;
        self.tokens.replace_banned(&banned);
        Ok(())
    }

    /// Applies a player's profile change after checking every field.
    pub async fn update(
        &self,
        user_id: Uuid,
        request: UpdateAccountRequest,
    ) -> Result<(), AccountError> {
        let update = validate_update(request)?;
        if update.is_empty() {
            return Ok(());
        }
        self.store
            .update_account(user_id, update, crate::base::clock::now_ms())
            .await?;
        Ok(())
    }
}

/// Ten random lowercase letters, as Nakama generates.
fn generate_username() -> String {
    let mut rng = rand::rng();
    (0..10)
        .map(|_| rng.random_range(b'a'..=b'z') as char)
        .collect()
}

fn has_forbidden_chars(text: &str) -> bool {
    text.chars().any(|c| c.is_control() || c.is_whitespace())
}

fn validate_id(id: &str, min: usize, what: &str) -> Result<(), AccountError> {
    if id.is_empty() {
        return Err(AccountError::Invalid(format!("{what} is required.")));
    }
    if id.len() < min || id.len() > 128 || has_forbidden_chars(id) {
        return Err(AccountError::Invalid(format!(
            "{what} invalid, must be {min}-128 bytes with no spaces or control characters."
        )));
    }
    Ok(())
}

pub fn validate_username(username: &str) -> Result<(), AccountError> {
    if username.is_empty() || username.len() > 128 {
        return Err(AccountError::Invalid(
            "Username invalid, must be 1-128 bytes.".into(),
        ));
    }
    if has_forbidden_chars(username) {
        return Err(AccountError::Invalid(
            "Username invalid, no spaces or control characters allowed.".into(),
        ));
    }
    Ok(())
}

/// Lower-cased email if valid.
fn validate_email(email: &str) -> Result<String, AccountError> {
    if email.is_empty() {
        return Err(AccountError::Invalid("Email address is required.".into()));
    }
    let valid_shape = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && !domain.contains('@')
            && domain.split('.').filter(|p| !p.is_empty()).count() >= 2
    });
    if email.len() < 10 || email.len() > 255 || has_forbidden_chars(email) || !valid_shape {
        return Err(AccountError::Invalid(
            "Invalid email address, must be 10-255 bytes and look like name@example.com.".into(),
        ));
    }
    Ok(email.to_lowercase())
}

fn validate_password(password: &str) -> Result<(), AccountError> {
    if password.chars().count() < 8 {
        return Err(AccountError::Invalid(
            "Password must be at least 8 characters long.".into(),
        ));
    }
    if password.len() > 1024 {
        return Err(AccountError::Invalid(
            "Password must be at most 1024 bytes long.".into(),
        ));
    }
    Ok(())
}

fn validate_vars(vars: &HashMap<String, String>) -> Result<(), AccountError> {
    if vars.len() > MAX_VARS
        || vars.iter().any(|(k, v)| {
            k.is_empty() || k.len() > MAX_VAR_KEY_BYTES || v.len() > MAX_VAR_VALUE_BYTES
        })
    {
        return Err(AccountError::Invalid(format!(
            "Session vars invalid: at most {MAX_VARS} entries, keys 1-{MAX_VAR_KEY_BYTES} bytes, values at most {MAX_VAR_VALUE_BYTES} bytes."
        )));
    }
    Ok(())
}

fn validate_update(request: UpdateAccountRequest) -> Result<AccountUpdate, AccountError> {
    if let Some(username) = &request.username {
        validate_username(username)?;
    }
    let limit = |value: &Option<String>, max: usize, what: &str| match value {
        Some(v) if v.len() > max => Err(AccountError::Invalid(format!(
            "{what} must be at most {max} bytes."
        ))),
        _ => Ok(()),
    };
    limit(&request.display_name, 255, "Display name")?;
    limit(&request.avatar_url, 512, "Avatar URL")?;
    limit(&request.lang_tag, 18, "Lang tag")?;
    limit(&request.location, 255, "Location")?;
    limit(&request.timezone, 255, "Timezone")?;
    Ok(AccountUpdate {
        username: request.username,
        display_name: request.display_name,
        avatar_url: request.avatar_url,
        lang_tag: request.lang_tag,
        location: request.location,
        timezone: request.timezone,
        metadata: None,
    })
}

/// Checks an account's metadata as server code sets it: a JSON object of bounded size.
fn validate_metadata(metadata: &str) -> Result<(), AccountError> {
    if metadata.len() > MAX_METADATA_BYTES {
        return Err(AccountError::Invalid(format!(
            "Metadata must be at most {MAX_METADATA_BYTES} bytes."
        )));
    }
    let is_object =
        serde_json::from_str::<serde_json::Value>(metadata).is_ok_and(|v| v.is_object());
    if !is_object {
        return Err(AccountError::Invalid(
            "Metadata must be a JSON object.".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_usernames() {
        assert!(validate_id("0123456789", 10, "Device ID").is_ok());
        assert!(validate_id("short", 10, "Device ID").is_err());
        assert!(validate_id(&"x".repeat(129), 10, "Device ID").is_err());
        assert!(validate_id("has a space", 6, "Custom ID").is_err());
        assert!(validate_username("alice").is_ok());
        assert!(validate_username("al ice").is_err());
        assert!(validate_username("").is_err());
        assert_eq!(generate_username().len(), 10);
    }

    #[test]
    fn emails_and_passwords() {
        assert_eq!(
            validate_email("Alice@Example.com").expect("valid"),
            "alice@example.com"
        );
        for bad in [
            "",
            "a@b.c",
            "no-at-sign.example.com",
            "two@@example.com",
            "x@localhost12",
        ] {
            assert!(validate_email(bad).is_err(), "{bad}");
        }
        assert!(validate_password("1234567").is_err());
        assert!(validate_password("12345678").is_ok());
    }

    #[test]
    fn profile_updates() {
        let good = UpdateAccountRequest {
            display_name: Some("Al".into()),
            ..Default::default()
        };
        assert!(!validate_update(good).expect("valid").is_empty());
        // A player's request cannot carry metadata: the field is not there to deserialize.
        let sneaky: UpdateAccountRequest =
            serde_json::from_str(r#"{"metadata":"{\"role\":\"admin\"}"}"#).expect("parses");
        assert!(validate_update(sneaky).expect("valid").is_empty());
        assert!(validate_metadata("[1]").is_err());
        assert!(
            validate_metadata(&format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_METADATA_BYTES)))
                .is_err()
        );
        assert!(validate_metadata(r#"{"level":3}"#).is_ok());
    }
}
