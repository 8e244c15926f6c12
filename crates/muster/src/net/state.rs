//! The state every transport's handlers share: the services they call and the edge's own
//! limits. Built by [`crate::app`]; handlers take it as axum state or by reference.

use std::ops::Deref;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::base::ratelimit::IpLimit;
use crate::functions::Rpc;
use crate::services::Services;

use super::connections::ConnectionCounter;

/// Everything handlers share, behind one `Arc`: axum clones the state for every layer and
/// extractor of every request, and a clone is then one reference count, not one per service
/// (cloning the fields one by one was 15 % of a redirect's CPU time).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds: the services, and the edge's own adapters and limits.
pub struct Shared {
    /// Every domain's service.
    pub services: Arc<Services>,
    /// Server functions (the game's, the built-in ones, a module's RPCs).
    pub rpc: Arc<Rpc>,
    /// The game's JavaScript module (its hooks run around API calls and realtime messages).
    pub module: Option<Arc<crate::runtime::js::Module>>,
    /// Console requests per client IP.
    pub console_limit: Arc<IpLimit>,
    /// The GraphQL read gateway (`/graphql`).
    pub gateway: Arc<muster_gateway::schema::Gateway>,
    /// GraphQL queries per client IP.
    pub gateway_limit: Arc<IpLimit>,
    /// Connections held per client IP and in total, HTTP and native TCP alike.
    pub connections: Arc<ConnectionCounter>,
    /// Whose `X-Forwarded-For` names the client (`limits.trusted_proxies`).
    pub trusted_proxies: crate::base::client_ip::TrustedProxies,
    pub auth_limit: Arc<IpLimit>,
    pub connect_limit: Arc<IpLimit>,
    /// Redirects, QR codes and pages of the links service, per client IP.
    pub links_limit: Arc<IpLimit>,
    /// Cancelled when the server begins shutting down; every socket task watches it (the
    /// services' token).
    pub shutdown: CancellationToken,
    /// Tracks socket tasks, so shutdown knows when every socket has closed.
    pub sockets: TaskTracker,
}
