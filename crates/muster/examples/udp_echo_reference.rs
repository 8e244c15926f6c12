//! The physical reference for a match over UDP (bench/matches.sh's ENet figures): a bare echo
//! that does the least a match server must do with the same datagrams — read them in batches
//! with `recvmmsg` and answer each with `OUT_PER_IN` datagrams in batches with `sendmmsg` — and
//! nothing else: no protocol, no session, no match.
//!
//! One server thread on one socket; one client thread with PEERS sockets, each sending IN_BYTES
//! datagrams at RATE_HZ (a player's inputs) and reading its answers. Over SECONDS it counts the
//! server thread's CPU time (from `/proc/thread-self/schedstat`, in nanoseconds) and its
//! datagrams and system calls. Prints JSON: the server's µs of CPU per datagram in (with its
//! answers) and per datagram moved (in or out), and the datagrams per call.
//!
//! Usage: cargo run --release -p muster --example udp_echo_reference --
//!        [PEERS=2000] [RATE_HZ=15] [SECONDS=20] [OUT_PER_IN=2] [IN_BYTES=40] [OUT_BYTES=80]

use std::io::{ErrorKind, IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrIn, SockaddrStorage,
};

const BATCH: usize = 64;

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    datagrams_in: u64,
    datagrams_out: u64,
    recv_calls: u64,
    send_calls: u64,
    cpu_ns: u64,
}

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Echoes until `stop`; counts only between `measure` turning on and `stop`.
fn serve(
    socket: UdpSocket,
    out_per_in: usize,
    out_bytes: usize,
    measure: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Counts {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let fd = socket.as_raw_fd();
    let mut slots = vec![[0u8; 1500]; BATCH];
    let answer = vec![7u8; out_bytes];
    let mut receive = MultiHeaders::<SockaddrIn>::preallocate(BATCH, None);
    let mut send = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut counts = Counts::default();
    let mut started: Option<(u64, Counts)> = None;
    while !stop.load(Ordering::Relaxed) {
        if started.is_none() && measure.load(Ordering::Relaxed) {
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
            Ok(results) => results
                .filter_map(|message| message.address.map(|a| SockaddrStorage::from(*a)))
                .collect(),
            Err(nix::errno::Errno::EAGAIN) => continue,
            Err(error) => panic!("recvmmsg: {error}"),
        };
        counts.recv_calls += 1;
        counts.datagrams_in += from.len() as u64;
        let to: Vec<Option<SockaddrStorage>> = from
            .iter()
            .flat_map(|address| std::iter::repeat_n(Some(*address), out_per_in))
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
            counts.datagrams_out += sent as u64;
        }
    }
    let (cpu_at, at) = started.unwrap_or((thread_cpu_ns(), counts));
    Counts {
        datagrams_in: counts.datagrams_in - at.datagrams_in,
        datagrams_out: counts.datagrams_out - at.datagrams_out,
        recv_calls: counts.recv_calls - at.recv_calls,
        send_calls: counts.send_calls - at.send_calls,
        cpu_ns: thread_cpu_ns() - cpu_at,
    }
}

fn arg(args: &[String], i: usize, default: u64) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let peers = arg(&args, 0, 2000) as usize;
    let rate_hz = arg(&args, 1, 15) as f64;
    let seconds = arg(&args, 2, 20);
    let out_per_in = arg(&args, 3, 2) as usize;
    let in_bytes = arg(&args, 4, 40) as usize;
    let out_bytes = arg(&args, 5, 80) as usize;

    let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let target: SocketAddr = server.local_addr().expect("address");
    let measure = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (measure, stop) = (measure.clone(), stop.clone());
        std::thread::spawn(move || serve(server, out_per_in, out_bytes, measure, stop))
    };

    let clients: Vec<UdpSocket> = (0..peers)
        .map(|_| {
            let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
            socket.set_nonblocking(true).expect("nonblocking");
            socket
        })
        .collect();
    let input = vec![1u8; in_bytes];
    let mut sink = [0u8; 1500];
    let mut answers = 0u64;
    let period = Duration::from_secs_f64(1.0 / rate_hz);
    // One second to settle, then the measured window.
    let begun = Instant::now();
    let window = Duration::from_secs(seconds);
    let mut next = begun;
    let mut measuring = false;
    while begun.elapsed() < window + Duration::from_secs(1) {
        if !measuring && begun.elapsed() >= Duration::from_secs(1) {
            measure.store(true, Ordering::Relaxed);
            measuring = true;
        }
        // Each peer's input for this tick, spread over the tick as players' are.
        for socket in &clients {
            let _ = socket.send_to(&input, target);
        }
        for socket in &clients {
            loop {
                match socket.recv(&mut sink) {
                    Ok(_) => answers += 1,
                    Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => break,
                }
            }
        }
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let counts = echo.join().expect("echo thread");
    let window_s = window.as_secs_f64();
    let cpu_us = counts.cpu_ns as f64 / 1000.0;
    let per = |n: u64| if n == 0 { 0.0 } else { cpu_us / n as f64 };
    println!(
        "{{\"bench\":\"udp_echo_reference\",\"peers\":{peers},\"rateHz\":{rate_hz},\"outPerIn\":{out_per_in},\
\"datagramsInPerSec\":{:.0},\"datagramsOutPerSec\":{:.0},\"answersReadByClients\":{answers},\
\"serverCpuPercent\":{:.1},\"usPerDatagramIn\":{:.3},\"usPerDatagramMoved\":{:.3},\
\"datagramsPerRecvmmsg\":{:.1},\"datagramsPerSendmmsg\":{:.1}}}",
        counts.datagrams_in as f64 / window_s,
        counts.datagrams_out as f64 / window_s,
        cpu_us / 1e6 / window_s * 100.0,
        per(counts.datagrams_in),
        per(counts.datagrams_in + counts.datagrams_out),
        counts.datagrams_in as f64 / counts.recv_calls.max(1) as f64,
        counts.datagrams_out as f64 / counts.send_calls.max(1) as f64,
    );
}
