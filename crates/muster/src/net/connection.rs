//! What every realtime transport shares about a connection, so that each rule exists once:
//! admission (the per-IP connect rate, then a place under the socket limit), why a connection
//! ended (its close code and metric label), and what its end records.
//!
//! The session's own cleanup — leaving chat channels and matches, dropping matchmaker tickets,
//! leaving the registry — is not here: it runs when the session's
//! [`SessionGuard`](crate::session::SessionGuard) drops, through the observers the domains
//! registered (see [`crate::session::registry`]), whichever transport held it.

use std::net::IpAddr;

use crate::net::state::AppState;
use crate::session::Admission;

/// The transport a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    WebSocket,
    Tcp,
}

/// Why a connection ended: the close frame a WebSocket client sees and the
/// `muster_sockets_closed_total{reason}` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    ClientClosed,
    ServerShutdown,
    /// Nothing heard from the peer for `socket.pong_wait_ms`.
    KeepAliveTimeout,
    /// The outbox overflowed: the client does not read fast enough.
    QueueFull,
    MessageTooBig,
    /// The stream lost its framing, or a frame broke the protocol.
    ProtocolError,
    /// The peer did not take what was written within `socket.pong_wait_ms`.
    WriteFailed,
    /// The native TCP transport's first frame was not a valid match join.
    JoinFailed,
    /// The match a native TCP connection was for has ended.
    MatchEnded,
}

impl Ending {
    /// The WebSocket close frame (code, reason); `None` where the peer is gone or never spoke
    /// WebSocket.
    pub fn close_frame(self) -> Option<(u16, &'static str)> {
        match self {
            Ending::ClientClosed | Ending::WriteFailed => None,
            Ending::ServerShutdown => Some((1001, "server shutting down")),
            Ending::KeepAliveTimeout => Some((1001, "keep-alive timeout")),
            Ending::QueueFull => Some((1008, "outgoing queue full: client too slow")),
            Ending::MessageTooBig => Some((1009, "message too big")),
            Ending::ProtocolError => Some((1002, "protocol error")),
            Ending::JoinFailed | Ending::MatchEnded => None,
        }
    }

    /// The metric label; native TCP connections' labels start with `tcp_`.
    pub fn label(self, transport: Transport) -> &'static str {
        match transport {
            Transport::WebSocket => match self {
                Ending::ClientClosed => "client_closed",
                Ending::ServerShutdown => "server_shutdown",
                Ending::KeepAliveTimeout => "keepalive_timeout",
                Ending::QueueFull => "queue_full",
                Ending::MessageTooBig => "message_too_big",
                Ending::ProtocolError => "protocol_error",
                Ending::WriteFailed => "write_failed",
                Ending::JoinFailed => "join_failed",
                Ending::MatchEnded => "match_ended",
            },
            Transport::Tcp => match self {
                Ending::ClientClosed => "tcp_client_closed",
                Ending::ServerShutdown => "tcp_server_shutdown",
                Ending::KeepAliveTimeout => "tcp_idle_timeout",
                Ending::QueueFull => "tcp_queue_full",
                Ending::MessageTooBig | Ending::ProtocolError => "tcp_bad_frame",
                Ending::WriteFailed => "tcp_write_failed",
                Ending::JoinFailed => "tcp_join_failed",
                Ending::MatchEnded => "tcp_match_ended",
            },
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client's address opens connections faster than `limits.connect_per_ip_per_sec`.
    RateLimited,
    /// The node holds `socket.max_sockets` connections already.
    Full,
}

impl Refusal {
    /// What the client is told.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::RateLimited => "Too many connections; slow down.",
            Refusal::Full => "Server is at its socket limit; try another node.",
        }
    }
}

/// Checks the per-IP connect rate (counted in `muster_rate_limited_total{kind="connect"}`).
pub fn allow_connect(state: &AppState, ip: IpAddr) -> Result<(), Refusal> {
    if state.connect_limit.allow(ip) {
        return Ok(());
    }
    state
        .metrics
        .rate_limited
        .with_label_values(&["connect"])
        .inc();
    Err(Refusal::RateLimited)
}

/// Takes a place under the socket limit, held until the session ends (or dropped if the
/// connection never becomes one).
pub fn take_place(state: &AppState) -> Result<Admission, Refusal> {
    state
        .registry
        .admit(state.config.socket.max_sockets)
        .ok_or(Refusal::Full)
}

/// Records a connection's end.
pub fn record_ending(state: &AppState, transport: Transport, ending: Ending) {
    if ending == Ending::QueueFull {
        state.metrics.outgoing_dropped.inc();
    }
    state
        .metrics
        .sockets_closed
        .with_label_values(&[ending.label(transport)])
        .inc();
}
