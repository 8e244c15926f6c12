//! Configuration: defaults, overridden by a TOML file, then by `MUSTER_*` environment variables,
//! then by command-line flags. Every field is documented in `config.example.toml` (printed by
//! `muster config`), and a test checks that file against [`Config::default`] so they cannot drift.

pub(crate) mod enet;
pub(crate) mod grpc;

pub use self::enet::EnetConfig;
pub use self::grpc::GrpcConfig;
use crate::accounts::config::SessionConfig;
use crate::chat::config::ChatConfig;
use crate::cluster::config::ClusterConfig;
use crate::console::config::ConsoleConfig;
use crate::economy::config::EconomyConfig;
use crate::friends::config::FriendsConfig;
use crate::groups::config::GroupsConfig;
use crate::leaderboards::config::LeaderboardsConfig;
use crate::links::config::LinksConfig;
use crate::matches::config::{MatchesConfig, MatchmakerConfig};
use crate::notifications::config::NotificationsConfig;
use crate::parties::config::PartiesConfig;
use crate::rooms::config::RoomsConfig;
use crate::rooms::fleet::config::FleetConfig;
use crate::status::config::StatusConfig;
use crate::storage::config::StorageConfig;
use crate::store::config::{DatabaseConfig, StoreConfig};
use crate::world::config::WorldConfig;

/// The built-in server functions, by id: what `runtime.builtin_functions` may name and
/// `crate::functions::builtins` registers.
pub const BUILTIN_FUNCTIONS: &[&str] = &[
    "wallet_spend",
    "inventory_grant",
    "inventory_consume",
    "ban_users",
    "unban_users",
    "notifications_send",
];

