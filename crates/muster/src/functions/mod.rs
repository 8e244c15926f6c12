//! Server functions: named RPCs that clients call over HTTP (`POST /v2/rpc/{id}`) or the
//! realtime socket (an `rpc` envelope), and servers call with the HTTP key.
//!
//! A game adds its own by implementing [`ServerFunction`] and registering it in a [`Functions`]
//! given to [`crate::app::run_with`]. A function receives the caller (absent for HTTP-key
//! calls), the payload (a string, JSON by convention) and the [`Economy`]; it answers a string
//! payload, or an [`RpcError`] carrying a gRPC code that each transport maps to its own error
//! (an HTTP status with Nakama's error body, or a socket `error` envelope).
//!
//! ```
//! use muster::economy::Change;
//! use muster::functions::{Call, Functions, RpcError, ServerFunction};
//! use serde::Deserialize;
//!
//! /// `buy_sword`: 250 coins for a sword, atomically.
//! struct BuySword;
//!
//! #[derive(Deserialize)]
//! struct Order { order_id: String }
//!
//! #[async_trait::async_trait]
//! impl ServerFunction for BuySword {
//!     async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
//!         let order: Order = call.json()?;
//!         let user = call.user(None)?;
//!         let change = Change::new(user, "buy_sword")
//!             .spend("coins", 250)
//!             .grant_item("sword", "weapon", 1, None)
//!             .idempotency_key(&order.order_id);
//!         let receipt = call.economy.apply(change).await?;
//!         Ok(serde_json::json!({ "coins": receipt.wallet["coins"] }).to_string())
//!     }
//! }
//!
//! let mut functions = Functions::new();
//! functions.register("buy_sword", BuySword).expect("a valid id");
//! ```

pub(crate) mod builtins;
pub(crate) mod world;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::accounts::{AccountError, Accounts};
use crate::economy::{Economy, EconomyError};
use crate::friends::{FriendError, Friends};
use crate::groups::{GroupError, Groups};
use crate::leaderboards::{LeaderboardError, Leaderboards};
use crate::notifications::{NotificationError, Notifications};
use crate::services::Services;
use crate::storage::{Storage, StorageError};

pub use crate::base::rpc::{RpcCode, RpcError};

/// The user calling a function, from their session token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: Uuid,
    pub username: String,
}

/// Where a call came from, beyond its caller (what Nakama's runtime gives a module's `ctx`).
#[derive(Debug, Clone, Default)]
pub struct RequestContext {
    /// The socket's session id, or the HTTP call's token id.
    pub session_id: Option<Uuid>,
    /// The client's address as the server sees it (after trusted proxies).
    pub client_ip: String,
    /// The session's variables (from its token).
    pub vars: HashMap<String, String>,
    /// An HTTP call's query parameters.
    pub query_params: HashMap<String, Vec<String>>,
    /// An HTTP call's headers, credentials left out.
    pub headers: HashMap<String, Vec<String>>,
    /// When the caller's session expires, Unix seconds (0: not known).
    pub session_expires: i64,
}

/// What a function is called with.
pub struct Call<'a> {
    /// The function's id, as registered (lower case).
    pub id: &'a str,
    /// The user calling, or `None` for a server-to-server call with the HTTP key.
    pub caller: Option<&'a Caller>,
    /// The payload as sent (JSON by convention; empty when none was sent).
    pub payload: &'a str,
    /// Where the call came from, when the transport tells.
    pub request: Option<&'a RequestContext>,
    pub economy: &'a Economy,
    /// Accounts, as the server: ban and unban players, set their metadata.
    pub accounts: &'a Accounts,
    /// Storage objects, as the server: any owner's, system objects, every permission.
    pub storage: &'a Storage,
    /// Leaderboards: create them, and write any owner's records (authoritative ones too).
    pub leaderboards: &'a Leaderboards,
    /// Notifications: send them to any users, stored or not (docs/social.md).
    pub notifications: &'a Notifications,
    /// Friends: add, delete, block and list on any user's behalf (docs/social.md).
    pub friends: &'a Friends,
    /// Groups: create them for a user, and change any group as the server (`Actor::Server`:
    /// a superadmin's rights), metadata and `max_count` included (docs/social.md).
    pub groups: &'a Groups,
    /// Streams of the game's own (docs/runtime.md, "Streams"): place this node's sessions on
    /// them and send them data.
    pub streams: &'a crate::streams::Streams,
}

impl Call<'_> {
    /// Parses the payload as JSON into `T`; an empty payload reads as `{}`. A payload that does
    /// not parse is a clear `InvalidArgument` naming the problem.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        let text = if self.payload.trim().is_empty() {
            "{}"
        } else {
            self.payload
        };
        serde_json::from_str(text).map_err(|e| RpcError::invalid(format!("Bad payload: {e}.")))
    }

    /// The account a call acts on. A user's call acts on their own account and may not name
    /// another; a server-to-server call (HTTP key) must name one (`requested`, a user id).
    pub fn user(&self, requested: Option<&str>) -> Result<Uuid, RpcError> {
        match (self.caller, requested) {
            (Some(caller), None) => Ok(caller.user_id),
            (Some(_), Some(_)) => Err(RpcError::invalid(
                "user_id is accepted only from server-to-server calls (HTTP key).",
            )),
            (None, Some(text)) => Uuid::parse_str(text)
                .map_err(|_| RpcError::invalid(format!("user_id {text:?} is not a valid id."))),
            (None, None) => Err(RpcError::invalid(
                "user_id is required in calls made with the HTTP key.",
            )),
        }
    }
}

