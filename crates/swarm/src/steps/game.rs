//! Match and room steps: Space Ape's flow (find a match, connect and authenticate, play
//! sending inputs 15 times a second, report RTT and client-interval) and Hathora's flow
//! (create a room, ask where it lives, open two TCP connections to it, replay a recorded game).
//!
//! | `do` | keys (default) | what it does |
//! |---|---|---|
//! | `matchmake` | `query` (`"*"`), `count` (2), `timeout_s` | `matchmaker_add` (min = max =
//! `count`) on the socket, then waits for `matchmaker_matched`; keeps its join token. Metric
//! `matchmake` |
//! | `join_match` | `transport` (`"websocket"`), `tcp_port` (7351), `enet_port` (7351), `timeout_s`
//! | joins the matched match with the token: `match_join` on the socket, or a native connection to
//! the target's host — TCP at `tcp_port`, or ENet (`transport = "enet"`, UDP) at `enet_port` —
//! whose first message is the join. Metric `join` |
//! | `create_room` | `handler` (`"arena"`), `capacity` (2), `tick_rate_hz`, `timeout_s` | `POST
//! /v2/rooms` with the session token. Metric `room_create` |
//! | `room_connect` | `connections` (2), `open` (true), `transport` (`"tcp"`), `timeout_s` | per
//! connection: `GET /v2/rooms/{id}/connection` (metric `room_lookup`), then a TCP connection to the
//! host and port it names — or with `transport = "enet"` an ENet connection to its `enet` endpoint
//! — joined with its ticket (metric `join`); with `open = false`, only the lookups |
//! | `play` | `rate_hz` (15), `duration_s` (required), `align` (`"tick"`), `lead_ms` (10),
//! `record`, `timeout_s` | plays the arena game on every joined connection: one movement input per
//! `1/rate_hz`; metrics `RTT`, `client-interval`, `client_lag`. With `record = "FILE"`, player 0
//! writes its inputs as a replay file (a relative path is relative to the scenario file) |
//! | `replay` | `file` (required; relative to the scenario file), `timeout_s` | sends a recorded
//! replay's messages on the joined connections at their recorded times; metrics as `play` |
//!
//! RTT is measured per input from its *intended* send time to the first state echoing it, so a
//! stalled server or client cannot hide behind a skipped send. `align = "tick"` sends each input
//! `lead_ms` before the server's next tick (the ticks are learned from the states' arrivals and
//! corrected every second, see [`crate::steps::tick_clock`]): the way a
//! real client keeps its inputs just ahead of the server, so RTT measures the server's
//! responsiveness rather than a random wait for the next tick. `align = "free"` sends on the
//! client's own clock; then RTT includes that wait (up to one tick period).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt as _, StreamExt as _};
use muster_proto::arena;
use muster_proto::realtime::{self, Envelope, MatchDataSend, Message as Kind};
use serde::Deserialize;
use tokio::time::{sleep_until, timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::measure::stats::Metric;
use crate::net::enet::EnetConn;
use crate::net::failure::{http_failure, ws_failure, Failure};
use crate::net::lines::Lines;
use crate::net::native::Native;
use crate::net::transport::Ws;
use crate::scenario::game::{Align, GameStep, Protocol, Transport};
use crate::scenario::replay::{Record, Replay};
use crate::scenario::Seconds;
use crate::steps::ctx::Ctx;
use crate::steps::lines::{join_lines, replay_lines};
use crate::steps::player::unsolicited;
use crate::steps::tick_clock::TickClock;

/// A player's match and room state.
#[derive(Default)]
pub struct Game {
    /// The matchmaker's join token, until used.
    join_token: Option<String>,
    match_id: Option<String>,
    room_id: Option<String>,
    /// True when the match was joined over the player's WebSocket.
    on_websocket: bool,
    /// Native connections (joined), one per simulated player of a room.
    conns: Vec<Conn>,
    /// Connections to a line-based game server (`protocol = "lines"`), joined.
    lines: Vec<Lines>,
}

/// The parts of a player a game step uses.
pub struct PlayerIo<'a> {
    pub index: u64,
    pub token: Option<&'a str>,
    pub ws: &'a mut Option<Ws>,
    pub next: &'a mut Instant,
}