/// Built-in functions no player may ever call (not even listed in
/// `runtime.player_builtin_functions`).
pub const SERVER_ONLY_FUNCTIONS: &[&str] = &["ban_users", "unban_users", "notifications_send"];

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// The documented default configuration, as printed by `muster config`.
pub const EXAMPLE_TOML: &str = include_str!("../../config.example.toml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address for the HTTP API and the WebSocket, both on one port.
    pub listen: String,
    /// Directory for the embedded SQLite database.
    pub data_dir: PathBuf,
    /// `postgres://...` for PostgreSQL (or CockroachDB); empty for SQLite in `data_dir`.
    pub database_url: String,
    /// Key game clients send as HTTP Basic user name to authenticate.
    pub server_key: String,
    /// Log filter, in `tracing_subscriber::EnvFilter` syntax.
    pub log: String,
    /// How log lines are written: text or JSON.
    pub log_format: LogFormat,
    /// How long shutdown waits for requests and sockets to finish.
    pub shutdown_grace_ms: u64,
    /// Threads running requests and sockets; 0: one per core (or `TOKIO_WORKER_THREADS`).
    pub worker_threads: usize,
    pub session: SessionConfig,
    /// Sign-in with Apple, Google, Facebook, Steam and Game Center (docs/sign-in.md).
    pub social: crate::accounts::providers::SocialConfig,
    pub socket: SocketConfig,
    pub limits: LimitsConfig,
    pub database: DatabaseConfig,
    pub metrics: MetricsConfig,
    pub matches: MatchesConfig,
    pub matchmaker: MatchmakerConfig,
    pub rooms: RoomsConfig,
    pub enet: EnetConfig,
    /// Nakama's client API over gRPC (docs/grpc.md).
    pub grpc: GrpcConfig,
    pub chat: ChatConfig,
    pub runtime: RuntimeConfig,
    pub economy: EconomyConfig,
    /// Storage objects (docs/storage-objects.md).
    pub storage: StorageConfig,
    /// Stored notifications (docs/social.md).
    pub notifications: NotificationsConfig,
    /// Friends, invites and blocks (docs/social.md).
    pub friends: FriendsConfig,
    /// Groups and their members (docs/social.md).
    pub groups: GroupsConfig,
    /// Following users' online status (docs/social.md).
    pub status: StatusConfig,
    /// Parties (docs/social.md).
    pub parties: PartiesConfig,
    /// Leaderboards created at start (docs/leaderboards.md).
    pub leaderboards: LeaderboardsConfig,
    pub links: LinksConfig,
    /// This node's place in a cluster (docs/cluster.md); none without `cluster.nats_url`.
    pub cluster: ClusterConfig,
    /// The studio's own game servers, run as rooms (docs/fleet.md).
    pub fleet: FleetConfig,
    /// The GraphQL read gateway at `/graphql` (docs/gateway.md).
    pub gateway: muster_gateway::config::GatewayConfig,
    /// The persistent spatial world (docs/world.md); off unless `world.map` is set.
    pub world: WorldConfig,
    /// The operator's console (docs/console.md); off until `console.admin_password` is set.
    pub console: ConsoleConfig,
    /// In-app purchase and subscription validation (docs/purchases.md).
    pub iap: crate::purchases::config::IapConfig,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines, for a terminal.
    #[default]
    Text,
    /// One JSON object per line (time, level, target, fields), for a log collector.
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocketConfig {
    /// Largest realtime message a client may send, in bytes; a larger one closes the socket (1009).
    pub max_message_size_bytes: usize,
    /// How often the server sends a WebSocket ping to each socket.
    pub ping_period_ms: u64,
    /// A socket silent for this long is closed as dead.
    pub pong_wait_ms: u64,
    /// Messages waiting to be written to one socket; past it the socket is closed (1008).
    pub outgoing_queue_size: usize,
    /// Read buffer per socket, in bytes; it grows to fit a larger frame. Every idle socket
    /// holds it, so it is sized for the common request, not the largest.
    pub read_buffer_bytes: usize,
    /// Most sockets open at once on this node; 0 for no limit.
    pub max_sockets: usize,
    /// Most realtime sockets one account may hold open on this node at once; past it a new
    /// one is refused (429). 0 for no limit.
    pub max_sockets_per_user: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest HTTP request body, in bytes.
    pub max_request_size_bytes: usize,
    /// Authentication and refresh calls allowed per client IP per second; 0 disables the limit.
    pub auth_per_ip_per_sec: u32,
    /// Burst allowance on top of `auth_per_ip_per_sec`.
    pub auth_burst: u32,
    /// WebSocket connections allowed per client IP per second; 0 disables the limit.
    pub connect_per_ip_per_sec: u32,
    /// Burst allowance on top of `connect_per_ip_per_sec`.
    pub connect_burst: u32,
    /// Slowest an HTTP request may be before it is answered 408.
    pub request_timeout_ms: u64,
    /// A request's head (request line and headers) must arrive within this, counted from the
    /// connection's start or from the previous answer; a connection that sends nothing, sends
    /// its head too slowly, or sits idle on keep-alive this long is closed.
    pub header_read_timeout_ms: u64,
    /// Longest silence while a request body is being read; past it the request fails (408).
    pub body_read_timeout_ms: u64,
    /// HTTP connections one client IP may hold open at once (0: no limit); past it new ones
    /// are closed as soon as accepted. WebSockets leave this count once upgraded (their own
    /// bound is `socket.max_sockets`).
    pub max_connections_per_ip: usize,
    /// HTTP and native TCP connections held at once before new ones are closed as soon as
    /// accepted; 0: the process's open-file limit less `connection_headroom`.
    pub max_connections: usize,
    /// File descriptors kept free, when `max_connections` is 0, for the database, logs and the
    /// accept that turns a new client away cleanly instead of failing with "too many open files".
    pub connection_headroom: usize,
    /// A native TCP connection's first frame (its match join) must arrive within this.
    pub handshake_timeout_ms: u64,
    /// Realtime sockets (WebSocket, native TCP, ENet) one client address may hold open at once
    /// (IPv6: one /64); past it a new one is refused (429). 0 for no limit.
    pub max_sockets_per_ip: usize,
    /// Proxies (addresses or networks, `10.0.0.0/8`) whose `X-Forwarded-For` names the client
    /// for per-IP limits; empty: every limit counts the peer's own address.
    pub trusted_proxies: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Bearer token required by `GET /metrics`; empty serves metrics without authentication
    /// (expose the port only to your Prometheus network then).
    pub token: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Key for server-to-server calls of server functions (`/v2/rpc/{id}?http_key=...`), as
    /// Nakama's `runtime.http_key`. Change it in production: whoever holds it acts for any user.
    pub http_key: String,
    /// Built-in server functions to register (see `crate::functions::builtins`); empty for none.
    pub builtin_functions: Vec<String>,
    /// Built-in functions players may call with their session token. They spend and grant
    /// currency and items, so by default only server code and the HTTP key may call them.
    pub player_builtin_functions: Vec<String>,
    /// The folder of the JavaScript module (Nakama's `runtime.path`); empty: none is loaded.
    pub path: String,
    /// The module's bundle in `path` (Nakama's `runtime.js_entrypoint`).
    pub js_entrypoint: String,
    /// JavaScript VMs loaded at start to run RPCs and hooks, each with the module loaded.
    pub js_vms: usize,
    /// Most JavaScript VMs running RPCs and hooks at once: the pool grows to it when a call
    /// finds every VM busy (a call waiting on the database holds its VM); past it calls wait.
    pub js_max_vms: usize,
    /// Longest one JavaScript call may run before it is interrupted.
    pub js_call_timeout_ms: u64,
    /// Most memory one JavaScript VM may hold, in MiB.
    pub js_memory_mb: usize,
    /// Values a module reads as `ctx.env` (Nakama's `runtime.env`).
    pub env: BTreeMap<String, String>,
    /// Hosts a module's `nk.httpRequest` may reach: `host`, `host:port`, or `*` for any;
    /// empty: none (the module has no network).
    pub js_http_allow: Vec<String>,
    /// Longest one `nk.httpRequest` may take.
    pub js_http_timeout_ms: u64,
    /// Largest answer one `nk.httpRequest` may read.
    pub js_http_max_bytes: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            http_key: "defaulthttpkey".into(),
            builtin_functions: BUILTIN_FUNCTIONS
                .iter()
                .map(|name| name.to_string())
                .collect(),
            player_builtin_functions: Vec::new(),
            path: String::new(),
            js_entrypoint: "index.js".into(),
            js_vms: 2,
            js_max_vms: 256,
            js_call_timeout_ms: 5000,
            js_memory_mb: 64,
            env: BTreeMap::new(),
            js_http_allow: Vec::new(),
            js_http_timeout_ms: 5000,
            js_http_max_bytes: 1 << 20,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "0.0.0.0:7350".into(),
            data_dir: PathBuf::from("./data"),
            database_url: String::new(),
            server_key: "defaultkey".into(),
            log: "info".into(),
            log_format: LogFormat::Text,
            shutdown_grace_ms: 10_000,
            worker_threads: 0,
            session: SessionConfig::default(),
            social: Default::default(),
            socket: SocketConfig::default(),
            limits: LimitsConfig::default(),
            database: DatabaseConfig::default(),
            metrics: MetricsConfig::default(),
            matches: Default::default(),
            matchmaker: Default::default(),
            rooms: Default::default(),
            enet: EnetConfig::default(),
            grpc: GrpcConfig::default(),
            chat: ChatConfig::default(),
            runtime: RuntimeConfig::default(),
            economy: EconomyConfig::default(),
            storage: StorageConfig::default(),
            notifications: NotificationsConfig::default(),
            friends: FriendsConfig::default(),
            groups: GroupsConfig::default(),
            status: StatusConfig::default(),
            parties: PartiesConfig::default(),
            leaderboards: LeaderboardsConfig::default(),
            links: LinksConfig::default(),
            cluster: ClusterConfig::default(),
            fleet: FleetConfig::default(),
            world: WorldConfig::default(),
            console: ConsoleConfig::default(),
            iap: Default::default(),
            gateway: Default::default(),
        }
    }
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            max_message_size_bytes: 4096,
            ping_period_ms: 15_000,
            pong_wait_ms: 25_000,
            outgoing_queue_size: 64,
            read_buffer_bytes: 512,
            max_sockets: 0,
            max_sockets_per_user: 16,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_request_size_bytes: 256 * 1024,
            auth_per_ip_per_sec: 20,
            auth_burst: 100,
            connect_per_ip_per_sec: 20,
            connect_burst: 100,
            request_timeout_ms: 30_000,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
            max_connections_per_ip: 256,
            max_connections: 0,
            connection_headroom: 256,
            handshake_timeout_ms: 10_000,
            max_sockets_per_ip: 1024,
            trusted_proxies: Vec::new(),
        }
    }
}

