//! The physical references for a match's transport (bench/matches.sh): the least a match server
//! must do with the same messages, and nothing else — no protocol, no session, no match.
//!
//! - `udp`: one socket read in batches with `recvmmsg`; each datagram answered with `OUT_PER_IN`
//!   datagrams, written in batches with `sendmmsg` (the bare echo ENet is measured against);
//! - `tcp`: one connection per peer on tokio (one task each, as Muster's TCP transport), each
//!   input read and answered with `OUT_PER_IN` messages in one write.
//!
//! The server runs on one thread (tokio's current-thread runtime for `tcp`); one client thread
//! holds PEERS sockets, each sending an IN_BYTES input at RATE_HZ (a player's inputs) and reading
//! its answers. After a second to settle, over SECONDS it counts the server thread's CPU time
//! (`/proc/thread-self/schedstat`, nanoseconds) and the messages it moved. Prints JSON: the
//! server's µs of CPU per input (with its answers: a player-tick's work), per message moved (in
//! or out), and for `udp` the datagrams per system call.
//!
//! Usage: cargo run --release -p muster --example transport_reference --
//!        MODE [PEERS=2000] [RATE_HZ=15] [SECONDS=20] [OUT_PER_IN=2] [IN_BYTES=40] [OUT_BYTES=80]

use std::io::{ErrorKind, IoSlice, IoSliceMut, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    recvmmsg, sendmmsg, sockopt, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const BATCH: usize = 64;

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    messages_in: u64,
    messages_out: u64,
    recv_calls: u64,
    send_calls: u64,
}

struct Settings {
    out_per_in: usize,
    in_bytes: usize,
    out_bytes: usize,
}

/// The server's side of the run: when to start counting, when to stop.
struct Clock {
    measure: AtomicBool,
    stop: AtomicBool,
}

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Echoes datagrams until stopped; returns the counts and CPU of the measured window.
fn serve_udp(socket: UdpSocket, settings: &Settings, clock: &Clock) -> (Counts, u64) {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    // The kernel buffers Muster's ENet socket asks for (`enet.socket_buffer_bytes`).
    let _ = nix::sys::socket::setsockopt(&socket, sockopt::RcvBuf, &(4 << 20));
    let _ = nix::sys::socket::setsockopt(&socket, sockopt::SndBuf, &(4 << 20));
    let fd = socket.as_raw_fd();
    let mut slots = vec![[0u8; 1500]; BATCH];
    let answer = vec![7u8; settings.out_bytes];
    let mut receive = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut counts = Counts::default();
    let mut started: Option<(u64, Counts)> = None;
    while !clock.stop.load(Ordering::Relaxed) {
        if started.is_none() && clock.measure.load(Ordering::Relaxed) {
            started = Some((thread_cpu_ns(), counts));
        }
        let mut buffers: Vec<[IoSliceMut; 1]> = slots
            .iter_mut()
            .map(|slot| [IoSliceMut::new(&mut slot[..])])
            .collect();
        // Blocks for the first datagram (up to the read timeout), then takes what waits.
        let from: Vec<SockaddrStorage> = match recvmmsg(
            fd,
            &mut receive,
            buffers.iter_mut(),
            MsgFlags::MSG_WAITFORONE,
            None,
        ) {
            Ok(results) => results.filter_map(|message| message.address).collect(),
            Err(nix::errno::Errno::EAGAIN) => continue,
            Err(error) => panic!("recvmmsg: {error}"),
        };
        counts.recv_calls += 1;
        counts.messages_in += from.len() as u64;
        let to: Vec<Option<SockaddrStorage>> = from
            .iter()
            .flat_map(|address| std::iter::repeat_n(Some(*address), settings.out_per_in))
            .collect();
        for chunk in to.chunks(BATCH) {
            let slices: Vec<[IoSlice; 1]> = chunk.iter().map(|_| [IoSlice::new(&answer)]).collect();
            let sent = sendmmsg(
                fd,
                &mut send,
                slices.iter(),
                chunk,
                [] as [ControlMessage; 0],
                MsgFlags::empty(),
            )
            .map(|results| results.count())
            .unwrap_or(0);
            counts.send_calls += 1;
            counts.messages_out += sent as u64;
        }
    }
    let (cpu_at, at) = started.unwrap_or((thread_cpu_ns(), counts));
    (minus(counts, at), thread_cpu_ns() - cpu_at)
}

fn minus(a: Counts, b: Counts) -> Counts {
    Counts {
        messages_in: a.messages_in - b.messages_in,
        messages_out: a.messages_out - b.messages_out,
        recv_calls: a.recv_calls - b.recv_calls,
        send_calls: a.send_calls - b.send_calls,
    }
}

/// Answers each connection's inputs on one thread (a current-thread tokio runtime, a task per
/// connection) until stopped; returns the counts and CPU of the measured window.
fn serve_tcp(
    listener: std::net::TcpListener,
    peers: usize,
    settings: &Settings,
    clock: &Clock,
) -> (Counts, u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let inputs = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let answer = Arc::new(vec![7u8; settings.out_bytes * settings.out_per_in]);
    let in_bytes = settings.in_bytes;
    runtime.block_on(async {
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        for _ in 0..peers {
            let (mut stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).expect("nodelay");
            let (inputs, answer) = (inputs.clone(), answer.clone());
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let mut held = 0;
                loop {
                    match stream.read(&mut buffer[held..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => held += n,
                    }
                    let whole = held / in_bytes;
                    for _ in 0..whole {
                        if stream.write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                    inputs.fetch_add(whole as u64, Ordering::Relaxed);
                    buffer.copy_within(whole * in_bytes..held, 0);
                    held -= whole * in_bytes;
                }
            });
        }
        while !clock.measure.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (cpu_at, at) = (thread_cpu_ns(), inputs.load(Ordering::Relaxed));
        while !clock.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let handled = inputs.load(Ordering::Relaxed) - at;
        let counts = Counts {
            messages_in: handled,
            messages_out: handled * settings.out_per_in as u64,
            recv_calls: 0,
            send_calls: 0,
        };
        (counts, thread_cpu_ns() - cpu_at)
    })
}