impl Game {
    pub async fn run(
        &mut self,
        ctx: &Ctx,
        step: &GameStep,
        io: &mut PlayerIo<'_>,
    ) -> Result<(), Failure> {
        let limit = |t: &Option<Seconds>| t.map(|s| s.as_duration()).unwrap_or(ctx.default_timeout);
        match step {
            GameStep::Matchmake {
                query,
                count,
                timeout_s,
            } => {
                let ws = io.ws.as_mut().ok_or(Failure::WsEof)?;
                let deadline = Instant::now() + limit(timeout_s);
                let add = serde_json::json!({"cid": "mm", "matchmaker_add": {
                    "min_count": count, "max_count": count, "query": query}});
                count_send(ctx);
                ws.send(Message::text(add.to_string()))
                    .await
                    .map_err(ws_failure)?;
                let matched = await_ws(ctx, ws, deadline, "matchmake", |m| {
                    m.get("matchmaker_matched").cloned()
                })
                .await?;
                self.join_token = matched["token"].as_str().map(str::to_owned);
                if self.join_token.is_none() {
                    return Err(Failure::BadResponse);
                }
                let done = Instant::now();
                ctx.rec
                    .borrow_mut()
                    .latency(Metric::Matchmake, done - *io.next);
                *io.next = done;
            }
            GameStep::JoinMatch {
                transport,
                tcp_port,
                enet_port,
                timeout_s,
            } => {
                let token = self.join_token.take().ok_or(Failure::BadResponse)?;
                let deadline = Instant::now() + limit(timeout_s);
                match transport {
                    Transport::Websocket => {
                        let ws = io.ws.as_mut().ok_or(Failure::WsEof)?;
                        let join =
                            serde_json::json!({"cid": "join", "match_join": {"token": token}});
                        count_send(ctx);
                        ws.send(Message::text(join.to_string()))
                            .await
                            .map_err(ws_failure)?;
                        let joined = await_ws(ctx, ws, deadline, "join", |m| {
                            (m["cid"] == "join").then(|| m.clone())
                        })
                        .await?;
                        if let Some(code) = joined["error"]["code"].as_i64() {
                            return Err(Failure::ServerError(code));
                        }
                        self.match_id = joined["match"]["match_id"].as_str().map(str::to_owned);
                        self.on_websocket = true;
                    }
                    Transport::Tcp | Transport::Enet => {
                        let port = match transport {
                            Transport::Enet => *enet_port,
                            _ => *tcp_port,
                        };
                        let addr = std::net::SocketAddr::new(ctx.addr.ip(), port);
                        let (conn, id) =
                            join_native(ctx, *transport, addr, &token, deadline).await?;
                        self.conns.push(conn);
                        self.match_id = Some(id);
                    }
                }
                if self.match_id.is_none() {
                    return Err(Failure::BadResponse);
                }
                let done = Instant::now();
                ctx.rec.borrow_mut().latency(Metric::Join, done - *io.next);
                *io.next = done;
            }
            GameStep::CreateRoom {
                handler,
                capacity,
                tick_rate_hz,
                timeout_s,
            } => {
                let token = io.token.ok_or(Failure::BadResponse)?;
                let mut body = serde_json::json!({"handler": handler, "capacity": capacity});
                if let Some(rate) = tick_rate_hz {
                    body["params"] = serde_json::json!({"tick_rate_hz": rate.to_string()});
                }
                let url = format!("{}/v2/rooms", ctx.base_url);
                let room = http(
                    ctx,
                    ctx.http.post(url).bearer_auth(token).json(&body),
                    limit(timeout_s),
                )
                .await?;
                self.room_id = room["room_id"].as_str().map(str::to_owned);
                if self.room_id.is_none() {
                    return Err(Failure::BadResponse);
                }
                let done = Instant::now();
                ctx.rec
                    .borrow_mut()
                    .latency(Metric::RoomCreate, done - *io.next);
                *io.next = done;
            }
            GameStep::RoomConnect {
                connections,
                open,
                transport,
                protocol,
                timeout_s,
            } => {
                let token = io.token.ok_or(Failure::BadResponse)?;
                let room = self.room_id.clone().ok_or(Failure::BadResponse)?;
                for _ in 0..*connections {
                    let url = format!("{}/v2/rooms/{room}/connection", ctx.base_url);
                    let info =
                        http(ctx, ctx.http.get(url).bearer_auth(token), limit(timeout_s)).await?;
                    let looked_up = Instant::now();
                    ctx.rec
                        .borrow_mut()
                        .latency(Metric::RoomLookup, looked_up - *io.next);
                    if !open {
                        *io.next = looked_up;
                        continue;
                    }
                    let endpoint = match transport {
                        Transport::Enet => &info["enet"],
                        _ => &info,
                    };
                    let host = endpoint["host"].as_str().ok_or(Failure::BadResponse)?;
                    let port = endpoint["port"].as_u64().ok_or(Failure::BadResponse)?;
                    let ticket = info["ticket"].as_str().ok_or(Failure::BadResponse)?;
                    let addr = format!("{host}:{port}")
                        .parse::<std::net::SocketAddr>()
                        .unwrap_or_else(|_| std::net::SocketAddr::new(ctx.addr.ip(), port as u16));
                    let deadline = looked_up + limit(timeout_s);
                    match protocol {
                        Protocol::Muster => {
                            let (conn, id) =
                                join_native(ctx, *transport, addr, ticket, deadline).await?;
                            self.conns.push(conn);
                            self.match_id = Some(id);
                        }
                        Protocol::Lines => {
                            let conn = join_lines(ctx, addr, ticket, deadline).await?;
                            self.lines.push(conn);
                        }
                    }
                    let done = Instant::now();
                    ctx.rec.borrow_mut().latency(Metric::Join, done - looked_up);
                    *io.next = done;
                }
            }
            GameStep::Play {
                rate_hz,
                duration_s,
                align,
                lead_ms,
                record,
                timeout_s,
            } => {
                let period = Duration::from_secs_f64(1.0 / rate_hz);
                let plan = Plan::Rate {
                    period,
                    align: *align,
                    lead: Duration::from_secs_f64(lead_ms / 1000.0),
                };
                let until = *io.next + duration_s.as_duration();
                let recording = (record.is_some() && io.index == 0).then(Vec::new);
                let recorded = self
                    .drive(ctx, io, plan, until, limit(timeout_s), recording)
                    .await?;
                if let (Some(path), Some(records)) = (record, recorded) {
                    let connections = self.link_count() as u32;
                    let replay = Replay {
                        connections,
                        records,
                    };
                    if let Err(e) = replay.write(path) {
                        eprintln!("swarm: {e}");
                    }
                }
                *io.next = until;
            }
            GameStep::Replay { file, timeout_s } if !self.lines.is_empty() => {
                let replay = load_replay(file)?;
                replay_lines(ctx, &mut self.lines, &replay, limit(timeout_s)).await?;
                *io.next = Instant::now();
            }
            GameStep::Replay { file, timeout_s } => {
                let replay = load_replay(file)?;
                let until = *io.next + replay.duration() + Duration::from_millis(1);
                self.drive(
                    ctx,
                    io,
                    Plan::Replay(&replay),
                    until,
                    limit(timeout_s),
                    None,
                )
                .await?;
                *io.next = Instant::now();
            }
        }
        Ok(())
    }

