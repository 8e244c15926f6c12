//! Why a player failed, and how transport errors map onto those kinds.
//!
//! It lives with the transports because they are what produce almost every kind (an HTTP status,
//! a refused connection, a WebSocket close code, a reset); the steps add the few of their own
//! (a timeout waiting for a named answer, a failed server function, unfinished at the end). The
//! kind's name ([`Failure::kind`]) is the key in the report's `errors` map.

use std::borrow::Cow;

use tokio_tungstenite::tungstenite::Error as WsError;

/// Why a player failed; [`Failure::kind`] is the key in the report's `errors` map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The HTTP request got a non-2xx status.
    Http(u16),
    /// The HTTP connection could not be established (refused, unreachable).
    HttpConnect,
    /// No HTTP response within the timeout.
    HttpTimeout,
    /// The HTTP exchange broke off (reset, protocol error).
    HttpIo,
    /// A 2xx answer whose body is not what the API promises.
    BadResponse,
    /// No local port/address to bind the socket to.
    WsBind,
    /// TCP connect for the realtime socket failed.
    WsConnect,
    /// The WebSocket upgrade was answered with this HTTP status (401 for a bad token).
    WsHttp(u16),
    /// The server closed the socket with this close code.
    WsClose(u16),
    /// The socket ended without a close frame.
    WsEof,
    /// The socket was reset.
    WsReset,
    /// Another socket I/O error.
    WsIo,
    /// The peer broke the WebSocket protocol.
    WsProtocol,
    /// An `error` envelope answered our request, with its Nakama error code.
    ServerError(i64),
    /// No answer within the timeout to the named request.
    Timeout(&'static str),
    /// We sent a Close and the server ended the connection without answering with its own.
    CloseUnanswered,
    /// Still in the middle of a step when the run's grace period ran out.
    Unfinished,
    /// A native TCP connection could not be opened.
    TcpConnect,
    /// The server closed a native TCP connection.
    TcpClosed,
    /// Another native TCP I/O error, or a bad frame from the server.
    TcpIo,
    /// An ENet connection could not be made (no answer, refused, no free peer).
    EnetConnect,
    /// The server disconnected an ENet peer.
    EnetClosed,
    /// A packet from the server that is not an envelope.
    EnetIo,
    /// A line-based game server refused the join (`DENIED …`) or answered it with something
    /// else than `WELCOME`.
    GameDenied,
    /// A server function call failed: `problem` is `error_<code>`, `http_<status>` or `timeout`.
    Rpc { function: String, problem: String },
    /// A call of a `storage` or `leaderboard` step failed: `call` is its metric's name
    /// (`storage_write`, `leaderboard_around`…), `problem` is `http_<status>`, `timeout`, or
    /// `missing` (a read that did not find what the player wrote before).
    Call { call: &'static str, problem: String },
}

impl Failure {
    /// The failure's key in the report.
    pub fn kind(&self) -> Cow<'static, str> {
        match self {
            Failure::Http(s) => format!("http_{s}").into(),
            Failure::HttpConnect => "http_connect".into(),
            Failure::HttpTimeout => "http_timeout".into(),
            Failure::HttpIo => "http_io".into(),
            Failure::BadResponse => "bad_response".into(),
            Failure::WsBind => "ws_bind".into(),
            Failure::WsConnect => "ws_connect".into(),
            Failure::WsHttp(s) => format!("ws_http_{s}").into(),
            Failure::WsClose(c) => format!("ws_close_{c}").into(),
            Failure::WsEof => "ws_eof".into(),
            Failure::WsReset => "ws_reset".into(),
            Failure::WsIo => "ws_io".into(),
            Failure::WsProtocol => "ws_protocol".into(),
            Failure::ServerError(c) => format!("server_error_{c}").into(),
            Failure::Timeout(what) => format!("{what}_timeout").into(),
            Failure::CloseUnanswered => "ws_close_unanswered".into(),
            Failure::Unfinished => "unfinished".into(),
            Failure::TcpConnect => "tcp_connect".into(),
            Failure::TcpClosed => "tcp_closed".into(),
            Failure::TcpIo => "tcp_io".into(),
            Failure::EnetConnect => "enet_connect".into(),
            Failure::EnetClosed => "enet_closed".into(),
            Failure::EnetIo => "enet_io".into(),
            Failure::GameDenied => "game_denied".into(),
            Failure::Rpc { function, problem } => format!("rpc_{function}_{problem}").into(),
            Failure::Call { call, problem } => format!("{call}_{problem}").into(),
        }
    }
}

/// The failure a WebSocket error stands for.
pub(crate) fn ws_failure(e: WsError) -> Failure {
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    match e {
        WsError::Http(resp) => Failure::WsHttp(resp.status().as_u16()),
        WsError::ConnectionClosed | WsError::AlreadyClosed => Failure::WsEof,
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Failure::WsReset,
        WsError::Io(e) => match e.kind() {
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => {
                Failure::WsReset
            }
            std::io::ErrorKind::UnexpectedEof => Failure::WsEof,
            _ => Failure::WsIo,
        },
        _ => Failure::WsProtocol,
    }
}

/// The failure an I/O error on a game's TCP connection (native or lines) stands for.
pub(crate) fn tcp_failure(e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::UnexpectedEof => Failure::TcpClosed,
        _ => Failure::TcpIo,
    }
}

/// The failure an HTTP client error stands for.
pub(crate) fn http_failure(e: &reqwest::Error) -> Failure {
    if e.is_timeout() {
        Failure::HttpTimeout
    } else if e.is_connect() {
        Failure::HttpConnect
    } else {
        Failure::HttpIo
    }
}
