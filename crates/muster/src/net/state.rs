//! The state every transport's handlers share: the services they call and the edge's own
//! limits. Built by [`crate::app`]; handlers take it as axum state or by reference.

use std::ops::Deref;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accounts::tokens::TokenService;
use crate::accounts::Accounts;
use crate::base::metrics::Metrics;
use crate::base::ratelimit::IpLimit;
use crate::chat::Chat;
use crate::cluster::Router;
use crate::config::Config;
use crate::functions::Rpc;
use crate::links::Links;
use crate::matches::Matches;
use crate::session::SessionRegistry;

use super::connection::ConnectionCounter;

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

/// What [`AppState`] holds.
pub struct Shared {
    pub config: Arc<Config>,
    pub tokens: Arc<TokenService>,
    pub accounts: Arc<Accounts>,
    pub metrics: Arc<Metrics>,
    /// Every session on this node: transports register theirs here.
    pub registry: Arc<SessionRegistry>,
    /// Delivery and presence wherever sessions are.
    pub router: Arc<dyn Router>,
    /// This node's bus and router when it is part of a cluster (`cluster.nats_url`).
    pub cluster: Option<crate::cluster::Cluster>,
    /// Matches and the matchmaker.
    pub matches: Arc<Matches>,
    /// Rooms, and the studio's game servers run as rooms.
    pub rooms: Arc<crate::rooms::Rooms>,
    /// Chat channels: membership, message ids, limits.
    pub chat: Arc<Chat>,
    /// Server functions (and, through them, wallets and inventories).
    pub rpc: Arc<Rpc>,
    /// The game's JavaScript module (its hooks run around API calls and realtime messages).
    pub module: Option<Arc<crate::js::Module>>,
    /// Friends, invites and blocks.
    pub friends: Arc<crate::friends::Friends>,
    pub groups: Arc<crate::groups::Groups>,
    pub status: Arc<crate::status::StatusService>,
    pub parties: Arc<crate::parties::Parties>,
    /// The operator's console (served on its own listener, `net::console`), when it is on.
    pub console: Option<Arc<crate::console::Console>>,
    /// Console requests per client IP.
    pub console_limit: Arc<IpLimit>,
    /// Invite links (served on their own listener, `net::links`).
    pub links: Arc<Links>,
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
    /// The persistent world, when `world.map` is set.
    pub world: Option<Arc<crate::world::World>>,
    /// Cancelled when the server begins shutting down; every socket task watches it.
    pub shutdown: CancellationToken,
    /// Tracks socket tasks, so shutdown knows when every socket has closed.
    pub sockets: TaskTracker,
}