    fn link_count(&self) -> usize {
        self.conns.len() + usize::from(self.on_websocket)
    }

    /// Runs the plan on every joined connection at once; returns the recording if asked.
    async fn drive(
        &mut self,
        ctx: &Ctx,
        io: &mut PlayerIo<'_>,
        plan: Plan<'_>,
        until: Instant,
        limit: Duration,
        recording: Option<Vec<Record>>,
    ) -> Result<Option<Vec<Record>>, Failure> {
        let match_id = self.match_id.clone().ok_or(Failure::BadResponse)?;
        let recorder = recording.map(std::cell::RefCell::new);
        let started = *io.next;
        let mut links: Vec<Link<'_>> = Vec::new();
        if self.on_websocket {
            links.push(Link::Ws(io.ws.as_mut().ok_or(Failure::WsEof)?));
        }
        links.extend(self.conns.iter_mut().map(Link::Native));
        let runs = links.into_iter().enumerate().map(|(i, link)| {
            play_link(
                ctx,
                link,
                LinkPlan {
                    conn: i as u32,
                    index: io.index,
                    match_id: &match_id,
                    plan: &plan,
                    started,
                    until,
                    limit,
                    recorder: recorder.as_ref(),
                },
            )
        });
        for result in futures_util::future::join_all(runs).await {
            result?;
        }
        Ok(recorder.map(|r| {
            let mut records = r.into_inner();
            records.sort_by_key(|r| r.at);
            records
        }))
    }

