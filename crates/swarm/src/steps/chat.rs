//! Chat steps (as Nakama's 2M-CCU chat test): `chat_join` puts the player in one of M rooms, `chat`
//! sends random 10–100 byte messages at random intervals and measures how long each message
//! takes to reach every member.
//!
//! ## What is measured, and from when
//!
//! Each message carries its *intended* send time (unix microseconds) in its content,
//! `{"t":1795000000123456,"p":"…"}`. Sends follow a schedule drawn in advance (`start + Σ random
//! intervals`), so when the worker or the server stalls, the overdue messages go out at once and
//! each carries its full delay (no coordinated omission). Every member that receives the message,
//! the sender included (the server sends the sender its own message, as Nakama does), records
//! `chat_delivery` = its clock − `t`; the sender records `chat_ack` = ack received − `t`. Members
//! live in other worker processes, so `t` is wall-clock time, not a process-local `Instant`.
//!
//! ## Why the receive path does not parse JSON
//!
//! At a fanout of 5, a worker receives five messages for each one it sends. A delivery is
//! recognised by the `"channel_message":` key and its timestamp found by searching for `\"t\":`
//! (the content is a JSON string inside the envelope, so its quotes are escaped) and reading the
//! digits after it: no allocation, no JSON parse. Only acks (matched in order, with their cid)
//! and errors are looked at further.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::measure::stats::Metric;
use crate::net::failure::{ws_failure, Failure};
use crate::net::transport::Ws;
use crate::scenario::chat::{BytesRange, ChatStep, JoinStep, SecondsRange};
use crate::steps::ctx::Ctx;
use crate::steps::player::unsolicited;

/// Wall-clock time derived from the monotonic clock: sampled once, so every timestamp a worker
/// writes or compares is on one steady timeline.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    at: Instant,
    unix_us: u64,
}

impl WallClock {
    pub fn now() -> WallClock {
        let unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        WallClock {
            at: Instant::now(),
            unix_us,
        }
    }

    /// Unix microseconds at `instant`.
    pub fn unix_us(&self, instant: Instant) -> u64 {
        match instant.checked_duration_since(self.at) {
            Some(after) => self.unix_us + after.as_micros() as u64,
            None => self
                .unix_us
                .saturating_sub(self.at.duration_since(instant).as_micros() as u64),
        }
    }
}

/// Joins the step's room; returns the channel id to send to.
pub async fn join(
    ctx: &Ctx,
    ws: &mut Ws,
    step: &JoinStep,
    index: u64,
    limit: Duration,
) -> Result<Box<str>, Failure> {
    let mut rng = fastrand::Rng::with_seed(index ^ 0x9e37_79b9_7f4a_7c15);
    let room = step.room(index, &mut rng);
    let envelope = format!(
        r#"{{"cid":"join","channel_join":{{"target":"{room}","type":1,"persistence":{},"hidden":{}}}}}"#,
        step.persistence, step.hidden
    );
    ctx.rec.borrow_mut().count(|c| c.sends += 1);
    ws.send(Message::text(envelope)).await.map_err(ws_failure)?;
    let deadline = Instant::now() + limit;
    loop {
        let msg = match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(msg) => msg,
            Err(_) => return Err(Failure::Timeout("chat_join")),
        };
        if let Some(Ok(Message::Text(text))) = &msg {
            ctx.rec.borrow_mut().count(|c| c.receives += 1);
            let text = text.as_str();
            if cid_of(text) == Some("join") {
                if let Some(code) = error_code(text) {
                    return Err(Failure::ServerError(code));
                }
                return Ok(format!("2...{room}").into_boxed_str());
            }
            continue;
        }
        unsolicited(ctx, ws, msg).await?;
    }
}

/// One message waiting for its ack.
struct Pending {
    cid: u64,
    intended: Instant,
    sent: Instant,
}

