//! A line-based game server's TCP connection, client side: what a studio's own headless server
//! (run by Muster's fleet as a process room) speaks in the simplest case, and what
//! `clients/fleet-server/relay.py` speaks. Each message is one line ending in `\n`.
//!
//! The join is the first line, `TICKET <ticket>`, answered by a line starting with `WELCOME`
//! (joined) or `DENIED` (refused, then closed).

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::failure::{tcp_failure, Failure};
use super::transport::connect_game;

/// Longest line accepted from the server (a longer one is a protocol error, not a buffer that
/// grows without bound).
const MAX_LINE: usize = 64 * 1024;

pub struct Lines {
    stream: TcpStream,
    /// Bytes read and not yet returned as a line.
    buf: Vec<u8>,
}

impl Lines {
    /// Connects to `addr`, binding to `source` first when given.
    pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> Result<Lines, Failure> {
        Ok(Lines {
            stream: connect_game(addr, source).await?,
            buf: Vec::new(),
        })
    }

    /// Sends `line` (without its `\n`, which is added).
    pub async fn send(&mut self, line: &str) -> Result<(), Failure> {
        let mut out = Vec::with_capacity(line.len() + 1);
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        self.stream.write_all(&out).await.map_err(tcp_failure)
    }

    /// The next line, without its `\n` (or `\r\n`). Cancel-safe: bytes read before a
    /// cancellation stay in the buffer.
    pub async fn recv(&mut self) -> Result<String, Failure> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if self.buf.is_empty() {
                    self.buf = Vec::new();
                }
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if self.buf.len() > MAX_LINE {
                return Err(Failure::TcpIo);
            }
            let mut chunk = [0u8; 1024];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_across_reads_and_bounded() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"WELCOME u1\r\nhel").await.unwrap();
            s.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            s.write_all(b"lo\n").await.unwrap();
            s.write_all(&vec![b'x'; MAX_LINE + 2048]).await.unwrap();
            s
        });
        let mut c = Lines::connect(addr, None).await.unwrap();
        assert_eq!(c.recv().await.unwrap(), "WELCOME u1");
        assert_eq!(c.recv().await.unwrap(), "hello");
        assert_eq!(c.recv().await, Err(Failure::TcpIo));
        drop(server.await.unwrap());
    }
}