    /// Closes the native connections (the end of the player).
    pub async fn close(&mut self, ctx: &Ctx) {
        for conn in self.conns.drain(..) {
            conn.close().await;
            crate::steps::player::socket_gone(ctx);
        }
        for conn in self.lines.drain(..) {
            conn.close().await;
            crate::steps::player::socket_gone(ctx);
        }
    }
}

thread_local! {
    /// Replay files, loaded once per worker (workers are single-threaded).
    static REPLAYS: std::cell::RefCell<std::collections::HashMap<PathBuf, std::rc::Rc<Replay>>> =
        Default::default();
}

/// Forgets the replays loaded for a previous run (a listening worker serves several runs, whose
/// files may differ under the same path).
pub fn forget_replays() {
    REPLAYS.with(|cache| cache.borrow_mut().clear());
}

fn load_replay(path: &PathBuf) -> Result<std::rc::Rc<Replay>, Failure> {
    REPLAYS.with(|cache| {
        if let Some(r) = cache.borrow().get(path) {
            return Ok(r.clone());
        }
        let loaded = std::rc::Rc::new(Replay::load(path).map_err(|_| Failure::BadResponse)?);
        cache.borrow_mut().insert(path.clone(), loaded.clone());
        Ok(loaded)
    })
}

pub(super) fn count_send(ctx: &Ctx) {
    ctx.rec.borrow_mut().count(|c| c.sends += 1);
}

pub(super) fn count_receive(ctx: &Ctx) {
    ctx.rec.borrow_mut().count(|c| c.receives += 1);
}

