//! The `[rooms]` section: rooms created over HTTP, their bounds and where players reach them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoomsConfig {
    /// Address of the native TCP transport; empty disables it.
    pub tcp_listen: String,
    /// Host given to clients in connection info; empty: in a cluster, the host of
    /// `cluster.advertise` (the node the room lives on), else the host the client used for the
    /// call.
    pub public_host: String,
    /// Port given to clients in connection info; 0: the TCP listener's port.
    pub public_port: u16,
    /// Key for servers managing rooms (HTTP Basic user name); empty: only session tokens.
    pub admin_key: String,
    /// Most rooms alive at once on this node.
    pub max_rooms: usize,
    /// Largest room capacity.
    pub max_capacity: u32,
    /// Most built-in rooms one player may have open at once on this node (rooms created with
    /// the admin key do not count); 0 for no limit.
    pub max_rooms_per_user: usize,
    /// Rooms one player may create per minute (all at once, then none until the minute is
    /// over); 0 for no limit.
    pub creates_per_user_per_minute: u32,
}

impl Default for RoomsConfig {
    fn default() -> Self {
        RoomsConfig {
            tcp_listen: "0.0.0.0:7351".into(),
            public_host: String::new(),
            public_port: 0,
            admin_key: String::new(),
            max_rooms: 100_000,
            max_capacity: 64,
            max_rooms_per_user: 10,
            creates_per_user_per_minute: 30,
        }
    }
}

impl RoomsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !self.tcp_listen.is_empty() && self.tcp_listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "rooms.tcp_listen must be an IP:port address or empty, not {:?}",
                self.tcp_listen
            ));
        }
        if self.max_rooms == 0 || self.max_capacity == 0 {
            return Err("rooms.max_rooms and max_capacity must be at least 1".into());
        }
        Ok(())
    }
}
