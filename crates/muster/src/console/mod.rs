//! The operator's console, without its pages (those are `crate::net::console`): who may use it
//! (`users`: users with roles, passwords hashed slowly), their logins ([`Console::login`]:
//! sessions with expiry and a CSRF token, kept in the database so that every node honours them),
//! the audit log of every change made through it ([`Console::audit`]), and the status history
//! ([`history`]: the node's metrics sampled each second, kept for an hour at 1 s and a week at
//! 1 min).

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub mod history;
pub(crate) mod nodes;
pub(crate) mod users;

use std::net::IpAddr;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::accounts::password::Hasher;
use crate::base::clock::Clock;
use crate::base::ratelimit::{IpLimit, KeyedLimit};
use crate::console::config::is_console_username;
use crate::console::config::ConsoleConfig;
use crate::console::store::{AuditRow, ConsoleSessionRow, ConsoleStore, ConsoleUserRow};
use crate::store::StoreError;
pub use users::Role;

/// Most audit entries one page of the log holds.
pub const MAX_AUDIT_PAGE: usize = 100;
/// Most accounts one page of a search holds.
pub const MAX_ACCOUNT_PAGE: usize = 50;

/// Why the console refused.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("Invalid username or password.")]
    BadLogin,
    #[error("Too many login attempts; try again in a minute.")]
    TooManyLogins,
    #[error("Not logged in, or the session has expired.")]
    NoSession,
    #[error("This needs the {0} role.")]
    Forbidden(&'static str),
    #[error("Missing or wrong CSRF token.")]
    Csrf,
    #[error("{0}")]
    Invalid(String),
    #[error("A console user with this name exists.")]
    UsernameTaken,
    #[error("No such console user.")]
    NotFound,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for ConsoleError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::UsernameTaken => ConsoleError::UsernameTaken,
            StoreError::NotFound => ConsoleError::NotFound,
            other => ConsoleError::Store(other),
        }
    }
}

/// A logged-in console user, as a request carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub username: String,
    pub role: Role,
    /// The token a change must carry in `X-CSRF-Token`.
    pub csrf: String,
    pub expire_time_ms: i64,
    /// SHA-256 of the session's token (what a logout deletes).
    token_hash: String,
}

impl Operator {
    /// Refuses unless this operator's role is at least `needed`.
    pub fn require(&self, needed: Role) -> Result<(), ConsoleError> {
        if self.role.allows(needed) {
            Ok(())
        } else {
            Err(ConsoleError::Forbidden(needed.name()))
        }
    }

    /// Refuses unless `presented` is this session's CSRF token (compared in constant time).
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), ConsoleError> {
        match presented {
            Some(token) if bool::from(token.as_bytes().ct_eq(self.csrf.as_bytes())) => Ok(()),
            _ => Err(ConsoleError::Csrf),
        }
    }
}

/// A new login: the cookie's token (given to the browser once, never stored) and the operator.
pub struct Login {
    pub token: String,
    pub operator: Operator,
}

pub struct Console {
    store: Arc<dyn ConsoleStore>,
    hasher: Hasher,
    clock: Clock,
    session_expiry_ms: i64,
    logins_per_ip: IpLimit,
    logins_per_user: KeyedLimit<String>,
    max_sessions_per_user: u32,
    pub history: Arc<history::History>,
    /// The other nodes, in a cluster.
    pub cluster: Option<nodes::ClusterStatus>,
}

impl Console {
    pub fn new(
        config: &ConsoleConfig,
        store: Arc<dyn ConsoleStore>,
        hasher: Hasher,
        clock: Clock,
        history: Arc<history::History>,
    ) -> Console {
        Console {
            store,
            hasher,
            clock,
            session_expiry_ms: (config.session_expiry_sec as i64).saturating_mul(1000),
            logins_per_ip: IpLimit::per_minute(config.logins_per_ip_per_min),
            logins_per_user: KeyedLimit::per_minute(config.logins_per_user_per_min),
            max_sessions_per_user: config.max_sessions_per_user,
            history,
            cluster: None,
        }
    }

    /// In a cluster: asks and answers other nodes over `bus`, knowing them through `nodes`
    /// (which the cluster's membership must tell).
    pub fn in_cluster(
        mut self,
        bus: crate::cluster::bus::Bus,
        nodes: Arc<nodes::Nodes>,
    ) -> Console {
        self.cluster = Some(nodes::ClusterStatus { bus, nodes });
        self
    }

    /// Every node's status window (this one first), each `{node, window}` or `{node, error}`.
    pub async fn cluster_status(
        &self,
        this_node: &str,
        query: history::WindowQuery,
    ) -> Vec<serde_json::Value> {
        let local = serde_json::json!({
            "node": this_node,
            "window": self.history.window_with(query),
        });
        let Some(cluster) = &self.cluster else {
            return vec![local];
        };
        let asks = cluster.nodes.peers().into_iter().map(|node| async move {
            match cluster.ask(&node, query).await {
                Ok(window) => serde_json::json!({"node": node, "window": window}),
                Err(e) => serde_json::json!({"node": node, "error": e.to_string()}),
            }
        });
        let mut all = vec![local];
        all.extend(futures_util::future::join_all(asks).await);
        all
    }

    /// Makes the configured admin, or gives them the configured password and the admin role
    /// again (the configuration is the truth for that one user).
    pub async fn ensure_admin(&self, config: &ConsoleConfig) -> anyhow::Result<()> {
        let existing = self.store.console_user(&config.admin_username).await?;
        if let Some(user) = &existing {
            let same = self
                .hasher
                .verify(
                    config.admin_password.clone(),
                    Some(user.password_hash.clone()),
                )
                .await;
            if same && user.role == Role::Admin.name() {
                return Ok(());
            }
        }
        let password_hash = self.hasher.hash(config.admin_password.clone()).await?;
        self.store
            .put_console_user(ConsoleUserRow {
                username: config.admin_username.clone(),
                password_hash,
                role: Role::Admin.name().into(),
                create_time_ms: existing.map_or(self.clock.now_ms(), |u| u.create_time_ms),
            })
            .await?;
        Ok(())
    }

