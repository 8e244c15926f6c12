//! Rooms run by a studio's own line-based game server (`room_connect` with
//! `protocol = "lines"`, then `replay`): Hathora's flow against Muster's process rooms.
//!
//! Joining sends `TICKET <ticket>` and waits for `WELCOME …`. Replaying sends each recorded
//! message on its connection at its recorded time as one line,
//! `<conn> <seq> <t_us> <op> <data in base64>`, where `t_us` is the intended send time in
//! microseconds since the replay began. The game server relays every line to the room's other
//! players (prefixing whatever it likes: only the last four fields are read), so each of the
//! player's connections receives what the others sent; metric `relay` is the time from a
//! line's intended send to its arrival, on the worker's one clock.

use std::time::Duration;

use base64::Engine as _;
use tokio::time::{sleep_until, timeout_at, Instant};

use super::ctx::Ctx;
use super::game::{count_receive, count_send};
use crate::measure::stats::Metric;
use crate::net::failure::Failure;
use crate::net::lines::Lines;
use crate::scenario::replay::{Record, Replay};

/// Connects to a line-based game server at `addr` and joins with `ticket`.
pub async fn join_lines(
    ctx: &Ctx,
    addr: std::net::SocketAddr,
    ticket: &str,
    deadline: Instant,
) -> Result<Lines, Failure> {
    let mut conn = timeout_at(deadline, Lines::connect(addr, ctx.source_ip))
        .await
        .map_err(|_| Failure::Timeout("connect"))??;
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.count(|c| c.connects += 1);
        rec.ccu += 1;
        rec.peak_ccu = rec.peak_ccu.max(rec.ccu);
    }
    count_send(ctx);
    let joined = async {
        conn.send(&format!("TICKET {ticket}")).await?;
        let answer = timeout_at(deadline, conn.recv())
            .await
            .map_err(|_| Failure::Timeout("join"))??;
        count_receive(ctx);
        if answer.starts_with("WELCOME") {
            Ok(())
        } else {
            Err(Failure::GameDenied)
        }
    }
    .await;
    match joined {
        Ok(()) => Ok(conn),
        Err(failure) => {
            conn.close().await;
            crate::steps::player::socket_gone(ctx);
            Err(failure)
        }
    }
}

/// Replays `replay` over `conns` (recorded connection `c` on `conns[i]` where
/// `i % replay.connections == c`) and waits until every connection has received what the
/// others sent, or `limit` after a line's intended send time has passed without it.
pub async fn replay_lines(
    ctx: &Ctx,
    conns: &mut [Lines],
    replay: &Replay,
    limit: Duration,
) -> Result<(), Failure> {
    let base = Instant::now();
    let recorded = replay.connections.max(1);
    let mine: Vec<Vec<&Record>> = (0..conns.len() as u32)
        .map(|i| {
            replay
                .records
                .iter()
                .filter(|r| r.conn == i % recorded)
                .collect()
        })
        .collect();
    let runs = conns.iter_mut().enumerate().map(|(i, conn)| {
        // When each line owed to this connection is due: the others' send times, in order.
        let mut owed: Vec<Duration> = mine
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, records)| records.iter().map(|r| r.at))
            .collect();
        owed.sort();
        replay_one(
            ctx,
            conn,
            One {
                index: i as u32,
                records: &mine[i],
                owed,
                base,
                limit,
            },
        )
    });
    for result in futures_util::future::join_all(runs).await {
        result?;
    }
    Ok(())
}

/// What one connection sends and expects.
struct One<'a> {
    index: u32,
    records: &'a [&'a Record],
    /// The intended send times of the lines the other connections send, which the server
    /// relays to this one, in order.
    owed: Vec<Duration>,
    base: Instant,
    limit: Duration,
}

async fn replay_one(ctx: &Ctx, conn: &mut Lines, p: One<'_>) -> Result<(), Failure> {
    let mut sent = 0usize;
    let mut received = 0usize;
    let mut last_send: Option<Instant> = None;
    loop {
        let sending = sent < p.records.len();
        if !sending && received >= p.owed.len() {
            return Ok(());
        }
        if ctx.is_over() {
            return Ok(());
        }
        let next = p.records.get(sent).map(|r| p.base + r.at).unwrap_or(p.base);
        // The next line owed to us is lost once `limit` has passed since it was due.
        let give_up = p.owed.get(received).map(|at| p.base + *at + p.limit);
        tokio::select! {
            biased;
            () = ctx.stop.notified() => return Ok(()),
            () = sleep_until(give_up.unwrap_or(next)), if give_up.is_some_and(|g| !sending || g <= next) => {
                return Err(Failure::Timeout("relay"));
            }
            () = sleep_until(next), if sending => {
                let r = p.records[sent];
                sent += 1;
                let now = Instant::now();
                {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.latency(Metric::ClientLag, now.saturating_duration_since(next));
                    if let Some(last) = last_send {
                        rec.latency(Metric::ClientInterval, now - last);
                    }
                }
                last_send = Some(now);
                let line = format!(
                    "{} {} {} {} {}",
                    p.index,
                    sent,
                    r.at.as_micros(),
                    r.op,
                    base64::engine::general_purpose::STANDARD.encode(&r.data)
                );
                count_send(ctx);
                conn.send(&line).await?;
            }
            line = conn.recv() => {
                let line = line?;
                count_receive(ctx);
                let now = Instant::now();
                // `… <conn> <seq> <t_us> <op> <data>`: the third field from the end.
                let sent_us = line
                    .split_whitespace()
                    .rev()
                    .nth(2)
                    .and_then(|t| t.parse::<u64>().ok());
                if let Some(us) = sent_us {
                    received += 1;
                    let intended = p.base + Duration::from_micros(us);
                    ctx.rec
                        .borrow_mut()
                        .latency(Metric::Relay, now.saturating_duration_since(intended));
                }
            }
        }
    }
}
