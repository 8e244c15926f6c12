//! The match and room steps as the scenario file writes them (`matchmake`, `join_match`,
//! `play`, `create_room`, `room_connect`, `replay`): their keys with defaults and ranges, and
//! the check that they come in a possible order. `steps::game` runs them.

use std::path::PathBuf;

use serde::Deserialize;

use super::replay::Replay;
use super::Seconds;

/// How a match is joined (`room_connect`: `tcp` or `enet`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Websocket,
    Tcp,
    /// Muster's ENet transport (reliable UDP).
    Enet,
}

/// What a room's connections speak (`room_connect`'s `protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Muster's native transport (protobuf envelopes), joined with a `match_join` by ticket:
    /// rooms run by Muster's own handlers.
    Muster,
    /// Text lines: the first is `TICKET <ticket>`, answered `WELCOME …` (or `DENIED …`); then
    /// every line is a message that the game server relays to the room's other players. What
    /// a studio's own server run as a process room speaks at its simplest
    /// (`clients/fleet-server/relay.py`). Driven by `replay`.
    Lines,
}

/// When inputs are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Align {
    Tick,
    Free,
}

/// A match or room step, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum GameStep {
    Matchmake {
        query: String,
        count: u32,
        timeout_s: Option<Seconds>,
    },
    JoinMatch {
        transport: Transport,
        tcp_port: u16,
        enet_port: u16,
        timeout_s: Option<Seconds>,
    },
    Play {
        rate_hz: f64,
        duration_s: Seconds,
        align: Align,
        lead_ms: f64,
        record: Option<PathBuf>,
        timeout_s: Option<Seconds>,
    },
    CreateRoom {
        handler: String,
        capacity: u32,
        tick_rate_hz: Option<u32>,
        timeout_s: Option<Seconds>,
    },
    RoomConnect {
        connections: u32,
        open: bool,
        /// `tcp` or `enet`: which endpoint of the connection info is used.
        transport: Transport,
        protocol: Protocol,
        timeout_s: Option<Seconds>,
    },
    Replay {
        file: PathBuf,
        timeout_s: Option<Seconds>,
    },
}

/// The keys of a step as read from the file, before validation (filled in by `parse.rs`).
#[derive(Debug, Default)]
pub struct RawGameStep {
    pub query: Option<String>,
    pub count: Option<u32>,
    pub transport: Option<Transport>,
    pub tcp_port: Option<u16>,
    pub enet_port: Option<u16>,
    pub rate_hz: Option<f64>,
    pub duration_s: Option<Seconds>,
    pub align: Option<Align>,
    pub lead_ms: Option<f64>,
    pub record: Option<String>,
    pub handler: Option<String>,
    pub capacity: Option<u32>,
    pub tick_rate_hz: Option<u32>,
    pub connections: Option<u32>,
    pub open: Option<bool>,
    pub protocol: Option<Protocol>,
    pub file: Option<String>,
    pub timeout_s: Option<Seconds>,
}

impl RawGameStep {
    pub fn matchmake(self) -> Result<GameStep, String> {
        let count = self.count.unwrap_or(2);
        if !(2..=100).contains(&count) {
            return Err("`count` must be between 2 and 100".into());
        }
        Ok(GameStep::Matchmake {
            query: self.query.unwrap_or_else(|| "*".into()),
            count,
            timeout_s: self.timeout_s,
        })
    }

    pub fn join_match(self) -> Result<GameStep, String> {
        Ok(GameStep::JoinMatch {
            transport: self.transport.unwrap_or(Transport::Websocket),
            tcp_port: self.tcp_port.unwrap_or(7351),
            enet_port: self.enet_port.unwrap_or(7351),
            timeout_s: self.timeout_s,
        })
    }