/// A client's socket: sends an input, reads whatever answers wait.
enum Client {
    Udp(UdpSocket, SocketAddr),
    Tcp(TcpStream),
}

impl Client {
    fn send(&mut self, input: &[u8]) {
        let _ = match self {
            Client::Udp(socket, to) => socket.send_to(input, *to),
            Client::Tcp(stream) => stream.write(input),
        };
    }

    fn drain(&mut self, sink: &mut [u8]) -> u64 {
        let mut bytes = 0;
        loop {
            let read = match self {
                Client::Udp(socket, _) => socket.recv(sink),
                Client::Tcp(stream) => stream.read(sink),
            };
            match read {
                Ok(0) => return bytes,
                Ok(n) => bytes += n as u64,
                Err(error) if error.kind() == ErrorKind::WouldBlock => return bytes,
                Err(_) => return bytes,
            }
        }
    }
}

fn arg(args: &[String], i: usize, default: u64) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("udp").to_owned();
    let peers = arg(&args, 1, 2000) as usize;
    let rate_hz = arg(&args, 2, 15) as f64;
    let seconds = arg(&args, 3, 20);
    let settings = Settings {
        out_per_in: arg(&args, 4, 2) as usize,
        in_bytes: arg(&args, 5, 40) as usize,
        out_bytes: arg(&args, 6, 80) as usize,
    };
    let (out_per_in, in_bytes) = (settings.out_per_in, settings.in_bytes);
    let clock = Arc::new(Clock {
        measure: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });

    let (server, mut clients): (std::thread::JoinHandle<(Counts, u64)>, Vec<Client>) = match mode
        .as_str()
    {
        "udp" => {
            let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
            let target = socket.local_addr().expect("address");
            let clock = clock.clone();
            let server = std::thread::spawn(move || serve_udp(socket, &settings, &clock));
            let clients = (0..peers)
                .map(|_| {
                    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
                    socket.set_nonblocking(true).expect("nonblocking");
                    Client::Udp(socket, target)
                })
                .collect();
            (server, clients)
        }
        "tcp" => {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let target = listener.local_addr().expect("address");
            let clock = clock.clone();
            let server = std::thread::spawn(move || serve_tcp(listener, peers, &settings, &clock));
            let clients = (0..peers)
                .map(|_| {
                    let stream = TcpStream::connect(target).expect("connect");
                    stream.set_nodelay(true).expect("nodelay");
                    stream.set_nonblocking(true).expect("nonblocking");
                    Client::Tcp(stream)
                })
                .collect();
            (server, clients)
        }
        other => panic!("unknown mode {other}: use udp or tcp"),
    };
    let input = vec![1u8; in_bytes];
    let mut sink = [0u8; 65536];
    let mut answered_bytes = 0u64;
    let period = Duration::from_secs_f64(1.0 / rate_hz);
    let begun = Instant::now();
    let window = Duration::from_secs(seconds);
    let mut next = begun;
    while begun.elapsed() < window + Duration::from_secs(1) {
        if begun.elapsed() >= Duration::from_secs(1) {
            clock.measure.store(true, Ordering::Relaxed);
        }
        for client in &mut clients {
            client.send(&input);
        }
        for client in &mut clients {
            answered_bytes += client.drain(&mut sink);
        }
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    clock.stop.store(true, Ordering::Relaxed);
    let (counts, cpu_ns) = server.join().expect("server thread");
    let window_s = window.as_secs_f64();
    let cpu_us = cpu_ns as f64 / 1000.0;
    let per = |n: u64| if n == 0 { 0.0 } else { cpu_us / n as f64 };
    let per_call = |n: u64, calls: u64| {
        if calls == 0 {
            "null".to_owned()
        } else {
            format!("{:.1}", n as f64 / calls as f64)
        }
    };
    println!(
        "{{\"bench\":\"transport_reference\",\"mode\":\"{mode}\",\"peers\":{peers},\"rateHz\":{rate_hz},\
\"outPerIn\":{out_per_in},\"inputsPerSec\":{:.0},\"answersPerSec\":{:.0},\"answeredBytesReadByClients\":{answered_bytes},\
\"serverCpuPercent\":{:.1},\"usPerInput\":{:.3},\"usPerMessageMoved\":{:.3},\
\"datagramsPerRecvmmsg\":{},\"datagramsPerSendmmsg\":{}}}",
        counts.messages_in as f64 / window_s,
        counts.messages_out as f64 / window_s,
        cpu_us / 1e6 / window_s * 100.0,
        per(counts.messages_in),
        per(counts.messages_in + counts.messages_out),
        per_call(counts.messages_in, counts.recv_calls),
        per_call(counts.messages_out, counts.send_calls),
    );
}
