//! What every transport shares about a connection, so that each rule exists once: the caps on
//! connections held per client IP and in total (`super::connections::ConnectionCounter`), the accept back-off,
//! a realtime session's admission (the per-IP connect rate, then a place under the socket
//! limit), why a connection ended (its close code and metric label), and what its end records.
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
    /// ENet over UDP (`net::enet`).
    Enet,
}

/// Why a connection ended: the close frame a WebSocket client sees and the
/// `muster_sockets_closed_total{reason}` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The client closed: a WebSocket close handshake, or an orderly end of a TCP stream.
    ClientClosed,
    /// The client went away without closing: the connection was reset, or a WebSocket ended
    /// with no close frame (a client killed, a network gone).
    Reset,
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
    /// A native (TCP or ENet) connection's first message was not a valid match join.
    JoinFailed,
    /// The match a native (TCP or ENet) connection was for has ended.
    MatchEnded,
    /// The player was banned (`Accounts::ban`): every socket of theirs ends, on every node.
    Banned,
}

impl Ending {
    /// The ending of a socket whose outbox closed.
    pub fn of_closed(closed: crate::session::outbox::Closed) -> Ending {
        match closed {
            crate::session::outbox::Closed::Overflowed => Ending::QueueFull,
            crate::session::outbox::Closed::Kicked => Ending::Banned,
        }
    }

    /// The WebSocket close frame (code, reason); `None` where the peer is gone or never spoke
    /// WebSocket.
    pub fn close_frame(self) -> Option<(u16, &'static str)> {
        match self {
            Ending::ClientClosed | Ending::Reset | Ending::WriteFailed => None,
            Ending::ServerShutdown => Some((1001, "server shutting down")),
            Ending::KeepAliveTimeout => Some((1001, "keep-alive timeout")),
            Ending::QueueFull => Some((1008, "outgoing queue full: client too slow")),
            Ending::MessageTooBig => Some((1009, "message too big")),
            Ending::ProtocolError => Some((1002, "protocol error")),
            Ending::Banned => Some((1008, "banned")),
            Ending::JoinFailed | Ending::MatchEnded => None,
        }
    }

    /// The metric label; native TCP connections' labels start with `tcp_`.
    pub fn label(self, transport: Transport) -> &'static str {
        match transport {
            Transport::WebSocket => match self {
                Ending::ClientClosed => "client_closed",
                Ending::Reset => "connection_reset",
                Ending::ServerShutdown => "server_shutdown",
                Ending::KeepAliveTimeout => "keepalive_timeout",
                Ending::QueueFull => "queue_full",
                Ending::MessageTooBig => "message_too_big",
                Ending::ProtocolError => "protocol_error",
                Ending::WriteFailed => "write_failed",
                Ending::JoinFailed => "join_failed",
                Ending::MatchEnded => "match_ended",
                Ending::Banned => "banned",
            },
            Transport::Tcp => match self {
                Ending::ClientClosed => "tcp_client_closed",
                Ending::Reset => "tcp_connection_reset",
                Ending::ServerShutdown => "tcp_server_shutdown",
                Ending::KeepAliveTimeout => "tcp_idle_timeout",
                Ending::QueueFull => "tcp_queue_full",
                Ending::MessageTooBig | Ending::ProtocolError => "tcp_bad_frame",
                Ending::WriteFailed => "tcp_write_failed",
                Ending::JoinFailed => "tcp_join_failed",
                Ending::MatchEnded => "tcp_match_ended",
                Ending::Banned => "tcp_banned",
            },
            Transport::Enet => match self {
                Ending::ClientClosed => "enet_client_closed",
                Ending::Reset => "enet_connection_reset",
                Ending::ServerShutdown => "enet_server_shutdown",
                Ending::KeepAliveTimeout => "enet_timeout",
                Ending::QueueFull => "enet_queue_full",
                Ending::MessageTooBig | Ending::ProtocolError => "enet_bad_packet",
                Ending::WriteFailed => "enet_write_failed",
                Ending::JoinFailed => "enet_join_failed",
                Ending::MatchEnded => "enet_match_ended",
                Ending::Banned => "enet_banned",
            },
        }
    }
}