    pub fn play(self) -> Result<GameStep, String> {
        let rate_hz = self.rate_hz.unwrap_or(15.0);
        if !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= 1000.0) {
            return Err("`rate_hz` must be between 0 and 1000".into());
        }
        let lead_ms = self.lead_ms.unwrap_or(10.0);
        if !(lead_ms.is_finite() && lead_ms >= 0.0 && lead_ms < 1000.0 / rate_hz) {
            return Err("`lead_ms` must be at least 0 and less than one input period".into());
        }
        Ok(GameStep::Play {
            rate_hz,
            duration_s: self.duration_s.ok_or("needs `duration_s`")?,
            align: self.align.unwrap_or(Align::Tick),
            lead_ms,
            record: self.record.map(PathBuf::from),
            timeout_s: self.timeout_s,
        })
    }

    pub fn create_room(self) -> Result<GameStep, String> {
        let capacity = self.capacity.unwrap_or(2);
        if capacity == 0 {
            return Err("`capacity` must be at least 1".into());
        }
        Ok(GameStep::CreateRoom {
            handler: self.handler.unwrap_or_else(|| "arena".into()),
            capacity,
            tick_rate_hz: self.tick_rate_hz,
            timeout_s: self.timeout_s,
        })
    }

    pub fn room_connect(self) -> Result<GameStep, String> {
        let connections = self.connections.unwrap_or(2);
        if !(1..=16).contains(&connections) {
            return Err("`connections` must be between 1 and 16".into());
        }
        let transport = self.transport.unwrap_or(Transport::Tcp);
        if transport == Transport::Websocket {
            return Err("`transport` must be \"tcp\" or \"enet\" here".into());
        }
        let protocol = self.protocol.unwrap_or(Protocol::Muster);
        if protocol == Protocol::Lines && transport != Transport::Tcp {
            return Err("`protocol = \"lines\"` runs over `transport = \"tcp\"` only".into());
        }
        Ok(GameStep::RoomConnect {
            connections,
            open: self.open.unwrap_or(true),
            transport,
            protocol,
            timeout_s: self.timeout_s,
        })
    }

    pub fn replay(self) -> Result<GameStep, String> {
        let file = PathBuf::from(self.file.ok_or("needs `file`")?);
        // Checked when the scenario is read, so a bad file fails before any player starts.
        Replay::load(&file)?;
        Ok(GameStep::Replay {
            file,
            timeout_s: self.timeout_s,
        })
    }
}

impl GameStep {
    pub fn name(&self) -> &'static str {
        match self {
            GameStep::Matchmake { .. } => "matchmake",
            GameStep::JoinMatch { .. } => "join_match",
            GameStep::Play { .. } => "play",
            GameStep::CreateRoom { .. } => "create_room",
            GameStep::RoomConnect { .. } => "room_connect",
            GameStep::Replay { .. } => "replay",
        }
    }

    pub fn needs_token(&self) -> bool {
        matches!(
            self,
            GameStep::CreateRoom { .. } | GameStep::RoomConnect { .. }
        )
    }
}

/// What a player has at each point of the steps, for the scenario's order check.
#[derive(Debug, Default)]
pub struct Progress {
    matched: bool,
    room: bool,
    joined: bool,
    /// Joined over `protocol = "lines"`: only `replay` drives such connections.
    lines: bool,
}

impl Progress {
    pub fn check(
        &mut self,
        step: &GameStep,
        authenticated: bool,
        connected: bool,
    ) -> Result<(), String> {
        match step {
            GameStep::Matchmake { .. } => {
                if !connected {
                    return Err("needs an open socket: add a `connect` step before it".into());
                }
                self.matched = true;
            }
            GameStep::JoinMatch { transport, .. } => {
                if !self.matched {
                    return Err("needs a matchmaker token: add a `matchmake` step before it".into());
                }
                if self.lines {
                    return Err(
                        "a player's connections speak one protocol: it already joined \
                                a room with `protocol = \"lines\"`"
                            .into(),
                    );
                }
                if *transport == Transport::Websocket && !connected {
                    return Err(
                        "needs an open socket (or `transport = \"tcp\"` or `\"enet\"`)".into(),
                    );
                }
                self.joined = true;
            }
            GameStep::CreateRoom { .. } => {
                if !authenticated {
                    return Err("needs a session: add an `authenticate` step before it".into());
                }
                self.room = true;
            }
            GameStep::RoomConnect { open, protocol, .. } => {
                if !self.room {
                    return Err("needs a room: add a `create_room` step before it".into());
                }
                if *open && self.joined && self.lines != (*protocol == Protocol::Lines) {
                    return Err(
                        "a player's connections speak one protocol: this one differs \
                                from the match it already joined"
                            .into(),
                    );
                }
                self.joined |= *open;
                self.lines |= *open && *protocol == Protocol::Lines;
            }
            GameStep::Play { .. } if self.lines => {
                return Err(
                    "`play` speaks the arena game of Muster's own rooms; connections \
                            with `protocol = \"lines\"` are driven by `replay`"
                        .into(),
                );
            }
            GameStep::Play { .. } | GameStep::Replay { .. } => {
                if !self.joined {
                    return Err(
                        "needs a joined match: add `join_match` or `room_connect` before it".into(),
                    );
                }
            }
        }
        Ok(())
    }
}