/// One HTTP call with a JSON answer.
async fn http(
    ctx: &Ctx,
    request: reqwest::RequestBuilder,
    limit: Duration,
) -> Result<serde_json::Value, Failure> {
    count_send(ctx);
    let exchange = async {
        let response = request.send().await.map_err(|e| http_failure(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|_| Failure::HttpIo)?;
        count_receive(ctx);
        if !status.is_success() {
            return Err(Failure::Http(status.as_u16()));
        }
        serde_json::from_slice(&bytes).map_err(|_| Failure::BadResponse)
    };
    tokio::time::timeout(limit, exchange)
        .await
        .unwrap_or(Err(Failure::HttpTimeout))
}

/// Reads the socket until `pick` returns something (or an error envelope answers us).
async fn await_ws(
    ctx: &Ctx,
    ws: &mut Ws,
    deadline: Instant,
    what: &'static str,
    pick: impl Fn(&serde_json::Value) -> Option<serde_json::Value>,
) -> Result<serde_json::Value, Failure> {
    loop {
        let msg = timeout_at(deadline, ws.next())
            .await
            .map_err(|_| Failure::Timeout(what))?;
        if let Some(Ok(Message::Text(text))) = &msg {
            count_receive(ctx);
            let Ok(value) = serde_json::from_str::<serde_json::Value>(text.as_str()) else {
                continue;
            };
            if let Some(found) = pick(&value) {
                return Ok(found);
            }
            if let Some(code) = value["error"]["code"].as_i64() {
                return Err(Failure::ServerError(code));
            }
            continue;
        }
        unsolicited(ctx, ws, msg).await?;
    }
}

/// A native connection: Muster's TCP transport or its ENet transport, and what came before
/// the join's answer (on ENet the match's welcome, reliable on the same channel, may precede
/// it: it is queued during the join).
struct Conn {
    link: NativeLink,
    early: VecDeque<Envelope>,
}

enum NativeLink {
    Tcp(Native),
    Enet(EnetConn),
}

impl Conn {
    async fn send(&mut self, envelope: &Envelope) -> Result<(), Failure> {
        match &mut self.link {
            NativeLink::Tcp(conn) => conn.send(envelope).await,
            NativeLink::Enet(conn) => {
                conn.send(envelope, true);
                Ok(())
            }
        }
    }

    async fn recv(&mut self) -> Result<Envelope, Failure> {
        match self.early.pop_front() {
            Some(envelope) => Ok(envelope),
            None => self.read().await,
        }
    }

    /// The next envelope from the wire, leaving `early` alone.
    async fn read(&mut self) -> Result<Envelope, Failure> {
        match &mut self.link {
            NativeLink::Tcp(conn) => conn.recv().await,
            NativeLink::Enet(conn) => conn.recv().await,
        }
    }

    async fn close(self) {
        match self.link {
            NativeLink::Tcp(conn) => conn.close().await,
            // Dropping the peer disconnects it.
            NativeLink::Enet(conn) => drop(conn),
        }
    }
}

/// Opens a native connection (TCP, or ENet for `Transport::Enet`) and joins with `token`;
/// returns it and the match id.
async fn join_native(
    ctx: &Ctx,
    transport: Transport,
    addr: std::net::SocketAddr,
    token: &str,
    deadline: Instant,
) -> Result<(Conn, String), Failure> {
    let connecting = async {
        match transport {
            Transport::Enet => ctx
                .enet
                .connect(addr, ctx.source_ip)
                .await
                .map(NativeLink::Enet),
            _ => Native::connect(addr, ctx.source_ip)
                .await
                .map(NativeLink::Tcp),
        }
    };
    let mut conn = Conn {
        link: timeout_at(deadline, connecting)
            .await
            .map_err(|_| Failure::Timeout("connect"))??,
        early: VecDeque::new(),
    };
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.count(|c| c.connects += 1);
        rec.ccu += 1;
        rec.peak_ccu = rec.peak_ccu.max(rec.ccu);
    }
    let join = Envelope::new(
        "j",
        Kind::MatchJoin(realtime::MatchJoin {
            id: Some(realtime::match_join::Id::Token(token.to_owned())),
            metadata: Default::default(),
        }),
    );
    count_send(ctx);
    let result = async {
        conn.send(&join).await?;
        loop {
            let envelope = timeout_at(deadline, conn.read())
                .await
                .map_err(|_| Failure::Timeout("join"))??;
            count_receive(ctx);
            match envelope.message {
                Some(Kind::Match(m)) if envelope.cid == "j" => return Ok(m.match_id),
                Some(Kind::Error(e)) => return Err(Failure::ServerError(i64::from(e.code))),
                Some(Kind::MatchData(_)) => conn.early.push_back(envelope),
                _ => continue,
            }
        }
    }
    .await;
    match result {
        Ok(id) => Ok((conn, id)),
        Err(failure) => {
            crate::steps::player::socket_gone(ctx);
            Err(failure)
        }
    }
}

/// What to send.
enum Plan<'a> {
    /// Arena inputs at a fixed rate.
    Rate {
        period: Duration,
        align: Align,
        lead: Duration,
    },
    /// A recording's messages at their times.
    Replay(&'a Replay),
}

struct LinkPlan<'a> {
    conn: u32,
    index: u64,
    match_id: &'a str,
    plan: &'a Plan<'a>,
    started: Instant,
    until: Instant,
    limit: Duration,
    recorder: Option<&'a std::cell::RefCell<Vec<Record>>>,
}

