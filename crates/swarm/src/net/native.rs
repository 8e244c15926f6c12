//! Muster's native TCP transport, client side: protobuf envelopes in length-delimited frames
//! ([`muster_proto::frame`]), from the worker's source address. A connection owns its socket and
//! a read buffer that holds at most the frames not yet consumed (a few dozen bytes between
//! reads), so an idle connection costs little more than the socket.

use std::net::{IpAddr, SocketAddr};

use muster_proto::frame;
use muster_proto::realtime::{self, Envelope};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::failure::{tcp_failure, Failure};
use super::transport::connect_game;

/// Largest frame accepted from the server.
const MAX_FRAME: usize = 64 * 1024;

pub struct Native {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Native {
    /// Connects to `addr`, binding to `source` first when given.
    pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> Result<Native, Failure> {
        Ok(Native {
            stream: connect_game(addr, source).await?,
            buf: Vec::new(),
        })
    }

    pub async fn send(&mut self, envelope: &Envelope) -> Result<(), Failure> {
        let mut out = Vec::with_capacity(64);
        frame::encode_frame(envelope, &mut out);
        self.stream.write_all(&out).await.map_err(tcp_failure)
    }

    /// The next envelope. Cancel-safe: bytes read before a cancellation stay in the buffer.
    pub async fn recv(&mut self) -> Result<Envelope, Failure> {
        loop {
            match frame::next_frame(&self.buf, MAX_FRAME) {
                Ok(Some((header, body))) => {
                    let decoded = realtime::decode_protobuf(&self.buf[header..header + body]);
                    self.buf.drain(..header + body);
                    if self.buf.is_empty() {
                        // Keep no buffer between bursts.
                        self.buf = Vec::new();
                    }
                    return decoded.map_err(|_| Failure::TcpIo);
                }
                Ok(None) => {}
                Err(_) => return Err(Failure::TcpIo),
            }
            let mut chunk = [0u8; 512];
            let n = self.stream.read(&mut chunk).await.map_err(tcp_failure)?;
            if n == 0 {
                return Err(Failure::TcpClosed);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        let _ = self.stream.shutdown().await;
    }
}
