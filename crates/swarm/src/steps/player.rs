//! One simulated player: a small state machine that walks the scenario's steps.
//!
//! A player is one task on its worker's single-threaded runtime. While idle (heartbeat or wait)
//! it is parked in one `select!` over its socket, one timer and the worker's stop signal, and owns
//! only its socket and a few words, so an idle player costs about 1–2 KiB of worker memory (the
//! WebSocket read/write buffers are shrunk to
//! [`WS_BUFFER`](crate::net::transport::WS_BUFFER)). The heavy, short-lived futures
//! (the HTTP request, the WebSocket handshake) are boxed so their size is paid only while they run,
//! not for the whole life of the task.
//!
//! Latency is always measured from the *intended* time of an action (the player's scheduled
//! arrival, the previous step's end, or the heartbeat's fixed schedule), never from when the
//! client got around to sending: a stalled server or a saturated worker cannot hide its stalls
//! (no coordinated omission). A player stops at its first failure, which is counted by kind.

use std::borrow::Cow;
use std::rc::Rc;
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;
use tokio::time::{sleep_until, timeout, timeout_at, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::measure::stats::Metric;
use crate::net::failure::{http_failure, ws_failure, Failure};
use crate::net::grpc::GrpcCall;
use crate::net::transport::{self, ws_config_with, Ws};
use crate::scenario::{Api, SocketFormat, Step};
use crate::steps::ctx::Ctx;

/// The parts of a realtime envelope a player looks at; everything else is ignored.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    cid: Option<Cow<'a, str>>,
    pong: Option<serde::de::IgnoredAny>,
    rpc: Option<serde::de::IgnoredAny>,
    error: Option<EnvelopeError>,
}

/// The kind of answer a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Pong,
    Rpc,
}

#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(default)]
    code: i64,
}

/// The session part of the authenticate response.
#[derive(Deserialize)]
struct Session {
    token: String,
}

/// How an idle wait ended.
pub(crate) enum Wake {
    Deadline,
    Stop,
}

/// A player's state between steps.
struct Player {
    index: u64,
    /// Session token, kept only while a later step still needs it.
    token: Option<Box<str>>,
    ws: Option<Ws>,
    /// What the socket's frames carry.
    format: SocketFormat,
    /// The chat channel joined last (`chat_join`), where `chat` sends.
    channel: Option<Box<str>>,
    /// When the next action is intended to happen.
    next: Instant,
    /// Match and room state (boxed: most scenarios never use it).
    game: Option<Box<crate::steps::game::Game>>,
    /// Storage objects and leaderboard records written so far (boxed: made on first write).
    written: Option<Box<crate::steps::paced::Written>>,
}

/// Runs one player from its intended arrival to its end, recording everything in the worker's
/// recorder, and accounts for it exactly once as successful or failed.
pub async fn run(ctx: Rc<Ctx>, index: u64, arrival: Instant) {
    ctx.rec.borrow_mut().count(|c| c.arrivals += 1);
    let mut p = Player {
        index,
        token: None,
        ws: None,
        format: SocketFormat::Json,
        channel: None,
        next: arrival,
        game: None,
        written: None,
    };
    let mut result = p.play(&ctx).await;
    if let Some(game) = p.game.as_mut() {
        game.close(&ctx).await;
    }
    if let Some(ws) = p.ws.take() {
        if result.is_ok() {
            // Steps done or run over with the socket open: the harness closes it. This teardown
            // is not a scenario step, so a server that drops the connection instead of answering
            // the close is counted (`closesUnanswered`) but does not fail the player; any other
            // failure here (a timeout, a reset) does.
            result = match Box::pin(close(&ctx, ws, ctx.default_timeout)).await {
                Err(Failure::CloseUnanswered) => {
                    ctx.rec.borrow_mut().count(|c| c.closes_unanswered += 1);
                    Ok(())
                }
                other => other,
            };
        } else {
            drop(ws);
            socket_gone(&ctx);
        }
    }
    {
        let mut rec = ctx.rec.borrow_mut();
        match &result {
            Ok(()) => rec.successful += 1,
            Err(f) => {
                rec.failed += 1;
                rec.failure(&f.kind());
            }
        }
    }
    ctx.player_done();
}