/// One joined connection: the player's WebSocket (JSON) or a native connection (protobuf).
enum Link<'a> {
    Ws(&'a mut Ws),
    Native(&'a mut Conn),
}

/// `match_data` as a player sees it.
struct Data {
    op_code: i64,
    data: Vec<u8>,
}

#[derive(Deserialize)]
struct WsIn<'a> {
    #[serde(borrow)]
    match_data: Option<WsData<'a>>,
    error: Option<WsError>,
}

#[derive(Deserialize)]
struct WsData<'a> {
    #[serde(borrow, default)]
    op_code: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WsError {
    #[serde(default)]
    code: i64,
}

impl Link<'_> {
    async fn send(
        &mut self,
        ctx: &Ctx,
        match_id: &str,
        op_code: i64,
        data: &[u8],
    ) -> Result<(), Failure> {
        count_send(ctx);
        match self {
            Link::Ws(ws) => {
                let text = format!(
                    "{{\"match_data_send\":{{\"match_id\":\"{match_id}\",\"op_code\":\"{op_code}\",\"data\":\"{}\"}}}}",
                    base64::engine::general_purpose::STANDARD.encode(data)
                );
                ws.send(Message::text(text)).await.map_err(ws_failure)
            }
            Link::Native(conn) => {
                let envelope = Envelope::new(
                    "",
                    Kind::MatchDataSend(MatchDataSend {
                        match_id: match_id.to_owned(),
                        op_code,
                        data: data.to_vec(),
                        ..Default::default()
                    }),
                );
                conn.send(&envelope).await
            }
        }
    }

    /// The next `match_data`; other messages are handled (pings answered) and skipped.
    async fn recv(&mut self, ctx: &Ctx) -> Result<Data, Failure> {
        loop {
            match self {
                Link::Ws(ws) => {
                    let msg = ws.next().await;
                    if let Some(Ok(Message::Text(text))) = &msg {
                        count_receive(ctx);
                        let Ok(parsed) = serde_json::from_str::<WsIn>(text.as_str()) else {
                            continue;
                        };
                        if let Some(e) = parsed.error {
                            return Err(Failure::ServerError(e.code));
                        }
                        if let Some(d) = parsed.match_data {
                            let op_code = d.op_code.and_then(|o| o.parse().ok()).unwrap_or(0);
                            let data = d
                                .data
                                .and_then(|b| {
                                    base64::engine::general_purpose::STANDARD
                                        .decode(b.as_bytes())
                                        .ok()
                                })
                                .unwrap_or_default();
                            return Ok(Data { op_code, data });
                        }
                        continue;
                    }
                    unsolicited(ctx, ws, msg).await?;
                }
                Link::Native(conn) => {
                    let envelope = conn.recv().await?;
                    count_receive(ctx);
                    match envelope.message {
                        Some(Kind::MatchData(d)) => {
                            return Ok(Data {
                                op_code: d.op_code,
                                data: d.data,
                            })
                        }
                        Some(Kind::Error(e)) => {
                            return Err(Failure::ServerError(i64::from(e.code)))
                        }
                        _ => continue,
                    }
                }
            }
        }
    }
}