    /// Checks a username and password (counted against the IP's and the username's login
    /// limits) and starts a session.
    pub async fn login(
        &self,
        ip: IpAddr,
        username: &str,
        password: &str,
    ) -> Result<Login, ConsoleError> {
        if !self.logins_per_ip.allow(ip) || !self.logins_per_user.allow(username.to_owned()) {
            return Err(ConsoleError::TooManyLogins);
        }
        let user = if is_console_username(username) && password.len() <= users::MAX_PASSWORD {
            self.store.console_user(username).await?
        } else {
            None
        };
        // An unknown user costs the same time as a wrong password.
        let hash = user.as_ref().map(|u| u.password_hash.clone());
        if !self.hasher.verify(password.to_owned(), hash).await {
            return Err(ConsoleError::BadLogin);
        }
        let user = user.ok_or(ConsoleError::BadLogin)?;
        let role = Role::parse(&user.role).ok_or(ConsoleError::BadLogin)?;
        let token = random_token();
        let now = self.clock.now_ms();
        let row = ConsoleSessionRow {
            token_hash: token_hash(&token),
            username: user.username.clone(),
            csrf: random_token(),
            create_time_ms: now,
            expire_time_ms: now.saturating_add(self.session_expiry_ms),
        };
        self.store
            .create_console_session(row.clone(), self.max_sessions_per_user)
            .await?;
        Ok(Login {
            token,
            operator: Operator {
                username: row.username,
                role,
                csrf: row.csrf,
                expire_time_ms: row.expire_time_ms,
                token_hash: row.token_hash,
            },
        })
    }

    /// The operator whose cookie carries `token`, if the session is live and the user still
    /// exists (with their role now).
    pub async fn operator(&self, token: &str) -> Result<Operator, ConsoleError> {
        if token.is_empty() || token.len() > 128 {
            return Err(ConsoleError::NoSession);
        }
        let (row, role) = self
            .store
            .console_session(&token_hash(token), self.clock.now_ms())
            .await?
            .ok_or(ConsoleError::NoSession)?;
        let role = Role::parse(&role).ok_or(ConsoleError::NoSession)?;
        Ok(Operator {
            username: row.username,
            role,
            csrf: row.csrf,
            expire_time_ms: row.expire_time_ms,
            token_hash: row.token_hash,
        })
    }

    /// Ends the operator's session.
    pub async fn logout(&self, operator: &Operator) -> Result<(), ConsoleError> {
        self.store
            .delete_console_session(&operator.token_hash)
            .await?;
        Ok(())
    }

    /// Records a change `operator` made: `action` on `target`, with `detail` (JSON).
    pub async fn audit(
        &self,
        operator: &Operator,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) -> Result<i64, ConsoleError> {
        let id = self
            .store
            .append_audit(AuditRow {
                id: 0,
                time_ms: self.clock.now_ms(),
                username: operator.username.clone(),
                action: action.into(),
                target: target.into(),
                detail: detail.to_string(),
            })
            .await?;
        Ok(id)
    }

    /// A page of the audit log, newest first, before `before_id` when it is set.
    pub async fn audit_log(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, ConsoleError> {
        Ok(self
            .store
            .audit_entries(before_id, limit.clamp(1, MAX_AUDIT_PAGE))
            .await?)
    }

    /// Accounts matching an operator's search (see [`ConsoleStore::search_accounts`]), at most
    /// [`MAX_ACCOUNT_PAGE`].
    pub async fn search_accounts(
        &self,
        text: &str,
        after: Option<String>,
    ) -> Result<Vec<crate::accounts::store::AccountRecord>, ConsoleError> {
        if text.len() > 256 {
            return Err(ConsoleError::Invalid(
                "A search is at most 256 bytes.".into(),
            ));
        }
        Ok(self
            .store
            .search_accounts(text.trim(), after, MAX_ACCOUNT_PAGE)
            .await?)
    }

    /// Every console user.
    pub async fn users(&self) -> Result<Vec<ConsoleUserRow>, ConsoleError> {
        Ok(self.store.console_users().await?)
    }

    /// Adds a console user (an admin's change; audited by the caller).
    pub async fn add_user(
        &self,
        username: &str,
        password: &str,
        role: Role,
    ) -> Result<(), ConsoleError> {
        users::check_new(username, password)?;
        let password_hash = self
            .hasher
            .hash(password.to_owned())
            .await
            .map_err(|e| ConsoleError::Store(StoreError::Database(e.to_string())))?;
        self.store
            .create_console_user(ConsoleUserRow {
                username: username.into(),
                password_hash,
                role: role.name().into(),
                create_time_ms: self.clock.now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Deletes a console user and ends their sessions. The configured admin cannot be deleted
    /// (the next start would make them again).
    pub async fn delete_user(
        &self,
        config: &ConsoleConfig,
        username: &str,
    ) -> Result<(), ConsoleError> {
        if username == config.admin_username {
            return Err(ConsoleError::Invalid(
                "The configured admin cannot be deleted; change console.admin_username.".into(),
            ));
        }
        self.store.delete_console_user(username).await?;
        Ok(())
    }

    /// Forgets login-limit keys whose buckets are full again.
    pub fn prune_limits(&self) {
        self.logins_per_ip.prune();
        self.logins_per_user.prune();
    }
}

/// 32 random bytes, base64url.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