pub(crate) fn socket_gone(ctx: &Ctx) {
    let mut rec = ctx.rec.borrow_mut();
    rec.ccu = rec.ccu.saturating_sub(1);
    rec.count(|c| c.disconnects += 1);
}

impl Player {
    async fn play(&mut self, ctx: &Ctx) -> Result<(), Failure> {
        for (i, step) in ctx.steps.iter().enumerate() {
            if ctx.is_over() {
                return Ok(());
            }
            let limit = |t: &Option<crate::scenario::Seconds>| {
                t.map(|s| s.as_duration()).unwrap_or(ctx.default_timeout)
            };
            match step {
                Step::Authenticate {
                    create,
                    reuse_accounts,
                    api,
                    timeout_s,
                } => {
                    let device = if *reuse_accounts {
                        format!("swarm-player-{:010}", self.index)
                    } else {
                        format!("swarm-{}-{:010}", ctx.run_tag, self.index)
                    };
                    let token = Box::pin(authenticate(
                        ctx,
                        self.index,
                        device,
                        *create,
                        *api,
                        limit(timeout_s),
                    ))
                    .await?;
                    let done = Instant::now();
                    ctx.rec.borrow_mut().latency(Metric::Auth, done - self.next);
                    self.token = Some(token.into_boxed_str());
                    self.next = done;
                }
                Step::Connect { format, timeout_s } => {
                    let token = self.token.as_deref().unwrap_or_default();
                    let ws = Box::pin(open_socket(ctx, token, *format, limit(timeout_s))).await?;
                    let done = Instant::now();
                    {
                        let mut rec = ctx.rec.borrow_mut();
                        rec.latency(Metric::Connect, done - self.next);
                        rec.count(|c| c.connects += 1);
                        rec.ccu += 1;
                        rec.peak_ccu = rec.peak_ccu.max(rec.ccu);
                    }
                    self.ws = Some(ws);
                    self.format = *format;
                    if !ctx.token_needed_after.get(i).copied().unwrap_or(true) {
                        self.token = None;
                    }
                    self.next = done;
                }
                Step::Heartbeat {
                    interval_s,
                    duration_s,
                    timeout_s,
                } => {
                    let Some(ws) = self.ws.as_mut() else {
                        return Err(Failure::WsEof);
                    };
                    let until = duration_s.map(|d| self.next + d.as_duration());
                    heartbeat(
                        ctx,
                        ws,
                        self.next,
                        interval_s.as_duration(),
                        until,
                        limit(timeout_s),
                    )
                    .await?;
                    self.next = until.unwrap_or_else(Instant::now);
                }
                Step::Wait { duration_s } => {
                    let until = self.next + duration_s.as_duration();
                    match self.ws.as_mut() {
                        Some(ws) => {
                            idle_until(ctx, ws, until).await?;
                        }
                        None => {
                            tokio::select! {
                                _ = sleep_until(until) => {}
                                _ = ctx.stop.notified() => {}
                            }
                        }
                    }
                    self.next = until;
                }
                Step::Rpc {
                    functions,
                    interval_s,
                    duration_s,
                    timeout_s,
                    transport,
                } => {
                    let until = duration_s.map(|d| self.next + d.as_duration());
                    let plan = crate::steps::rpc::Plan {
                        functions,
                        interval: *interval_s,
                        transport: *transport,
                        until,
                        limit: limit(timeout_s),
                    };
                    let token = self.token.as_deref().unwrap_or_default();
                    crate::steps::rpc::run(
                        ctx,
                        self.ws.as_mut(),
                        token,
                        self.index,
                        self.next,
                        plan,
                    )
                    .await?;
                    self.next = until.unwrap_or_else(Instant::now);
                }
                Step::Storage(storage) => {
                    let until = storage.duration_s.map(|d| self.next + d.as_duration());
                    let token = self.token.as_deref().unwrap_or_default();
                    Box::pin(crate::steps::storage::run(
                        ctx,
                        self.ws.as_mut(),
                        token,
                        self.index,
                        self.next,
                        storage,
                        until,
                        limit(&storage.timeout_s),
                        &mut self.written,
                    ))
                    .await?;
                    self.next = until.unwrap_or_else(Instant::now);
                }
                Step::Leaderboard(board) => {
                    let until = board.duration_s.map(|d| self.next + d.as_duration());
                    let token = self.token.as_deref().unwrap_or_default();
                    Box::pin(crate::steps::leaderboard::run(
                        ctx,
                        self.ws.as_mut(),
                        token,
                        self.index,
                        self.next,
                        board,
                        until,
                        limit(&board.timeout_s),
                        &mut self.written,
                    ))
                    .await?;
                    self.next = until.unwrap_or_else(Instant::now);
                }
                Step::Disconnect { timeout_s } => {
                    if let Some(ws) = self.ws.take() {
                        Box::pin(close(ctx, ws, limit(timeout_s))).await?;
                    }
                    self.channel = None;
                    self.next = Instant::now();
                }
                Step::Game(step) => {
                    let game = self.game.get_or_insert_with(Default::default);
                    let mut io = crate::steps::game::PlayerIo {
                        index: self.index,
                        token: self.token.as_deref(),
                        ws: &mut self.ws,
                        next: &mut self.next,
                    };
                    Box::pin(game.run(ctx, step, &mut io)).await?;
                }
                Step::ChatJoin(join) => {
                    let Some(ws) = self.ws.as_mut() else {
                        return Err(Failure::WsEof);
                    };
                    let sent = Instant::now();
                    let channel = Box::pin(crate::steps::chat::join(
                        ctx,
                        ws,
                        join,
                        self.index,
                        limit(&join.timeout_s),
                    ))
                    .await?;
                    let done = Instant::now();
                    ctx.rec.borrow_mut().latency(Metric::ChatJoin, done - sent);
                    self.channel = Some(channel);
                    self.next = done;
                }
                Step::World(world) => {
                    let Some(ws) = self.ws.as_mut() else {
                        return Err(Failure::WsEof);
                    };
                    let start = self.next;
                    Box::pin(crate::steps::world::run(
                        ctx,
                        ws,
                        self.format,
                        world,
                        start,
                        self.index,
                        limit(&world.timeout_s),
                    ))
                    .await?;
                    self.next = start + world.duration_s.as_duration();
                }
                Step::Chat(chat) => {
                    let (Some(ws), Some(channel)) = (self.ws.as_mut(), self.channel.as_deref())
                    else {
                        return Err(Failure::WsEof);
                    };
                    let start = self.next;
                    Box::pin(crate::steps::chat::run(
                        ctx,
                        ws,
                        channel,
                        chat,
                        start,
                        self.index,
                        limit(&chat.timeout_s),
                    ))
                    .await?;
                    self.next = chat
                        .duration_s
                        .map_or_else(Instant::now, |d| start + d.as_duration());
                }
            }
        }
        Ok(())
    }
}

