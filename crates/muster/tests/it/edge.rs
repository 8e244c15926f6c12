//! The edge under abuse: connections that send nothing, send a request head or body too slowly,
//! or sit idle on keep-alive are closed on time; a flood of them from one address does not keep
//! another client from signing in; a port that is taken stops the start with an error naming
//! its setting.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{metric, muster_command, Database, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A server whose edge timeouts are short, so the test waits little.
async fn server(tune: impl FnOnce(&mut muster::config::Config)) -> (Database, TestServer) {
    let db = Database::new(support::Backend::Sqlite).await;
    let mut config = db.config();
    config.limits.header_read_timeout_ms = 400;
    config.limits.body_read_timeout_ms = 400;
    tune(&mut config);
    let server = TestServer::start(config).await;
    (db, server)
}

/// Reads until the server closes the connection; what it sent and how long that took. Fails
/// the test if the connection is still open after `limit`.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut chunk)).await {
            Err(_) => panic!("still open after {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return (received, started.elapsed()),
            Ok(Ok(n)) => received.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A TCP connection to `addr` from the local address `from` (any 127.x.y.z works on loopback).
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("address"))
        .expect("bind");
    socket.connect(addr).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_slow_head_and_idle_connections_are_closed_on_time() {
    let (_db, server) = server(|_| {}).await;
    let limit = Duration::from_secs(3);

    // Sends nothing at all.
    let mut silent = TcpStream::connect(server.addr).await.expect("connect");
    let (_, took) = until_closed(&mut silent, limit).await;
    assert!(
        took >= Duration::from_millis(300),
        "closed too early: {took:?}"
    );

    // A request line and one header, never the blank line that ends the head.
    let mut slow_head = TcpStream::connect(server.addr).await.expect("connect");
    slow_head
        .write_all(b"GET /healthcheck HTTP/1.1\r\nHost: muster\r\n")
        .await
        .expect("write");
    until_closed(&mut slow_head, limit).await;

    // One whole request, answered, then nothing: an idle keep-alive connection.
    let mut idle = TcpStream::connect(server.addr).await.expect("connect");
    idle.write_all(b"GET /healthcheck HTTP/1.1\r\nHost: muster\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut idle, limit).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "the request was answered before the idle close: {}",
        String::from_utf8_lossy(&answer)
    );

    assert!(
        metric(
            &server,
            "muster_http_connections_closed_total{reason=\"header_timeout\"}"
        )
        .await
            >= 3.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_is_refused_on_time() {
    let (_db, server) = server(|_| {}).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let head = "POST /v2/account/authenticate/device HTTP/1.1\r\nHost: muster\r\n\
                Authorization: Basic ZGVmYXVsdGtleTo=\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\n\r\n{\"id\":";
    stream.write_all(head.as_bytes()).await.expect("write");
    let (answer, took) = until_closed(&mut stream, Duration::from_secs(5)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_from_one_address_does_not_lock_others_out() {
    let (_db, server) = server(|config| {
        // Long enough that the flood is still held while the other client signs in.
        config.limits.header_read_timeout_ms = 20_000;
        config.limits.max_connections_per_ip = 100;
    })
    .await;
    let mut flood = Vec::new();
    for _ in 0..300 {
        flood.push(connect_from("127.0.0.2", server.addr).await);
    }
    // Past the per-address cap, connections are closed as soon as they are accepted.
    support::eventually("the flood past the cap refused", || async {
        metric(
            &server,
            "muster_connections_refused_total{limit=\"per_ip\"}",
        )
        .await
            >= 200.0
    })
    .await;
    // Another client is served at once, while the flood is held.
    let started = Instant::now();
    let (status, body) = server
        .authenticate("device", "create=true", json!({"id": "device-after-flood"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        metric(&server, "muster_http_connections_open").await >= 100.0,
        "the flood's first 100 are held (until their head timeout), not refused"
    );
    drop(flood);
}

/// The binary on `db` with its output captured.
fn binary(db: &Database) -> std::process::Command {
    let mut command = muster_command(db);
    command
        // At info level, so that an announcement made too early would show.
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_stops_the_start_naming_its_setting() {
    let db = Database::new(support::Backend::Sqlite).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();

    let output = binary(&db)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("setting listen"), "{stderr}");

    let output = binary(&db)
        .env("MUSTER_ROOMS__TCP_LISTEN", format!("127.0.0.1:{port}"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("setting rooms.tcp_listen"), "{stderr}");
    assert!(
        !stderr.contains("muster listening"),
        "nothing is announced before every listener is bound: {stderr}"
    );
}