/// A server function. Implementations must not panic on any payload: every problem is an
/// [`RpcError`] with a message for the caller.
#[async_trait::async_trait]
pub trait ServerFunction: Send + Sync + 'static {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError>;
}

impl From<AccountError> for RpcError {
    fn from(error: AccountError) -> Self {
        let code = match &error {
            AccountError::Invalid(_) => RpcCode::InvalidArgument,
            AccountError::NotFound(_) => RpcCode::NotFound,
            AccountError::NotConfigured(_) => RpcCode::FailedPrecondition,
            AccountError::DataLoss(_) => RpcCode::InvalidArgument,
            AccountError::AlreadyExists(_) => RpcCode::AlreadyExists,
            AccountError::Unauthenticated(_)
            | AccountError::Banned
            | AccountError::PermissionDenied(_) => RpcCode::PermissionDenied,
            AccountError::Store(crate::store::StoreError::Unavailable(_)) => RpcCode::Unavailable,
            AccountError::Store(_) | AccountError::Internal => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

impl From<NotificationError> for RpcError {
    fn from(error: NotificationError) -> Self {
        match error {
            NotificationError::Invalid(message) => RpcError::invalid(message),
            NotificationError::UserNotFound => RpcError::new(RpcCode::NotFound, error.to_string()),
            NotificationError::Store(crate::store::StoreError::Unavailable(_)) => {
                RpcError::new(RpcCode::Unavailable, "The database is unavailable.")
            }
            NotificationError::Store(_) => RpcError::internal(),
        }
    }
}

impl From<crate::friends::ImportError> for RpcError {
    fn from(error: crate::friends::ImportError) -> Self {
        use crate::friends::ImportError;
        match error {
            ImportError::Refused(_) => RpcError::new(RpcCode::PermissionDenied, error.to_string()),
            ImportError::NoFriendsList => RpcError::invalid(error.to_string()),
            ImportError::Accounts(error) => error.into(),
            ImportError::Friends(error) => error.into(),
        }
    }
}

impl From<FriendError> for RpcError {
    fn from(error: FriendError) -> Self {
        let code = match &error {
            FriendError::Invalid(_) => RpcCode::InvalidArgument,
            FriendError::TooMany(_) | FriendError::TooFast => RpcCode::ResourceExhausted,
            FriendError::Store(crate::store::StoreError::Unavailable(_)) => RpcCode::Unavailable,
            FriendError::Store(_) => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

impl From<GroupError> for RpcError {
    fn from(error: GroupError) -> Self {
        use crate::groups::store::GroupRefusal;
        use crate::store::StoreError;
        let code = match &error {
            GroupError::Invalid(_) => RpcCode::InvalidArgument,
            GroupError::NotFound(_) => RpcCode::NotFound,
            GroupError::TooFast => RpcCode::ResourceExhausted,
            GroupError::Refused(refusal) => match refusal {
                GroupRefusal::NotFound | GroupRefusal::PermissionDenied => RpcCode::NotFound,
                GroupRefusal::Full | GroupRefusal::LastSuperadmin | GroupRefusal::UserNotFound => {
                    RpcCode::InvalidArgument
                }
                GroupRefusal::NameInUse => RpcCode::AlreadyExists,
                GroupRefusal::Banned => RpcCode::PermissionDenied,
                GroupRefusal::TooManyGroups => RpcCode::ResourceExhausted,
            },
            GroupError::Store(StoreError::Unavailable(_)) => RpcCode::Unavailable,
            GroupError::Store(_) => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

impl From<EconomyError> for RpcError {
    fn from(error: EconomyError) -> Self {
        let code = match &error {
            EconomyError::Invalid(_) => RpcCode::InvalidArgument,
            EconomyError::InsufficientFunds { .. }
            | EconomyError::BalanceOverflow { .. }
            | EconomyError::InsufficientItems { .. }
            | EconomyError::CountOverflow { .. } => RpcCode::FailedPrecondition,
            EconomyError::KeyReused => RpcCode::AlreadyExists,
            EconomyError::AccountNotFound | EconomyError::LedgerItemNotFound => RpcCode::NotFound,
            EconomyError::Unavailable(_) => RpcCode::Unavailable,
            EconomyError::Internal => RpcCode::Internal,
        };
        RpcError::new(code, error.to_string())
    }
}

impl From<StorageError> for RpcError {
    fn from(error: StorageError) -> Self {
        let code = match &error {
            StorageError::Invalid(_)
            | StorageError::VersionRejected
            | StorageError::PermissionRejected
            | StorageError::DeleteRejected => RpcCode::InvalidArgument,
            StorageError::TooManyObjects(_) => RpcCode::ResourceExhausted,
            StorageError::Store(crate::store::StoreError::Unavailable(_))
            | StorageError::Store(crate::store::StoreError::Closed) => RpcCode::Unavailable,
            StorageError::Store(_) => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

impl From<LeaderboardError> for RpcError {
    fn from(error: LeaderboardError) -> Self {
        let code = match &error {
            LeaderboardError::Invalid(_) => RpcCode::InvalidArgument,
            LeaderboardError::NotFound | LeaderboardError::Missing(_) => RpcCode::NotFound,
            LeaderboardError::Precondition(_) => RpcCode::FailedPrecondition,
            LeaderboardError::Authoritative(_) => RpcCode::PermissionDenied,
            LeaderboardError::Store(crate::store::StoreError::Unavailable(_))
            | LeaderboardError::Store(crate::store::StoreError::Closed) => RpcCode::Unavailable,
            LeaderboardError::Store(_) => return RpcError::internal(),
        };
        RpcError::new(code, error.to_string())
    }
}

/// A function id that cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid function id {0:?}: use 1-128 characters, no spaces, '/' or control characters")]
pub struct InvalidId(pub String);

/// The registry a game fills with its own functions before starting the server.
#[derive(Clone, Default)]
pub struct Functions {
    functions: HashMap<String, Arc<dyn ServerFunction>>,
}

impl Functions {
    pub fn new() -> Functions {
        Functions::default()
    }

    /// Registers `function` under `id` (ids are case-insensitive, as in Nakama: stored lower
    /// case). A later registration of the same id replaces the earlier one.
    pub fn register(
        &mut self,
        id: &str,
        function: impl ServerFunction,
    ) -> Result<&mut Functions, InvalidId> {
        let valid = !id.is_empty()
            && id.chars().count() <= 128
            && !id
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '/');
        if !valid {
            return Err(InvalidId(id.to_string()));
        }
        self.functions.insert(id.to_lowercase(), Arc::new(function));
        Ok(self)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.functions.contains_key(&id.to_lowercase())
    }

    /// The registered ids, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.functions.keys().cloned().collect();
        ids.sort();
        ids
    }
}

/// Why a call did not succeed, as both transports tell it apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No function id was given.
    MissingId,
    /// No function has this id.
    NotFound,
    /// The function failed.
    Failed(RpcError),
}

/// Runs registered functions for both transports, with one metric per function.
pub struct Rpc {
    functions: HashMap<String, Arc<dyn ServerFunction>>,
    services: Arc<Services>,
    /// Each registered function's last failure: when (Unix ms), its code and message (what the
    /// console shows; one entry per function, so bounded by the functions registered).
    last_errors: parking_lot::Mutex<HashMap<String, (i64, &'static str, String)>>,
}

impl Rpc {
    pub fn new(functions: Functions, services: Arc<Services>) -> Rpc {
        Rpc {
            functions: functions.functions,
            services,
            last_errors: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// The registered functions' ids (lower case), sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.functions.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Function `id`'s last failure, if it has failed: when (Unix ms), its code and message.
    pub fn last_error(&self, id: &str) -> Option<(i64, &'static str, String)> {
        self.last_errors.lock().get(id).cloned()
    }

    /// Calls function `id` (case-insensitive) for `caller` (None: HTTP key) with `payload`,
    /// from `request`.
    pub async fn call(
        &self,
        id: &str,
        caller: Option<&Caller>,
        payload: &str,
        request: Option<&RequestContext>,
    ) -> Result<String, CallError> {
        if id.is_empty() {
            self.count("unknown", "missing_id");
            return Err(CallError::MissingId);
        }
        let lower = id.to_lowercase();
        let Some((id, function)) = self.functions.get_key_value(&lower) else {
            self.count("unknown", "not_found");
            return Err(CallError::NotFound);
        };
        let started = Instant::now();
        let call = Call {
            id,
            caller,
            payload,
            request,
            economy: &self.services.economy,
            accounts: &self.services.accounts,
            storage: &self.services.storage,
            leaderboards: &self.services.leaderboards,
            notifications: &self.services.notifications,
            friends: &self.services.friends,
            groups: &self.services.groups,
            streams: &self.services.streams,
        };
        let result = function.call(call).await;
        self.services
            .metrics
            .rpc_duration
            .with_label_values(&[id.as_str()])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(answer) => {
                self.count(id, "ok");
                Ok(answer)
            }
            Err(error) => {
                self.count(id, error.code.name());
                self.last_errors.lock().insert(
                    id.clone(),
                    (
                        crate::base::clock::now_ms(),
                        error.code.name(),
                        error.message.clone(),
                    ),
                );
                Err(CallError::Failed(error))
            }
        }
    }

    fn count(&self, id: &str, outcome: &str) {
        self.services
            .metrics
            .rpc_calls
            .with_label_values(&[id, outcome])
            .inc();
    }
}