/// `POST /v2/account/authenticate/device` (or the gRPC call `AuthenticateDevice`) → the session
/// token.
async fn authenticate(
    ctx: &Ctx,
    player: u64,
    device: String,
    create: bool,
    api: Api,
    limit: Duration,
) -> Result<String, Failure> {
    ctx.rec.borrow_mut().count(|c| c.sends += 1);
    let exchange = async {
        let bytes = match api {
            Api::Rest => {
                let url = format!(
                    "{}/v2/account/authenticate/device?create={create}",
                    ctx.base_url
                );
                let resp = ctx
                    .http
                    .post(url)
                    .basic_auth(&ctx.server_key, Some(""))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(format!("{{\"id\":\"{device}\"}}"))
                    .send()
                    .await
                    .map_err(|e| http_failure(&e))?;
                let status = resp.status();
                let bytes = resp.bytes().await.map_err(|e| http_failure(&e))?;
                if !status.is_success() {
                    return Err(Failure::Http(status.as_u16()));
                }
                bytes.to_vec()
            }
            Api::Grpc => {
                let key = base64::engine::general_purpose::STANDARD
                    .encode(format!("{}:", ctx.server_key));
                let request = serde_json::json!({"account": {"id": device}, "create": create});
                ctx.grpc
                    .call(
                        player,
                        GrpcCall::AuthenticateDevice,
                        &format!("Basic {key}"),
                        request,
                    )
                    .await
                    .map_err(|failure| failure.of("authenticate"))?
            }
        };
        ctx.rec.borrow_mut().count(|c| c.receives += 1);
        let session: Session = serde_json::from_slice(&bytes).map_err(|_| Failure::BadResponse)?;
        Ok(session.token)
    };
    timeout(limit, exchange)
        .await
        .unwrap_or(Err(Failure::HttpTimeout))
}