/// Sends on the step's random schedule until `until` (or the end of the run), recording acks
/// and deliveries; then waits for the last acks.
///
/// One pinned timer serves every send (reset, not re-created, after each), and ack timeouts are
/// checked when the next message goes out rather than with a timer per message: the loop wakes
/// for every delivery, so it must not create timers for each.
pub async fn run(
    ctx: &Ctx,
    ws: &mut Ws,
    channel_id: &str,
    step: &ChatStep,
    start: Instant,
    index: u64,
    limit: Duration,
) -> Result<(), Failure> {
    let mut rng = fastrand::Rng::with_seed(index.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5851);
    let until = step.duration_s.map(|d| start + d.as_duration());
    let mut next = start + random_interval(&mut rng, step.interval_s);
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut seq: u64 = 0;
    let timer = sleep_until(next);
    tokio::pin!(timer);
    loop {
        if ctx.is_over() {
            return Ok(());
        }
        let sending = until.is_none_or(|u| next < u);
        if !sending {
            break;
        }
        tokio::select! {
            biased;
            _ = ctx.stop.notified() => return Ok(()),
            () = &mut timer => {
                let intended = next;
                next += random_interval(&mut rng, step.interval_s);
                timer.as_mut().reset(next);
                let sent = Instant::now();
                if pending.front().is_some_and(|p| sent > p.sent + limit) {
                    return Err(Failure::Timeout("chat_ack"));
                }
                seq += 1;
                let text = message(channel_id, seq, ctx.clock.unix_us(intended), &mut rng, step.message_bytes);
                {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.latency(Metric::ClientLag, sent.saturating_duration_since(intended));
                    rec.count(|c| {
                        c.sends += 1;
                        c.chat_sent += 1;
                    });
                }
                pending.push_back(Pending { cid: seq, intended, sent });
                ws.send(Message::text(text)).await.map_err(ws_failure)?;
            }
            msg = ws.next() => frame(ctx, ws, msg, &mut pending).await?,
        }
    }
    // Done sending: collect the last acks (deliveries keep being counted meanwhile).
    while let Some(first) = pending.front() {
        let deadline = first.sent + limit;
        tokio::select! {
            biased;
            _ = ctx.stop.notified() => return Ok(()),
            _ = sleep_until(deadline) => return Err(Failure::Timeout("chat_ack")),
            msg = ws.next() => frame(ctx, ws, msg, &mut pending).await?,
        }
    }
    Ok(())
}

async fn frame(
    ctx: &Ctx,
    ws: &mut Ws,
    msg: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    pending: &mut VecDeque<Pending>,
) -> Result<(), Failure> {
    match &msg {
        Some(Ok(Message::Text(text))) => received(ctx, text.as_str(), pending),
        _ => unsolicited(ctx, ws, msg).await,
    }
}

fn random_interval(rng: &mut fastrand::Rng, range: SecondsRange) -> Duration {
    let (low, high) = (range.0 .0, range.1 .0);
    Duration::from_secs_f64(low + (high - low) * rng.f64())
}

