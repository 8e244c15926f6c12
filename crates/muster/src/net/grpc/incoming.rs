//! The gRPC listener's connections: accepted, admitted by the edge's [`ConnectionCounter`] (a
//! connection over a cap is closed at once, as on the HTTP listener), and each holding its slot
//! until it closes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::net::connection::accept_backoff;
use crate::net::connections::{ConnectionCounter, Held};

/// A connection and its slot under the caps.
pub struct Admitted {
    stream: TcpStream,
    _held: Held,
}

impl Connected for Admitted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The connections `listener` accepts and `counter` admits, until `stop` is cancelled.
pub fn admitted(
    listener: TcpListener,
    counter: Arc<ConnectionCounter>,
    stop: CancellationToken,
) -> impl Stream<Item = io::Result<Admitted>> {
    futures_util::stream::unfold(
        (listener, counter, stop, 0u32),
        |(listener, counter, stop, mut failures)| async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return None,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok((stream, peer)) => {
                        failures = 0;
                        // Over a cap: dropping the stream closes it (the counter counts it).
                        let Ok(held) = counter.admit(peer.ip()) else {
                            continue;
                        };
                        // Small HTTP/2 frames go out at once (tonic's own `tcp_nodelay` is for
                        // the listeners it accepts on itself, not this stream).
                        let _ = stream.set_nodelay(true);
                        let admitted = Admitted {
                            stream,
                            _held: held,
                        };
                        return Some((Ok(admitted), (listener, counter, stop, failures)));
                    }
                    Err(error) => {
                        failures += 1;
                        accept_backoff(&error, failures).await;
                    }
                }
            }
        },
    )
}