/// TCP connect (from the worker's source address) and WebSocket upgrade.
async fn open_socket(
    ctx: &Ctx,
    token: &str,
    format: SocketFormat,
    limit: Duration,
) -> Result<Ws, Failure> {
    ctx.rec.borrow_mut().count(|c| c.sends += 1);
    let path = format!("{}?token={token}&format={}", ctx.ws_path, format.query());
    let connect = transport::connect_websocket(
        ctx.addr,
        ctx.source_ip,
        &ctx.host,
        &path,
        ws_config_with(ctx.read_buffer),
    );
    let ws = timeout(limit, connect)
        .await
        .unwrap_or(Err(Failure::Timeout("connect")))?;
    ctx.rec.borrow_mut().count(|c| c.receives += 1);
    Ok(ws)
}

/// Pings on a fixed schedule (`start + k·interval`) until `until` or the end of the run.
///
/// One ping is outstanding at a time. Its round trip is measured from its intended send time,
/// so if a pong comes late, the following pings, now overdue, are sent at once and each carries
/// the delay it suffered: the stall shows in the percentiles instead of thinning the samples.
async fn heartbeat(
    ctx: &Ctx,
    ws: &mut Ws,
    start: Instant,
    interval: Duration,
    until: Option<Instant>,
    limit: Duration,
) -> Result<(), Failure> {
    let mut seq: u64 = 0;
    loop {
        seq += 1;
        let intended = start + interval * u32::try_from(seq).unwrap_or(u32::MAX);
        if until.is_some_and(|u| intended >= u) {
            return match until {
                Some(u) => idle_until(ctx, ws, u).await.map(|_| ()),
                None => Ok(()),
            };
        }
        if let Wake::Stop = idle_until(ctx, ws, intended).await? {
            return Ok(());
        }
        // Boxed: the exchange's futures exist for a millisecond, not for the player's life.
        Box::pin(ping(ctx, ws, seq, intended, limit)).await?;
    }
}

/// One ping/pong exchange; the round trip is recorded from the `intended` send time.
async fn ping(
    ctx: &Ctx,
    ws: &mut Ws,
    seq: u64,
    intended: Instant,
    limit: Duration,
) -> Result<(), Failure> {
    let sent = Instant::now();
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.latency(Metric::ClientLag, sent.saturating_duration_since(intended));
        rec.count(|c| c.sends += 1);
    }
    let cid = seq.to_string();
    let envelope = format!("{{\"cid\":\"{cid}\",\"ping\":{{}}}}");
    ws.send(Message::text(envelope)).await.map_err(ws_failure)?;
    await_reply(ctx, ws, &cid, sent + limit, "ping", Expect::Pong).await?;
    ctx.rec
        .borrow_mut()
        .latency(Metric::Ping, Instant::now() - intended);
    Ok(())
}

/// Keeps the socket serviced (answering the server's pings, noticing its close) until
/// `deadline` or until the run is over.
pub(crate) async fn idle_until(ctx: &Ctx, ws: &mut Ws, deadline: Instant) -> Result<Wake, Failure> {
    loop {
        if ctx.is_over() {
            return Ok(Wake::Stop);
        }
        tokio::select! {
            biased;
            _ = ctx.stop.notified() => return Ok(Wake::Stop),
            _ = sleep_until(deadline) => return Ok(Wake::Deadline),
            msg = ws.next() => unsolicited(ctx, ws, msg).await?,
        }
    }
}