/// The `channel_message_send` envelope for message `seq`: content
/// `{"t":<intended unix µs>,"p":"<random letters>"}`.
fn message(
    channel_id: &str,
    seq: u64,
    t: u64,
    rng: &mut fastrand::Rng,
    bytes: BytesRange,
) -> String {
    use std::fmt::Write as _;
    let len = rng.u32(bytes.0..=bytes.1);
    let mut out = String::with_capacity(128 + channel_id.len() + len as usize);
    let _ = write!(
        out,
        r#"{{"cid":"{seq}","channel_message_send":{{"channel_id":"{channel_id}","content":"{{\"t\":{t},\"p\":\""#
    );
    out.extend((0..len).map(|_| rng.alphanumeric()));
    out.push_str(r#"\"}"}}"#);
    out
}

/// Counts `frame` as a chat delivery when it is a `channel_message`, recording its delivery
/// latency; returns whether it was one. Called for every text frame a player receives, in any
/// step: a member that is waiting or heartbeating still receives its room's messages.
pub fn delivery(ctx: &Ctx, frame: &str, now: Instant) -> bool {
    if !frame.contains("\"channel_message\":") {
        return false;
    }
    let mut rec = ctx.rec.borrow_mut();
    rec.count(|c| c.chat_delivered += 1);
    if let Some(t) = sent_at(frame) {
        let latency_us = ctx.clock.unix_us(now).saturating_sub(t);
        rec.latency(Metric::ChatDelivery, Duration::from_micros(latency_us));
    }
    true
}

/// Handles one text frame during the chat step.
fn received(ctx: &Ctx, frame: &str, pending: &mut VecDeque<Pending>) -> Result<(), Failure> {
    let now = Instant::now();
    ctx.rec.borrow_mut().count(|c| c.receives += 1);
    if delivery(ctx, frame, now) {
        return Ok(());
    }
    let Some(cid) = cid_of(frame).and_then(|c| c.parse::<u64>().ok()) else {
        // Presence events and anything else without a numeric cid.
        return Ok(());
    };
    if let Some(code) = error_code(frame) {
        return Err(Failure::ServerError(code));
    }
    // Acks come back in the order the messages were sent.
    while let Some(first) = pending.front() {
        if first.cid > cid {
            break;
        }
        let first = pending.pop_front().expect("front exists");
        if first.cid == cid {
            let mut rec = ctx.rec.borrow_mut();
            rec.latency(
                Metric::ChatAck,
                now.saturating_duration_since(first.intended),
            );
            rec.count(|c| c.chat_acked += 1);
            break;
        }
    }
    Ok(())
}

/// The intended send time in a delivered message's content (`\"t\":<digits>`).
pub fn sent_at(frame: &str) -> Option<u64> {
    const KEY: &str = r#"\"t\":"#;
    let at = frame.find(KEY)? + KEY.len();
    let digits = frame[at..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .try_fold(0u64, |n, d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
    digits.filter(|_| frame.as_bytes().get(at).is_some_and(u8::is_ascii_digit))
}

/// The envelope's `cid`, when it has one.
fn cid_of(frame: &str) -> Option<&str> {
    const KEY: &str = r#""cid":""#;
    let at = frame.find(KEY)? + KEY.len();
    let len = frame[at..].find('"')?;
    Some(&frame[at..at + len])
}

/// The code of an `error` envelope (parsed properly: errors are rare).
fn error_code(frame: &str) -> Option<i64> {
    #[derive(Deserialize)]
    struct WithError {
        error: Option<ErrorBody>,
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        code: i64,
    }
    if !frame.contains("\"error\":") {
        return None;
    }
    serde_json::from_str::<WithError>(frame)
        .ok()
        .and_then(|e| e.error)
        .map(|e| e.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_intended_time_and_are_valid_json() {
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..50 {
            let out = message(
                "2...room-3",
                7,
                1_795_000_000_123_456,
                &mut rng,
                BytesRange(10, 100),
            );
            let envelope: serde_json::Value = serde_json::from_str(&out).expect("JSON");
            assert_eq!(envelope["cid"], "7");
            let send = &envelope["channel_message_send"];
            assert_eq!(send["channel_id"], "2...room-3");
            let content: serde_json::Value =
                serde_json::from_str(send["content"].as_str().expect("string")).expect("object");
            assert_eq!(content["t"], 1_795_000_000_123_456u64);
            let p = content["p"].as_str().expect("text");
            assert!((10..=100).contains(&p.len()), "{}", p.len());
        }
    }

    #[test]
    fn delivery_timestamps_are_found_without_parsing() {
        let frame = r#"{"channel_message":{"channel_id":"2...r","message_id":"x","code":0,"sender_id":"s","username":"u","content":"{\"t\":1795000000123456,\"p\":\"abc\"}","persistent":false}}"#;
        assert_eq!(sent_at(frame), Some(1_795_000_000_123_456));
        assert_eq!(sent_at(r#"{"channel_message":{"content":"{}"}}"#), None);
        assert_eq!(sent_at(r#"{"content":"{\"t\":x}"}"#), None);
        assert_eq!(
            cid_of(r#"{"cid":"42","channel_message_ack":{}}"#),
            Some("42")
        );
        assert_eq!(cid_of(frame), None);
        assert_eq!(
            error_code(r#"{"cid":"3","error":{"code":3,"message":"no"}}"#),
            Some(3)
        );
        assert_eq!(error_code(r#"{"cid":"3","channel_message_ack":{}}"#), None);
    }

    #[test]
    fn wall_clock_maps_instants() {
        let clock = WallClock::now();
        let later = clock.at + Duration::from_millis(1500);
        assert_eq!(clock.unix_us(later), clock.unix_us + 1_500_000);
        let earlier = clock
            .at
            .checked_sub(Duration::from_millis(2))
            .unwrap_or(clock.at);
        assert!(clock.unix_us(earlier) <= clock.unix_us);
    }
}