/// Why a realtime session was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAdmitted {
    /// The client's address opens connections faster than `limits.connect_per_ip_per_sec`.
    RateLimited,
    /// The node holds `socket.max_sockets` connections already.
    Full,
    /// The client's address holds `limits.max_sockets_per_ip` sockets already.
    TooManyFromIp,
    /// The user holds `socket.max_sockets_per_user` sockets already.
    TooManyForUser,
}

impl NotAdmitted {
    /// What the client is told.
    pub fn message(self) -> &'static str {
        match self {
            NotAdmitted::RateLimited => "Too many connections; slow down.",
            NotAdmitted::Full => "Server is at its socket limit; try another node.",
            NotAdmitted::TooManyFromIp => "Too many sockets from this address.",
            NotAdmitted::TooManyForUser => "Too many sockets open for this account.",
        }
    }
}

/// Checks the per-IP connect rate (counted in `muster_rate_limited_total{kind="connect"}`).
pub fn allow_connect(state: &AppState, ip: IpAddr) -> Result<(), NotAdmitted> {
    if state
        .connect_limit
        .allow(crate::base::client_ip::limit_key(ip))
    {
        return Ok(());
    }
    state
        .services
        .metrics
        .rate_limited
        .with_label_values(&["connect"])
        .inc();
    Err(NotAdmitted::RateLimited)
}

/// Takes a place under the socket limit and the limit per client address, held until the
/// session ends (or dropped if the connection never becomes one).
pub fn take_place(state: &AppState, ip: IpAddr) -> Result<Admission, NotAdmitted> {
    let mut admission = state
        .services
        .registry
        .admit(state.services.config.socket.max_sockets)
        .ok_or(NotAdmitted::Full)?;
    let ip = crate::base::client_ip::limit_key(ip);
    if !admission.count_ip(ip, state.services.config.limits.max_sockets_per_ip) {
        state
            .services
            .metrics
            .rate_limited
            .with_label_values(&["sockets_per_ip"])
            .inc();
        return Err(NotAdmitted::TooManyFromIp);
    }
    Ok(admission)
}

/// Counts `admission` against `user`'s limit of sockets (`socket.max_sockets_per_user`).
pub fn take_user_place(
    state: &AppState,
    admission: &mut Admission,
    user: uuid::Uuid,
) -> Result<(), NotAdmitted> {
    if admission.count_user(user, state.services.config.socket.max_sockets_per_user) {
        return Ok(());
    }
    state
        .services
        .metrics
        .rate_limited
        .with_label_values(&["sockets_per_user"])
        .inc();
    Err(NotAdmitted::TooManyForUser)
}

/// Records a connection's end.
pub fn record_ending(state: &AppState, transport: Transport, ending: Ending) {
    if ending == Ending::QueueFull {
        state.services.metrics.outgoing_dropped.inc();
    }
    state
        .services
        .metrics
        .sockets_closed
        .with_label_values(&[ending.label(transport)])
        .inc();
}

/// What an accept loop does after a failed accept: out of file descriptors (EMFILE, ENFILE)
/// or buffers, it waits for connections to end instead of spinning on the error, and says so
/// at most once every 200 failures in a row; anything else is passed over.
pub async fn accept_backoff(error: &std::io::Error, failures_in_a_row: u32) {
    let starved = matches!(error.raw_os_error(), Some(23 | 24 | 105));
    if failures_in_a_row == 1 || failures_in_a_row.is_multiple_of(200) {
        tracing::warn!(%error, failures_in_a_row, "accept failed");
    }
    let wait = if starved { 100 } else { 10 };
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}