impl Config {
    /// What the store reads: where the database is and how to use it.
    pub fn store(&self) -> StoreConfig {
        StoreConfig {
            url: self.database_url.clone(),
            data_dir: self.data_dir.clone(),
            database: self.database.clone(),
        }
    }

    /// Loads defaults, then `file` (if any), then `MUSTER_*` variables (`MUSTER_SOCKET__PING_PERIOD_MS`
    /// sets `socket.ping_period_ms`), then `overrides` (the command-line flags that were given).
    pub fn load(file: Option<&Path>, overrides: &[(&str, String)]) -> Result<Config, String> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(format!("config file {} does not exist", file.display()));
            }
            figment = figment.merge(Toml::file(file));
        }
        // MUSTER_CONFIG names the file itself, not a setting.
        figment = figment.merge(
            Env::prefixed("MUSTER_")
                .ignore(&["config"])
                .split("__")
                .lowercase(true),
        );
        for (key, value) in overrides {
            figment = figment.merge(Serialized::default(key, value));
        }
        let config: Config = figment.extract().map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    /// Checks values no type can rule out; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.server_key.is_empty() {
            return Err("server_key must not be empty".into());
        }
        if self.session.token_expiry_sec == 0 || self.session.refresh_token_expiry_sec == 0 {
            return Err(
                "session.token_expiry_sec and session.refresh_token_expiry_sec must be > 0".into(),
            );
        }
        if self.socket.max_message_size_bytes < 128 {
            return Err("socket.max_message_size_bytes must be at least 128".into());
        }
        if self.socket.ping_period_ms == 0 || self.socket.pong_wait_ms <= self.socket.ping_period_ms
        {
            return Err(
                "socket.pong_wait_ms must be greater than socket.ping_period_ms (> 0)".into(),
            );
        }
        if self.socket.outgoing_queue_size == 0 {
            return Err("socket.outgoing_queue_size must be at least 1".into());
        }
        crate::base::client_ip::TrustedProxies::parse(&self.limits.trusted_proxies)
            .map_err(|e| format!("limits.trusted_proxies: {e}"))?;
        if self.database.max_batch == 0
            || self.database.write_queue_size == 0
            || self.database.read_connections == 0
            || self.database.pool_size == 0
            || self.database.writer_connections == 0
        {
            return Err(
                "database.max_batch, write_queue_size, read_connections, pool_size and writer_connections must be at least 1".into(),
            );
        }
        if self.database.writer_connections > 64 {
            return Err(
                "database.writer_connections must be at most 64 (each is a PostgreSQL connection; see docs/storage.md)".into(),
            );
        }
        if self.chat.max_channels_per_socket == 0
            || self.chat.max_content_bytes == 0
            || self.chat.max_room_name_chars == 0
        {
            return Err(
                "chat.max_channels_per_socket, max_content_bytes and max_room_name_chars must be at least 1"
                    .into(),
            );
        }
        if self.chat.messages_per_sec > 0 && self.chat.message_burst == 0 {
            return Err(
                "chat.message_burst must be at least 1 when chat.messages_per_sec is set".into(),
            );
        }
        if !self.database_url.is_empty()
            && !self.database_url.starts_with("postgres://")
            && !self.database_url.starts_with("postgresql://")
        {
            return Err("database_url must start with postgres:// (or be empty for SQLite)".into());
        }
        self.matches.validate()?;
        self.matchmaker.validate()?;
        self.rooms.validate()?;
        self.enet.validate()?;
        self.grpc.validate()?;
        self.links.validate()?;
        self.storage.validate()?;
        self.notifications.validate()?;
        self.iap.validate()?;
        self.friends.validate()?;
        self.groups.validate()?;
        self.status.validate()?;
        self.parties.validate()?;
        self.cluster.validate()?;
        self.fleet.validate()?;
        self.world.validate()?;
        if self.world.enabled() && self.cluster.enabled() {
            // Its shards move between nodes: their leases in the shared database, their
            // checkpoints and logs on a volume every node mounts.
            if self.database_url.is_empty() {
                return Err(
                    "world.map on a clustered node needs PostgreSQL (database_url): \
                            the shards' leases live there"
                        .into(),
                );
            }
            if self.world.checkpoint_dir.is_empty() {
                return Err(
                    "world.map on a clustered node needs world.checkpoint_dir set to \
                            a volume every node mounts"
                        .into(),
                );
            }
        }
        self.console.validate()?;
        for (name, server) in &self.fleet.servers {
            if server.queue_timeout_ms >= self.limits.request_timeout_ms {
                return Err(format!(
                    "fleet.servers.{name}.queue_timeout_ms must be less than limits.request_timeout_ms ({}): a waiting room create would be cut off",
                    self.limits.request_timeout_ms
                ));
            }
        }
        self.gateway.validate()?;
        if self.runtime.http_key.is_empty() {
            return Err("runtime.http_key must not be empty".into());
        }
        for name in &self.runtime.builtin_functions {
            if !BUILTIN_FUNCTIONS.contains(&name.as_str()) {
                return Err(format!(
                    "runtime.builtin_functions: unknown function {name:?} (known: {})",
                    BUILTIN_FUNCTIONS.join(", ")
                ));
            }
        }
        for name in &self.runtime.player_builtin_functions {
            if SERVER_ONLY_FUNCTIONS.contains(&name.as_str()) {
                return Err(format!(
                    "runtime.player_builtin_functions: {name:?} is for the server only"
                ));
            }
            if !self.runtime.builtin_functions.contains(name) {
                return Err(format!(
                    "runtime.player_builtin_functions: {name:?} is not in runtime.builtin_functions"
                ));
            }
        }
        Ok(())
    }

    pub fn token_expiry(&self) -> Duration {
        Duration::from_secs(self.session.token_expiry_sec)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_is_exactly_the_defaults() {
        let parsed: Config = toml::from_str(EXAMPLE_TOML).expect("config.example.toml parses");
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn example_file_documents_every_key() {
        let defaults = toml::to_string(&Config::default()).expect("serializes");
        let table: toml::Table = toml::from_str(&defaults).expect("parses");
        for (key, value) in &table {
            match value {
                toml::Value::Table(section) => {
                    assert!(
                        EXAMPLE_TOML.contains(&format!("[{key}]")),
                        "section [{key}] undocumented"
                    );
                    for (sub, value) in section {
                        // A nested table is documented as its own section, key by key.
                        if let toml::Value::Table(nested) = value {
                            if EXAMPLE_TOML.contains(&format!("[{key}.{sub}]")) {
                                for leaf in nested.keys() {
                                    assert!(
                                        EXAMPLE_TOML.contains(&format!("\n{leaf} =")),
                                        "{key}.{sub}.{leaf} undocumented"
                                    );
                                }
                                continue;
                            }
                        }
                        assert!(
                            EXAMPLE_TOML.contains(&format!("\n{sub} =")),
                            "{key}.{sub} undocumented"
                        );
                    }
                }
                _ => assert!(
                    EXAMPLE_TOML.contains(&format!("\n{key} =")),
                    "{key} undocumented"
                ),
            }
        }
    }

    #[test]
    fn a_clustered_world_needs_postgresql_and_a_shared_checkpoint_dir() {
        let mut config = Config::default();
        config.world.map = "/data/city.osm.pbf".into();
        config.cluster.nats_url = "nats://127.0.0.1:4222".into();
        let error = config.validate().unwrap_err();
        assert!(error.contains("PostgreSQL"), "{error}");
        config.database_url = "postgres://muster@db/muster".into();
        let error = config.validate().unwrap_err();
        assert!(error.contains("world.checkpoint_dir"), "{error}");
        config.world.checkpoint_dir = "/shared/world".into();
        assert_eq!(config.validate(), Ok(()));
        config.world.lease_ms = 100;
        let error = config.validate().unwrap_err();
        assert!(error.contains("world.lease_ms"), "{error}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let error = toml::from_str::<Config>("[socket]\nping_perod_ms = 5\n").unwrap_err();
        assert!(error.to_string().contains("ping_perod_ms"), "{error}");
        let config = Config {
            server_key: String::new(),
            ..Config::default()
        };
        assert!(config.validate().unwrap_err().contains("server_key"));
        for writers in [0, 65] {
            let mut config = Config::default();
            config.database.writer_connections = writers;
            let error = config.validate().unwrap_err();
            assert!(error.contains("writer_connections"), "{error}");
        }
    }
}