/// Plays one connection: waits for its slot, sends on schedule, measures echoes.
async fn play_link(ctx: &Ctx, mut link: Link<'_>, p: LinkPlan<'_>) -> Result<(), Failure> {
    let first_deadline = Instant::now() + p.limit;
    // The welcome names our slot in the state messages.
    let slot = loop {
        let d = timeout_at(first_deadline, link.recv(ctx))
            .await
            .map_err(|_| Failure::Timeout("welcome"))??;
        if d.op_code == arena::OP_WELCOME {
            break arena::Welcome::decode(&d.data)
                .ok_or(Failure::BadResponse)?
                .slot;
        }
    };
    let records: Vec<&Record> = match p.plan {
        Plan::Replay(replay) => replay
            .records
            .iter()
            .filter(|r| r.conn == p.conn % replay.connections.max(1))
            .collect(),
        Plan::Rate { .. } => Vec::new(),
    };
    // The first intended send.
    let base = Instant::now();
    let mut tick_clock: Option<TickClock> = None;
    let mut next = match p.plan {
        Plan::Rate {
            period,
            align: Align::Free,
            ..
        } => base + *period,
        Plan::Rate {
            period,
            align: Align::Tick,
            lead,
        } => {
            // Phase-lock on the server's ticks: the arrival of a state marks a tick.
            let tick_seen = loop {
                let d = timeout_at(first_deadline, link.recv(ctx))
                    .await
                    .map_err(|_| Failure::Timeout("state"))??;
                if d.op_code == arena::OP_STATE {
                    break Instant::now();
                }
            };
            let clock = TickClock::new(tick_seen, *period);
            let first = clock.next_send(Instant::now(), *lead);
            tick_clock = Some(clock);
            first
        }
        Plan::Replay(_) => base + records.first().map_or(Duration::ZERO, |r| r.at),
    };
    let mut sent: u32 = 0;
    let mut pending: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut last_send: Option<Instant> = None;
    let mut record_index = 0usize;
    loop {
        let sending = match p.plan {
            Plan::Rate { .. } => next < p.until,
            Plan::Replay(_) => record_index < records.len(),
        };
        if !sending && pending.is_empty() {
            return Ok(());
        }
        if ctx.is_over() {
            return Ok(());
        }
        let echo_deadline = pending.front().map(|(_, at)| *at + p.limit);
        let wake = if sending {
            next
        } else {
            echo_deadline.unwrap_or(next)
        };
        tokio::select! {
            biased;
            () = ctx.stop.notified() => return Ok(()),
            () = sleep_until(echo_deadline.unwrap_or(wake)), if echo_deadline.is_some_and(|d| d <= wake) => {
                return Err(Failure::Timeout("rtt"));
            }
            () = sleep_until(next), if sending => {
                let now = Instant::now();
                let (op, data, intended, seq) = match p.plan {
                    Plan::Rate { period, .. } => {
                        sent += 1;
                        let dir = [(1, 0), (0, 1), (-1, 0), (0, -1)][((sent / 15) as u64 + p.index) as usize % 4];
                        let input = arena::Input { seq: sent, dx: dir.0, dy: dir.1 };
                        let intended = next;
                        next += *period;
                        (arena::OP_INPUT, input.encode(), intended, Some(sent))
                    }
                    Plan::Replay(_) => {
                        let r = records[record_index];
                        record_index += 1;
                        let intended = next;
                        if let Some(following) = records.get(record_index) {
                            next = base + following.at;
                        }
                        let seq = (r.op == arena::OP_INPUT)
                            .then(|| arena::Input::decode(&r.data).map(|i| i.seq))
                            .flatten();
                        (r.op, r.data.clone(), intended, seq)
                    }
                };
                {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.latency(Metric::ClientLag, now.saturating_duration_since(intended));
                    if let Some(last) = last_send {
                        rec.latency(Metric::ClientInterval, now - last);
                    }
                }
                last_send = Some(now);
                if let Some(recorder) = p.recorder {
                    recorder.borrow_mut().push(Record {
                        at: intended.saturating_duration_since(p.started),
                        conn: p.conn,
                        op,
                        data: data.clone(),
                    });
                }
                link.send(ctx, p.match_id, op, &data).await?;
                if let Some(seq) = seq {
                    pending.push_back((seq, intended));
                }
            }
            received = link.recv(ctx) => {
                let d = received?;
                if d.op_code == arena::OP_STATE {
                    let now = Instant::now();
                    if let (Some(clock), Plan::Rate { period, lead, .. }) = (&mut tick_clock, p.plan) {
                        if clock.observe(now).is_some() {
                            // The ticks moved: the next input goes `lead` before the first
                            // predicted tick more than half a period after the last input.
                            next = clock.next_send(next - *period + *period / 2, *lead);
                        }
                    }
                    if let Some(echoed) = arena::State::last_seq_of(&d.data, slot) {
                        let mut rec = ctx.rec.borrow_mut();
                        while pending.front().is_some_and(|(seq, _)| *seq <= echoed) {
                            if let Some((_, intended)) = pending.pop_front() {
                                rec.latency(Metric::Rtt, now - intended);
                            }
                        }
                    }
                }
            }
        }
    }
}
