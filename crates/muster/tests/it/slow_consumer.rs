//! The slow-consumer policy: a member that stops reading is cut off (its outgoing queue is
//! bounded; past it the socket is closed with 1008 and counted), the others keep receiving every
//! message, and the server's memory stays bounded while megabytes are fanned out toward the
//! stalled socket. The server is the real binary in a process of its own, so the memory measured
//! is the server's alone.

use crate::support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{device_session_at, metric_at, Binary, Database};
use tokio_tungstenite::tungstenite::Message;

/// Resident memory of the server's process, KiB.
fn rss_kb(server: &Binary) -> u64 {
    std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Reads frames until the one answering `cid`; everything else is dropped unread.
async fn answer<S>(socket: &mut S, cid: &str) -> Value
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let value = support::next_json(socket).await;
        if value["cid"] == cid {
            return value;
        }
    }
}

const MESSAGES: usize = 6000;
const CONTENT_BYTES: usize = 2500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_reading_is_cut_off_and_memory_stays_bounded() {
    let db = Database::new(support::Backend::Sqlite).await;
    let mut command = support::muster_command(&db);
    command
        .env("MUSTER_SOCKET__OUTGOING_QUEUE_SIZE", "16")
        .env("MUSTER_CHAT__MESSAGES_PER_SEC", "0")
        .env("MUSTER_CHAT__MAX_CONTENT_BYTES", "3000");
    let server = Binary::run(command, support::free_port()).await;
    let base = server.base();
    let ws_url = |token: &str| {
        format!(
            "ws://127.0.0.1:{}/ws?token={token}&format=json",
            server.port
        )
    };
    let metric = |name: &'static str| metric_at(&base, name);
    let join = |cid: &str| {
        json!({"cid": cid, "channel_join": {"target": "firehose", "type": 1, "persistence": false}})
            .to_string()
    };

    // The stalled member: a small receive buffer, so the kernel holds little on its behalf and
    // the server's queue is what fills.
    let (token, _) = device_session_at(&base, "device-slow-stalled").await;
    let tcp = tokio::net::TcpSocket::new_v4().expect("socket");
    tcp.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let address = ([127, 0, 0, 1], server.port).into();
    let stream = tcp.connect(address).await.expect("connect");
    let (mut stalled, _) = tokio_tungstenite::client_async(ws_url(&token), stream)
        .await
        .expect("upgrade");
    stalled.send(Message::text(join("1"))).await.expect("join");
    assert!(answer(&mut stalled, "1").await.get("channel").is_some());

    // A member that reads everything, counting the messages.
    let (token, _) = device_session_at(&base, "device-slow-reader").await;
    let (mut reader, _) = tokio_tungstenite::connect_async(ws_url(&token))
        .await
        .expect("connect");
    reader.send(Message::text(join("1"))).await.expect("join");
    assert!(answer(&mut reader, "1").await.get("channel").is_some());
    // The reader reports its count so the sender can wait for it: under load (CI's box) a reader
    // left behind by a whole queue would itself be cut off as a slow consumer, which is the policy
    // working, not what this test is about.
    let (progress, mut reader_progress) = tokio::sync::watch::channel(0usize);
    let counting = tokio::spawn(async move {
        let mut received = 0;
        while received < MESSAGES {
            let frame = tokio::time::timeout(Duration::from_secs(20), reader.next())
                .await
                .expect("the reader keeps receiving")
                .expect("open")
                .expect("frame");
            if let Message::Text(text) = frame {
                if text.starts_with("{\"channel_message\":") {
                    received += 1;
                    progress.send_replace(received);
                }
            }
        }
        // Handed back so the reader stays a member until the checks are done.
        (received, reader)
    });

    let (token, _) = device_session_at(&base, "device-slow-sender").await;
    let (mut sender, _) = tokio_tungstenite::connect_async(ws_url(&token))
        .await
        .expect("connect");
    sender.send(Message::text(join("1"))).await.expect("join");
    assert!(answer(&mut sender, "1").await.get("channel").is_some());

    let before_kb = rss_kb(&server);
    let content = json!({ "text": "x".repeat(CONTENT_BYTES) }).to_string();
    for i in 0..MESSAGES {
        let cid = format!("m{i}");
        let envelope = json!({"cid": cid, "channel_message_send": {"channel_id": "2...firehose", "content": content}});
        sender
            .send(Message::text(envelope.to_string()))
            .await
            .expect("send");
        let reply = answer(&mut sender, &cid).await;
        assert!(reply.get("channel_message_ack").is_some(), "{reply}");
        tokio::time::timeout(
            Duration::from_secs(20),
            reader_progress.wait_for(|&received| received > i),
        )
        .await
        .expect("the reader keeps up")
        .expect("the reader is still counting");
    }
    let after_kb = rss_kb(&server);

    // About 15 MB went out toward the stalled member; what the server held for it is bounded
    // by its queue (16 messages), not by what was sent.
    let fanned_out_kb = (MESSAGES * CONTENT_BYTES / 1024) as u64;
    let grown_kb = after_kb.saturating_sub(before_kb);
    eprintln!("RSS grew {grown_kb} KiB; {fanned_out_kb} KiB fanned out to the stalled socket");
    assert!(
        grown_kb < fanned_out_kb / 3,
        "RSS grew {grown_kb} KiB while {fanned_out_kb} KiB were sent toward a stalled socket"
    );

    let (received, _reader) = counting.await.expect("reader");
    assert_eq!(
        received, MESSAGES,
        "the member that reads got every message"
    );
    assert_eq!(
        metric("muster_sockets_closed_total{reason=\"queue_full\"}").await,
        1.0
    );
    assert_eq!(metric("muster_outgoing_queue_full_total").await, 1.0);
    assert!(metric("muster_chat_deliveries_dropped_total").await >= 1.0);
    assert_eq!(
        metric("muster_chat_members").await,
        2.0,
        "the stalled socket left the channel"
    );
    // When it reads again it finds what the kernel held, then the close frame saying why.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stalled.next().await {
                None | Some(Err(_)) => return None,
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
            }
        }
    })
    .await
    .expect("the stalled socket was closed");
    assert_eq!(
        ended,
        Some(1008),
        "the slow consumer is told why it was cut off (1008), not dropped"
    );
}
