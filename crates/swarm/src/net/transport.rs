//! The realtime socket's transport: TCP from the worker's source address, then the WebSocket
//! upgrade done here rather than by tungstenite's client handshake.
//!
//! Why by hand: tungstenite's handshake reads the HTTP response into a 4 KiB buffer and hands
//! that same allocation to the socket as its read buffer for the rest of its life (an in-place
//! `collect` keeps the capacity), which cost 4 KiB per idle player whatever `read_buffer_size`
//! says: more than everything else a player owns. Here the response is read into a transient
//! buffer, only the bytes past the headers (usually none) are handed over, and the socket's read
//! buffer is the configured one ([`WS_BUFFER`] unless the scenario chats).

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use super::failure::Failure;

/// Read and write buffer size of each player's WebSocket. A game socket's frames are small;
/// tungstenite's 128 KiB defaults would cost 256 KiB per player.
pub const WS_BUFFER: usize = 256;

/// Read buffer of players that chat: a chat socket receives several 300–500 byte messages a
/// second, and a 256-byte buffer would take two or three reads per message.
pub const WS_CHAT_BUFFER: usize = 2048;

/// The WebSocket settings with a read buffer of `read_buffer` bytes.
pub fn ws_config_with(read_buffer: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(read_buffer)
        .write_buffer_size(0)
        .max_write_buffer_size(64 * 1024)
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20))
}

/// A game connection (Muster's native transport, or a studio's own server): TCP to `addr` from
/// `source` when given, with Nagle off (inputs are small and late ones are useless).
pub async fn connect_game(addr: SocketAddr, source: Option<IpAddr>) -> Result<TcpStream, Failure> {
    let stream = socket_from(addr, source)?
        .connect(addr)
        .await
        .map_err(|_| Failure::TcpConnect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A TCP socket for `addr`, bound to `source` first when given: each worker connects from its
/// own loopback address, so that each has its own ephemeral ports.
pub fn socket_from(addr: SocketAddr, source: Option<IpAddr>) -> Result<TcpSocket, Failure> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|_| Failure::WsBind)?;
    if let Some(ip) = source {
        // Bound with port 0, the kernel would pick a port free for *every* destination at
        // bind(), searching the range under a lock, slower as it fills (at ~14,000 sockets per
        // address this took most of a worker's CPU). This defers the choice to connect(), which
        // only needs the 4-tuple to be unique.
        #[cfg(target_os = "linux")]
        if ip.is_ipv4() {
            let _ = nix::sys::socket::setsockopt(
                &socket,
                nix::sys::socket::sockopt::IpBindAddressNoPort,
                &true,
            );
        }
        socket
            .bind(SocketAddr::new(ip, 0))
            .map_err(|_| Failure::WsBind)?;
    }
    Ok(socket)
}

/// A player's realtime socket.
pub type Ws = WebSocketStream<TcpStream>;

/// Longest upgrade response accepted (status line and headers).
const MAX_RESPONSE_HEAD: usize = 8 * 1024;

/// Connects to `addr` (binding to `source` first when given) and upgrades to a WebSocket at
/// `path_and_query`, sending `host` as the Host header.
pub async fn connect_websocket(
    addr: SocketAddr,
    source: Option<IpAddr>,
    host: &str,
    path_and_query: &str,
    config: WebSocketConfig,
) -> Result<Ws, Failure> {
    let mut stream = socket_from(addr, source)?
        .connect(addr)
        .await
        .map_err(|_| Failure::WsConnect)?;
    let _ = stream.set_nodelay(true);

    let key = generate_key();
    let request = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|_| Failure::WsIo)?;

    let mut buf = Vec::with_capacity(1024);
    let head_len = loop {
        let mut chunk = [0u8; 512];
        let n = stream.read(&mut chunk).await.map_err(|_| Failure::WsIo)?;
        if n == 0 {
            return Err(Failure::WsEof);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            break end;
        }
        if buf.len() > MAX_RESPONSE_HEAD {
            return Err(Failure::WsProtocol);
        }
    };
    check_upgrade(&buf[..head_len], &derive_accept_key(key.as_bytes()))?;
    // Frames the server sent right behind its headers; an exact-size copy, not `buf`.
    let tail = buf[head_len..].to_vec();
    drop(buf);
    Ok(WebSocketStream::from_partially_read(stream, tail, Role::Client, Some(config)).await)
}

/// Offset just past the blank line ending the response head.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Checks a 101 response with the right `Sec-WebSocket-Accept`; any other status is reported
/// as `ws_http_<status>` (401 for a bad token, 503 when the server is full…).
fn check_upgrade(head: &[u8], expected_accept: &str) -> Result<(), Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(Failure::WsProtocol),
    }
    let status = response.code.unwrap_or(0);
    if status != 101 {
        return Err(Failure::WsHttp(status));
    }
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let upgrade_ok = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"));
    let accept_ok = header("sec-websocket-accept") == Some(expected_accept.as_bytes());
    if upgrade_ok && accept_ok {
        Ok(())
    } else {
        Err(Failure::WsProtocol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_a_proper_upgrade() {
        let accept = derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        let ok = format!(
            "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: {accept}\r\n\r\n"
        );
        assert_eq!(check_upgrade(ok.as_bytes(), &accept), Ok(()));
        assert_eq!(
            check_upgrade(ok.as_bytes(), "wrong"),
            Err(Failure::WsProtocol)
        );
        let denied = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(check_upgrade(denied, &accept), Err(Failure::WsHttp(401)));
        assert_eq!(
            check_upgrade(b"garbage\r\n\r\n", &accept),
            Err(Failure::WsProtocol)
        );
    }

    #[test]
    fn finds_the_end_of_the_head() {
        assert_eq!(find_head_end(b"HTTP/1.1 101 X\r\n\r\n\x81\x02"), Some(18));
        assert_eq!(find_head_end(b"HTTP/1.1 101 X\r\n"), None);
    }
}