/// Waits for the envelope answering `cid` with the `expect`ed kind.
pub(crate) async fn await_reply(
    ctx: &Ctx,
    ws: &mut Ws,
    cid: &str,
    deadline: Instant,
    what: &'static str,
    expect: Expect,
) -> Result<(), Failure> {
    loop {
        let msg = match timeout_at(deadline, ws.next()).await {
            Ok(msg) => msg,
            Err(_) => return Err(Failure::Timeout(what)),
        };
        if let Some(Ok(Message::Text(text))) = &msg {
            ctx.rec.borrow_mut().count(|c| c.receives += 1);
            if crate::steps::chat::delivery(ctx, text.as_str(), Instant::now()) {
                continue;
            }
            if let Ok(env) = serde_json::from_str::<Envelope>(text.as_str()) {
                if env.cid.as_deref() == Some(cid) {
                    if let Some(err) = env.error {
                        return Err(Failure::ServerError(err.code));
                    }
                    let answered = match expect {
                        Expect::Pong => env.pong.is_some(),
                        Expect::Rpc => env.rpc.is_some(),
                    };
                    if answered {
                        return Ok(());
                    }
                }
            }
            continue;
        }
        unsolicited(ctx, ws, msg).await?;
    }
}

/// Handles a message nobody was waiting for: counts it, answers pings, fails on close.
pub(crate) async fn unsolicited(
    ctx: &Ctx,
    ws: &mut Ws,
    msg: Option<Result<Message, WsError>>,
) -> Result<(), Failure> {
    match msg {
        None => Err(Failure::WsEof),
        Some(Err(e)) => Err(ws_failure(e)),
        Some(Ok(Message::Close(frame))) => Err(Failure::WsClose(
            frame.map(|f| u16::from(f.code)).unwrap_or(1005),
        )),
        Some(Ok(Message::Ping(_))) => {
            ctx.rec.borrow_mut().count(|c| c.receives += 1);
            // tungstenite queued the pong; flush it now rather than at the next read.
            ws.flush().await.map_err(ws_failure)
        }
        Some(Ok(msg)) => {
            ctx.rec.borrow_mut().count(|c| c.receives += 1);
            if let Message::Text(text) = &msg {
                crate::steps::chat::delivery(ctx, text.as_str(), Instant::now());
            }
            Ok(())
        }
    }
}

/// Closes the socket with a normal close, waits for the server's close frame and then for the
/// server to end the TCP connection (so TIME_WAIT lands on the server, not on our source port).
pub(crate) async fn close(ctx: &Ctx, mut ws: Ws, limit: Duration) -> Result<(), Failure> {
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    let deadline = Instant::now() + limit;
    ctx.rec.borrow_mut().count(|c| c.sends += 1);
    let handshake = async {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        match ws.close(Some(frame)).await {
            Ok(()) => {}
            Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return Ok(()),
            Err(e) => return Err(ws_failure(e)),
        }
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => continue,
                // RFC 6455 5.5.1: the peer MUST answer a Close with a Close. Ending the
                // connection instead is a protocol fault, reported as its own kind.
                None
                | Some(Err(
                    WsError::ConnectionClosed
                    | WsError::AlreadyClosed
                    | WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake),
                )) => return Err(Failure::CloseUnanswered),
                Some(Err(e)) => return Err(ws_failure(e)),
            }
        }
        ctx.rec.borrow_mut().count(|c| c.receives += 1);
        // The server closes TCP after the close handshake; wait briefly for its FIN.
        let mut byte = [0u8; 64];
        let _ = timeout(Duration::from_secs(1), ws.get_mut().read(&mut byte)).await;
        Ok(())
    };
    let result = timeout_at(deadline, handshake)
        .await
        .unwrap_or(Err(Failure::Timeout("close")));
    drop(ws);
    socket_gone(ctx);
    result
}
