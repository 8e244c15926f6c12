//! Scenario files: what a load test does, as TOML.
//!
//! A scenario has phases (when players arrive) and steps (what each player does). Parsing is
//! strict: an unknown key, a value of the wrong type or out of range, or steps in an impossible
//! order are errors that name the key and the line, because a typo in a load test silently
//! running the wrong load is worse than no load test. See the crate README for every key.
//!
//! ```toml
//! name = "connect-and-heartbeat"
//!
//! [[phases]]
//! name = "ramp"
//! duration_s = 60
//! shape = "linear"        # linear | bell | spike
//! players = 18000         # or: arrival_rate = 300 (players per second)
//!
//! [[phases]]
//! name = "hold"
//! duration_s = 60         # no arrivals: everyone holds
//!
//! [[steps]]
//! do = "authenticate"
//! [[steps]]
//! do = "connect"
//! [[steps]]
//! do = "heartbeat"
//! interval_s = 10         # until the run ends unless duration_s is set
//! ```
//!
//! This folder is a bottom layer: what the scenario file says, checked, with nothing about how
//! it runs. Besides the file itself (here): the arrival schedule its phases describe
//! ([`ramp`]) and the replay files its `replay` steps name ([`replay`], read and checked when
//! the scenario is loaded).

pub mod ramp;
pub mod replay;

use std::path::Path;

use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::steps::chat::{BytesRange, ChatStep, JoinStep, SecondsRange};
use crate::steps::rpc::{Interval, RawFunction, RpcFunction, Transport};
use ramp::{Curve, PhasePlan, Schedule, Shape};

/// A positive, finite number of seconds; TOML integers and floats are both accepted.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

impl Seconds {
    pub fn as_duration(self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v.is_finite() && v > 0.0 && v <= 31_536_000.0 {
            Ok(Seconds(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "{v} is not a positive number of seconds (at most one year)"
            )))
        }
    }
}

/// Where the arrival rate of a bell or spike peaks, strictly between 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak(pub f64);

impl<'de> Deserialize<'de> for Peak {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v > 0.0 && v < 1.0 {
            Ok(Peak(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "peak {v} must be a fraction of the phase strictly between 0 and 1"
            )))
        }
    }
}

/// A whole scenario file, validated.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name shown in the report.
    pub name: String,
    /// Free text shown in the report.
    pub description: String,
    /// Default timeout of every request and of every awaited reply.
    pub timeout_s: Seconds,
    /// After the last phase ends, how long players still in the middle of a request get to
    /// finish (and close their sockets) before they are counted as `unfinished` failures.
    pub grace_s: Seconds,
    /// When players arrive; phases run back to back.
    pub phases: Vec<Phase>,
    /// What every player does, in order.
    pub steps: Vec<Step>,
}

/// The file as written: parsed by serde with spans, then checked into a [`Scenario`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_timeout")]
    timeout_s: Seconds,
    #[serde(default = "default_grace")]
    grace_s: Seconds,
    phases: Vec<Phase>,
    steps: Vec<Spanned<RawStep>>,
}

fn default_timeout() -> Seconds {
    Seconds(10.0)
}

fn default_grace() -> Seconds {
    Seconds(5.0)
}

/// One phase as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Shown in the report; defaults to `phase N`.
    pub name: Option<String>,
    /// How long the phase lasts.
    pub duration_s: Seconds,
    /// Arrival-rate profile over the phase; defaults to `linear`.
    pub shape: Option<Shape>,
    /// Where the rate of a `bell` or `spike` peaks (fraction of the phase).
    pub peak: Option<Peak>,
    /// How many players arrive during the phase.
    pub players: Option<u64>,
    /// Mean arrivals per second over the phase (players = rate × duration).
    pub arrival_rate: Option<f64>,
}

/// The kinds of step, as written in `do = "…"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StepKind {
    Authenticate,
    Connect,
    Heartbeat,
    Wait,
    Disconnect,
    Matchmake,
    JoinMatch,
    Play,
    CreateRoom,
    RoomConnect,
    Replay,
    ChatJoin,
    Chat,
    Rpc,
}

/// `transport = "…"` as written. One key serves two steps: `join_match` takes `websocket` or
/// `tcp`, `rpc` takes `socket` or `http`; each step refuses the other's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TransportKey {
    Websocket,
    Tcp,
    Socket,
    Http,
}

/// A step as written: every key any step may have, each with its span, so that a misplaced or
/// mistyped key is reported at its own line. (A serde-tagged enum would be shorter, but serde
/// buffers tagged content and the TOML spans are lost: errors would point at the first step.)
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(rename = "do")]
    kind: Spanned<StepKind>,
    create: Option<Spanned<bool>>,
    reuse_accounts: Option<Spanned<bool>>,
    interval_s: Option<Spanned<Interval>>,
    duration_s: Option<Spanned<Seconds>>,
    timeout_s: Option<Spanned<Seconds>>,
    // Match and room steps (see `crate::steps::game`).
    query: Option<Spanned<String>>,
    count: Option<Spanned<u32>>,
    /// `join_match` (`websocket`, `tcp`) and `rpc` (`socket`, `http`).
    transport: Option<Spanned<TransportKey>>,
    tcp_port: Option<Spanned<u16>>,
    rate_hz: Option<Spanned<f64>>,
    align: Option<Spanned<crate::steps::game::Align>>,
    lead_ms: Option<Spanned<f64>>,
    record: Option<Spanned<String>>,
    handler: Option<Spanned<String>>,
    capacity: Option<Spanned<u32>>,
    tick_rate_hz: Option<Spanned<u32>>,
    connections: Option<Spanned<u32>>,
    open: Option<Spanned<bool>>,
    file: Option<Spanned<String>>,
    channels: Option<Spanned<u64>>,
    group_size: Option<Spanned<u64>>,
    room_prefix: Option<Spanned<String>>,
    persistence: Option<Spanned<bool>>,
    hidden: Option<Spanned<bool>>,
    send_interval_s: Option<Spanned<SecondsRange>>,
    message_bytes: Option<Spanned<BytesRange>>,
    functions: Option<Spanned<Vec<RawFunction>>>,
}

/// One step of player behaviour.
///
/// The vocabulary is small on purpose and grows by adding variants (chat, rpc, match…): each
/// variant carries its own keys (declared in `RawStep` and checked in `RawStep::into_step`), and
/// the player state machine in `steps/player.rs` runs one variant at a time.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `POST /v2/account/authenticate/device`, with a device ID unique to the player.
    Authenticate {
        /// `create=true`: make the account on first use (default true).
        create: bool,
        /// Use device IDs that are the same on every run (`swarm-player-<index>`), so a second
        /// run logs existing accounts in instead of creating new ones (default false).
        reuse_accounts: bool,
        timeout_s: Option<Seconds>,
    },
    /// Open the realtime socket (`GET /ws?token=…&format=json`, WebSocket upgrade).
    Connect { timeout_s: Option<Seconds> },
    /// Send `ping` envelopes every `interval_s` and wait for each `pong`.
    Heartbeat {
        interval_s: Seconds,
        /// How long to keep it up; until the run ends when absent.
        duration_s: Option<Seconds>,
        /// How long to wait for each pong (the scenario's `timeout_s` by default).
        timeout_s: Option<Seconds>,
    },
    /// Do nothing for a while (keeping the socket open and answering the server's pings).
    Wait { duration_s: Seconds },
    /// Close the socket with a normal close and wait for the server's close reply.
    Disconnect { timeout_s: Option<Seconds> },
    /// A match or room step (Space Ape's and Hathora's flows); see [`crate::steps::game::GameStep`].
    Game(crate::steps::game::GameStep),
    /// Join one of M chat rooms (see [`JoinStep`]).
    ChatJoin(JoinStep),
    /// Send chat messages to the room joined last and measure their delivery (see [`ChatStep`]).
    Chat(ChatStep),
    /// Call server functions at random intervals (see [`crate::steps::rpc`]).
    Rpc {
        /// The functions, one chosen per call in proportion to its weight.
        functions: Vec<RpcFunction>,
        /// The wait before each call, fixed or drawn from [min, max].
        interval_s: Interval,
        /// How long to keep calling; until the run ends when absent.
        duration_s: Option<Seconds>,
        /// How long to wait for each answer (the scenario's `timeout_s` by default).
        timeout_s: Option<Seconds>,
        transport: Transport,
    },
}

impl Step {
    /// The step's name as written in `do = "…"`.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Authenticate { .. } => "authenticate",
            Step::Connect { .. } => "connect",
            Step::Heartbeat { .. } => "heartbeat",
            Step::Wait { .. } => "wait",
            Step::Disconnect { .. } => "disconnect",
            Step::Game(g) => g.name(),
            Step::ChatJoin(_) => "chat_join",
            Step::Chat(_) => "chat",
            Step::Rpc { .. } => "rpc",
        }
    }

    /// Whether the step uses the session token (so it must be kept until then).
    pub fn needs_token(&self) -> bool {
        matches!(
            self,
            Step::Connect { .. }
                | Step::Rpc {
                    transport: Transport::Http,
                    ..
                }
        ) || matches!(self, Step::Game(g) if g.needs_token())
    }
}

/// `JoinMatch` → `join_match`, as written in `do = "…"`.
fn snake_case(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A problem found after parsing, with where it is.
struct Misplaced {
    span: std::ops::Range<usize>,
    message: String,
}

impl RawStep {
    /// Checks that only this kind's keys are present and builds the step.
    ///
    /// Relative file paths (`file`, `record`) are taken from `base`, the scenario file's folder.
    fn into_step(self, span: std::ops::Range<usize>, base: &Path) -> Result<Step, Misplaced> {
        let kind = *self.kind.get_ref();
        let name = snake_case(&format!("{kind:?}"));
        let allowed: &[&str] = match kind {
            StepKind::Authenticate => &["create", "reuse_accounts", "timeout_s"],
            StepKind::Connect | StepKind::Disconnect => &["timeout_s"],
            StepKind::Heartbeat => &["interval_s", "duration_s", "timeout_s"],
            StepKind::Wait => &["duration_s"],
            StepKind::Matchmake => &["query", "count", "timeout_s"],
            StepKind::JoinMatch => &["transport", "tcp_port", "timeout_s"],
            StepKind::Play => &[
                "rate_hz",
                "duration_s",
                "align",
                "lead_ms",
                "record",
                "timeout_s",
            ],
            StepKind::CreateRoom => &["handler", "capacity", "tick_rate_hz", "timeout_s"],
            StepKind::RoomConnect => &["connections", "open", "timeout_s"],
            StepKind::Replay => &["file", "timeout_s"],
            StepKind::ChatJoin => &[
                "channels",
                "group_size",
                "room_prefix",
                "persistence",
                "hidden",
                "timeout_s",
            ],
            StepKind::Chat => &[
                "send_interval_s",
                "message_bytes",
                "duration_s",
                "timeout_s",
            ],
            StepKind::Rpc => &[
                "functions",
                "interval_s",
                "duration_s",
                "timeout_s",
                "transport",
            ],
        };
        let present = [
            ("create", self.create.as_ref().map(|v| v.span())),
            (
                "reuse_accounts",
                self.reuse_accounts.as_ref().map(|v| v.span()),
            ),
            ("interval_s", self.interval_s.as_ref().map(|v| v.span())),
            ("duration_s", self.duration_s.as_ref().map(|v| v.span())),
            ("timeout_s", self.timeout_s.as_ref().map(|v| v.span())),
            ("query", self.query.as_ref().map(|v| v.span())),
            ("count", self.count.as_ref().map(|v| v.span())),
            ("transport", self.transport.as_ref().map(|v| v.span())),
            ("tcp_port", self.tcp_port.as_ref().map(|v| v.span())),
            ("rate_hz", self.rate_hz.as_ref().map(|v| v.span())),
            ("align", self.align.as_ref().map(|v| v.span())),
            ("lead_ms", self.lead_ms.as_ref().map(|v| v.span())),
            ("record", self.record.as_ref().map(|v| v.span())),
            ("handler", self.handler.as_ref().map(|v| v.span())),
            ("capacity", self.capacity.as_ref().map(|v| v.span())),
            ("tick_rate_hz", self.tick_rate_hz.as_ref().map(|v| v.span())),
            ("connections", self.connections.as_ref().map(|v| v.span())),
            ("open", self.open.as_ref().map(|v| v.span())),
            ("file", self.file.as_ref().map(|v| v.span())),
            ("channels", self.channels.as_ref().map(|v| v.span())),
            ("group_size", self.group_size.as_ref().map(|v| v.span())),
            ("room_prefix", self.room_prefix.as_ref().map(|v| v.span())),
            ("persistence", self.persistence.as_ref().map(|v| v.span())),
            ("hidden", self.hidden.as_ref().map(|v| v.span())),
            (
                "send_interval_s",
                self.send_interval_s.as_ref().map(|v| v.span()),
            ),
            (
                "message_bytes",
                self.message_bytes.as_ref().map(|v| v.span()),
            ),
            ("functions", self.functions.as_ref().map(|v| v.span())),
        ];
        for (key, at) in present {
            if let Some(at) = at {
                if !allowed.contains(&key) {
                    return Err(Misplaced {
                        span: at,
                        message: format!(
                            "key `{key}` does not apply to do = \"{name}\" (its keys: {})",
                            allowed.join(", ")
                        ),
                    });
                }
            }
        }
        let need = |v: Option<Spanned<Seconds>>, key: &str| {
            v.map(Spanned::into_inner).ok_or_else(|| Misplaced {
                span: span.clone(),
                message: format!("do = \"{name}\" needs `{key}`"),
            })
        };
        let inner = |v: Option<Spanned<Seconds>>| v.map(Spanned::into_inner);
        let interval = |v: Option<Spanned<Interval>>| {
            v.ok_or_else(|| Misplaced {
                span: span.clone(),
                message: format!("do = \"{name}\" needs `interval_s`"),
            })
        };
        Ok(match kind {
            StepKind::Authenticate => Step::Authenticate {
                create: self.create.map(Spanned::into_inner).unwrap_or(true),
                reuse_accounts: self
                    .reuse_accounts
                    .map(Spanned::into_inner)
                    .unwrap_or(false),
                timeout_s: inner(self.timeout_s),
            },
            StepKind::Connect => Step::Connect {
                timeout_s: inner(self.timeout_s),
            },
            StepKind::Heartbeat => Step::Heartbeat {
                interval_s: {
                    let spanned = interval(self.interval_s)?;
                    match *spanned.get_ref() {
                        Interval::Fixed(s) => s,
                        Interval::Range(..) => {
                            return Err(Misplaced {
                                span: spanned.span(),
                                message: "key `interval_s`: a heartbeat's interval is one number \
                                          (a fixed schedule), not a range"
                                    .into(),
                            })
                        }
                    }
                },
                duration_s: inner(self.duration_s),
                timeout_s: inner(self.timeout_s),
            },
            StepKind::Wait => Step::Wait {
                duration_s: need(self.duration_s, "duration_s")?,
            },
            StepKind::Disconnect => Step::Disconnect {
                timeout_s: inner(self.timeout_s),
            },
            StepKind::Matchmake
            | StepKind::JoinMatch
            | StepKind::Play
            | StepKind::CreateRoom
            | StepKind::RoomConnect
            | StepKind::Replay => {
                let game = crate::steps::game::RawGameStep {
                    query: self.query.map(Spanned::into_inner),
                    count: self.count.map(Spanned::into_inner),
                    transport: match self.transport {
                        None => None,
                        Some(t) => Some(match *t.get_ref() {
                            TransportKey::Websocket => crate::steps::game::Transport::Websocket,
                            TransportKey::Tcp => crate::steps::game::Transport::Tcp,
                            TransportKey::Socket | TransportKey::Http => {
                                return Err(Misplaced {
                                    span: t.span(),
                                    message: "key `transport`: \"websocket\" or \"tcp\" here"
                                        .into(),
                                })
                            }
                        }),
                    },
                    tcp_port: self.tcp_port.map(Spanned::into_inner),
                    rate_hz: self.rate_hz.map(Spanned::into_inner),
                    duration_s: inner(self.duration_s),
                    align: self.align.map(Spanned::into_inner),
                    lead_ms: self.lead_ms.map(Spanned::into_inner),
                    record: self.record.map(|f| relative_to(base, f.into_inner())),
                    handler: self.handler.map(Spanned::into_inner),
                    capacity: self.capacity.map(Spanned::into_inner),
                    tick_rate_hz: self.tick_rate_hz.map(Spanned::into_inner),
                    connections: self.connections.map(Spanned::into_inner),
                    open: self.open.map(Spanned::into_inner),
                    file: self.file.map(|f| relative_to(base, f.into_inner())),
                    timeout_s: inner(self.timeout_s),
                };
                let step = match kind {
                    StepKind::Matchmake => game.matchmake(),
                    StepKind::JoinMatch => game.join_match(),
                    StepKind::Play => game.play(),
                    StepKind::CreateRoom => game.create_room(),
                    StepKind::RoomConnect => game.room_connect(),
                    _ => game.replay(),
                };
                Step::Game(step.map_err(|message| Misplaced {
                    span: span.clone(),
                    message: format!("do = \"{name}\": {message}"),
                })?)
            }
            StepKind::ChatJoin => {
                let positive = |v: Option<Spanned<u64>>, key: &str| match v {
                    Some(n) if *n.get_ref() == 0 => Err(Misplaced {
                        span: n.span(),
                        message: format!("key `{key}`: must be at least 1"),
                    }),
                    other => Ok(other.map(Spanned::into_inner)),
                };
                let channels = positive(self.channels, "channels")?.ok_or_else(|| Misplaced {
                    span: span.clone(),
                    message: format!("do = \"{name}\" needs `channels`"),
                })?;
                let room_prefix = match self.room_prefix {
                    Some(p) if !valid_room_prefix(p.get_ref()) => {
                        return Err(Misplaced {
                            span: p.span(),
                            message: "key `room_prefix`: 1 to 40 letters, digits, '-' or '_'"
                                .into(),
                        })
                    }
                    Some(p) => p.into_inner(),
                    None => "swarm".into(),
                };
                Step::ChatJoin(JoinStep {
                    channels,
                    group_size: positive(self.group_size, "group_size")?,
                    room_prefix,
                    persistence: self.persistence.map(Spanned::into_inner).unwrap_or(false),
                    hidden: self.hidden.map(Spanned::into_inner).unwrap_or(false),
                    timeout_s: inner(self.timeout_s),
                })
            }
            StepKind::Chat => Step::Chat(ChatStep {
                interval_s: self
                    .send_interval_s
                    .map(Spanned::into_inner)
                    .ok_or_else(|| Misplaced {
                        span: span.clone(),
                        message: format!("do = \"{name}\" needs `send_interval_s`"),
                    })?,
                message_bytes: self
                    .message_bytes
                    .map(Spanned::into_inner)
                    .unwrap_or(BytesRange(10, 100)),
                duration_s: inner(self.duration_s),
                timeout_s: inner(self.timeout_s),
            }),
            StepKind::Rpc => {
                let functions = self.functions.ok_or_else(|| Misplaced {
                    span: span.clone(),
                    message: "do = \"rpc\" needs `functions`".into(),
                })?;
                let at = functions.span();
                let raw = functions.into_inner();
                if raw.is_empty() {
                    return Err(Misplaced {
                        span: at,
                        message: "key `functions`: list at least one function".into(),
                    });
                }
                let functions = raw
                    .into_iter()
                    .map(RawFunction::check)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|message| Misplaced {
                        span: at.clone(),
                        message: format!("key `functions`: {message}"),
                    })?;
                Step::Rpc {
                    functions,
                    interval_s: *interval(self.interval_s)?.get_ref(),
                    duration_s: inner(self.duration_s),
                    timeout_s: inner(self.timeout_s),
                    transport: match self.transport {
                        None => Transport::Socket,
                        Some(t) => match *t.get_ref() {
                            TransportKey::Socket => Transport::Socket,
                            TransportKey::Http => Transport::Http,
                            TransportKey::Websocket | TransportKey::Tcp => {
                                return Err(Misplaced {
                                    span: t.span(),
                                    message: "key `transport`: \"socket\" or \"http\" here".into(),
                                })
                            }
                        },
                    },
                }
            }
        })
    }
}

/// Room prefixes go into JSON by hand in the join request, so they are kept to safe characters.
fn valid_room_prefix(prefix: &str) -> bool {
    (1..=40).contains(&prefix.len())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: cannot read the scenario: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}\n{snippet}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
        snippet: String,
    },
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Scenario::parse(&text, &path.display().to_string())
    }

    /// Parses and validates scenario text; `origin` names the file in error messages.
    /// Relative paths inside it (replay files) are relative to `origin`'s folder, so a scenario
    /// runs the same from any working directory.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let base = Path::new(origin).parent().unwrap_or(Path::new(""));
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            invalid(text, origin, span, e.message())
        })?;
        let mut steps = Vec::with_capacity(raw.steps.len());
        let mut spans = Vec::with_capacity(raw.steps.len());
        for step in raw.steps {
            let span = step.span();
            let step = step
                .into_inner()
                .into_step(span.clone(), base)
                .map_err(|m| invalid(text, origin, m.span, &m.message))?;
            steps.push(step);
            spans.push(span);
        }
        let scenario = Scenario {
            name: raw.name,
            description: raw.description,
            timeout_s: raw.timeout_s,
            grace_s: raw.grace_s,
            phases: raw.phases,
            steps,
        };
        scenario.validate(text, origin, &spans)?;
        Ok(scenario)
    }

    /// Checks what serde cannot: totals, and that the steps make sense in their order.
    fn validate(
        &self,
        text: &str,
        origin: &str,
        spans: &[std::ops::Range<usize>],
    ) -> Result<(), ScenarioError> {
        let top = 0..0;
        if self.phases.is_empty() {
            return Err(invalid(
                text,
                origin,
                top,
                "`phases`: at least one phase is needed",
            ));
        }
        if self.steps.is_empty() {
            return Err(invalid(
                text,
                origin,
                top,
                "`steps`: at least one step is needed",
            ));
        }
        for (i, phase) in self.phases.iter().enumerate() {
            let at = find_nth_table(text, "phases", i);
            let who = format!("phases[{i}]");
            match (phase.players, phase.arrival_rate) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        text,
                        origin,
                        at,
                        &format!("{who}: set either `players` or `arrival_rate`, not both"),
                    ))
                }
                (_, Some(rate)) if !(rate.is_finite() && rate >= 0.0) => {
                    return Err(invalid(
                        text,
                        origin,
                        at,
                        &format!("{who}: `arrival_rate` must be a non-negative number"),
                    ))
                }
                _ => {}
            }
            if phase.peak.is_some() && !matches!(phase.shape, Some(Shape::Bell | Shape::Spike)) {
                return Err(invalid(
                    text,
                    origin,
                    at,
                    &format!("{who}: `peak` only applies to shape \"bell\" or \"spike\""),
                ));
            }
        }
        if self.schedule().total_players() == 0 {
            return Err(invalid(
                text,
                origin,
                top,
                "`phases`: no phase brings any player (set `players` or `arrival_rate`)",
            ));
        }

        // Walk the steps with what a player would have at that point.
        let mut authenticated = false;
        let mut connected = false;
        let mut joined = false;
        let mut endless = false;
        let mut game = crate::steps::game::Progress::default();
        for (i, step) in self.steps.iter().enumerate() {
            let span = spans.get(i).cloned().unwrap_or(0..0);
            let who = format!("steps[{i}] (do = \"{}\")", step.name());
            let fail = |msg: &str| {
                Err(invalid(
                    text,
                    origin,
                    span.clone(),
                    &format!("{who}: {msg}"),
                ))
            };
            if endless && !matches!(step, Step::Disconnect { .. }) {
                return fail(
                    "unreachable: the heartbeat, chat or rpc step before it has no `duration_s`, so it \
                     lasts until the run ends",
                );
            }
            match step {
                Step::Authenticate { .. } => authenticated = true,
                Step::Connect { .. } => {
                    if !authenticated {
                        return fail("needs a session: add an `authenticate` step before it");
                    }
                    if connected {
                        return fail("the socket is already open");
                    }
                    connected = true;
                    joined = false;
                }
                Step::Heartbeat { duration_s, .. } => {
                    if !connected {
                        return fail("needs an open socket: add a `connect` step before it");
                    }
                    endless = duration_s.is_none();
                }
                Step::Wait { .. } => {}
                Step::Rpc {
                    transport,
                    duration_s,
                    ..
                } => {
                    match transport {
                        Transport::Socket if !connected => {
                            return fail("needs an open socket: add a `connect` step before it (or transport = \"http\")");
                        }
                        Transport::Http if !authenticated => {
                            return fail("needs a session: add an `authenticate` step before it");
                        }
                        _ => {}
                    }
                    endless = duration_s.is_none();
                }
                Step::Disconnect { .. } => {
                    if !connected {
                        return fail("no socket is open here");
                    }
                    connected = false;
                    joined = false;
                }
                Step::ChatJoin(_) => {
                    if !connected {
                        return fail("needs an open socket: add a `connect` step before it");
                    }
                    joined = true;
                }
                Step::Chat(chat) => {
                    if !joined {
                        return fail("needs a room: add a `chat_join` step before it");
                    }
                    endless = chat.duration_s.is_none();
                }
                Step::Game(g) => {
                    if let Err(message) = game.check(g, authenticated, connected) {
                        return fail(&message);
                    }
                }
            }
        }
        Ok(())
    }

    /// The arrival schedule the phases describe.
    pub fn schedule(&self) -> Schedule {
        let mut start_s = 0.0;
        let phases = self
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let shape = p.shape.unwrap_or(Shape::Linear);
                let players = match (p.players, p.arrival_rate) {
                    (Some(n), _) => n,
                    (None, Some(rate)) => (rate * p.duration_s.0).round() as u64,
                    (None, None) => 0,
                };
                let plan = PhasePlan {
                    name: p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1)),
                    start_s,
                    duration_s: p.duration_s.0,
                    players,
                    curve: Curve {
                        shape,
                        peak: p.peak.map(|x| x.0).unwrap_or(shape.default_peak()),
                    },
                };
                start_s += p.duration_s.0;
                plan
            })
            .collect();
        Schedule { phases }
    }
}

/// Span of the `n`th `[[name]]` header, so table-level errors point at the right phase.
fn find_nth_table(text: &str, name: &str, n: usize) -> std::ops::Range<usize> {
    let header = format!("[[{name}]]");
    let mut offset = 0;
    let mut seen = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == header {
            if seen == n {
                return offset..offset + line.trim_end().len();
            }
            seen += 1;
        }
        offset += line.len();
    }
    0..0
}

/// Builds an error pointing at `span`, naming the key written on that line when there is one.
/// `file` as written, joined to `base` unless it is absolute.
fn relative_to(base: &Path, file: String) -> String {
    let path = Path::new(&file);
    if path.is_absolute() || base.as_os_str().is_empty() {
        file
    } else {
        base.join(path).display().to_string()
    }
}

fn invalid(text: &str, origin: &str, span: std::ops::Range<usize>, message: &str) -> ScenarioError {
    let start = span.start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    let line_text = text[line_start..].lines().next().unwrap_or("");
    let mut message = message.to_string();
    // Serde reports a bad value without its key ("invalid type: string, expected a number"):
    // name the key from the source line when the message does not already.
    if let Some((key, _)) = line_text.split_once('=') {
        let key = key.trim();
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if is_key && !message.contains(&format!("`{key}`")) {
            message = format!("key `{key}`: {message}");
        }
    }
    ScenarioError::Invalid {
        path: origin.to_string(),
        line,
        column,
        message,
        snippet: format!("{line:>5} | {line_text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"

[[phases]]
name = "ramp"
duration_s = 10
shape = "bell"
players = 100

[[phases]]
duration_s = 5
arrival_rate = 2.5

[[phases]]
duration_s = 5

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "heartbeat"
interval_s = 1
duration_s = 3

[[steps]]
do = "wait"
duration_s = 0.5

[[steps]]
do = "disconnect"
"#;

    fn error_of(text: &str) -> (usize, String) {
        match Scenario::parse(text, "t.toml") {
            Err(ScenarioError::Invalid { line, message, .. }) => (line, message),
            other => panic!("expected an invalid-scenario error, got {other:?}"),
        }
    }

    #[test]
    fn parses_a_good_scenario_with_defaults() {
        let s = Scenario::parse(GOOD, "t.toml").expect("valid");
        assert_eq!(s.timeout_s, Seconds(10.0));
        assert_eq!(s.grace_s, Seconds(5.0));
        let sched = s.schedule();
        assert_eq!(sched.total_players(), 113);
        assert_eq!(sched.duration_s(), 20.0);
        assert_eq!(sched.phases[1].name, "phase 2");
        assert_eq!(sched.phases[1].start_s, 10.0);
        assert_eq!(sched.phases[0].curve.peak, 0.7);
        assert_eq!(
            s.steps[0],
            Step::Authenticate {
                create: true,
                reuse_accounts: false,
                timeout_s: None
            }
        );
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let text = GOOD.replace("interval_s = 1", "intervl_s = 1");
        let (line, msg) = error_of(&text);
        assert_eq!(line, 25, "{msg}");
        assert!(msg.contains("intervl_s"), "{msg}");
    }

    #[test]
    fn unknown_top_level_and_phase_keys_are_named() {
        let (line, msg) = error_of(&GOOD.replace("name = \"t\"", "name = \"t\"\nworkers = 3"));
        assert_eq!(line, 3);
        assert!(msg.contains("workers"), "{msg}");
        let (line, msg) = error_of(&GOOD.replace("players = 100", "playerz = 100"));
        assert_eq!(line, 8);
        assert!(msg.contains("playerz"), "{msg}");
    }

    #[test]
    fn bad_values_name_key_and_line() {
        let (line, msg) = error_of(&GOOD.replace("duration_s = 10", "duration_s = \"ten\""));
        assert_eq!(line, 6);
        assert!(msg.contains("duration_s"), "{msg}");
        let (line, msg) = error_of(&GOOD.replace("duration_s = 10", "duration_s = -1"));
        assert_eq!(line, 6);
        assert!(
            msg.contains("duration_s") && msg.contains("positive"),
            "{msg}"
        );
        let (line, msg) = error_of(&GOOD.replace("shape = \"bell\"", "shape = \"square\""));
        assert_eq!(line, 7);
        assert!(msg.contains("shape") && msg.contains("square"), "{msg}");
        let (line, msg) = error_of(&GOOD.replace("do = \"wait\"", "do = \"dance\""));
        assert!((28..=30).contains(&line), "line {line}: {msg}");
        assert!(msg.contains("dance"), "{msg}");
    }

    #[test]
    fn keys_of_another_step_are_rejected_at_their_line() {
        let (line, msg) =
            error_of(&GOOD.replace("do = \"connect\"", "do = \"connect\"\ninterval_s = 3"));
        assert_eq!(line, 22);
        assert!(
            msg.contains("interval_s") && msg.contains("connect"),
            "{msg}"
        );
        let (line, msg) = error_of(&GOOD.replace("interval_s = 1", "interval_s = \"1s\""));
        assert_eq!(line, 25);
        assert!(msg.contains("interval_s"), "{msg}");
    }

    #[test]
    fn missing_required_key_is_reported() {
        let (_, msg) = error_of(&GOOD.replace("interval_s = 1\n", ""));
        assert!(msg.contains("interval_s"), "{msg}");
        let (_, msg) = error_of("phases = []\nsteps = []\n");
        assert!(msg.contains("name"), "{msg}");
    }

    #[test]
    fn phase_cross_checks() {
        let (line, msg) =
            error_of(&GOOD.replace("players = 100", "players = 100\narrival_rate = 3"));
        assert_eq!(line, 4);
        assert!(
            msg.contains("players") && msg.contains("arrival_rate"),
            "{msg}"
        );
        let (line, msg) =
            error_of(&GOOD.replace("arrival_rate = 2.5", "arrival_rate = 2.5\npeak = 0.5"));
        assert_eq!(line, 10);
        assert!(msg.contains("peak"), "{msg}");
        let (line, msg) =
            error_of(&GOOD.replace("shape = \"bell\"", "shape = \"bell\"\npeak = 1.5"));
        assert_eq!(line, 8);
        assert!(msg.contains("peak"), "{msg}");
        let no_players = GOOD
            .replace("players = 100", "")
            .replace("arrival_rate = 2.5", "");
        let (_, msg) = error_of(&no_players);
        assert!(msg.contains("no phase brings any player"), "{msg}");
    }

    #[test]
    fn steps_must_be_in_a_possible_order() {
        let no_auth = GOOD.replace("do = \"authenticate\"", "do = \"wait\"\nduration_s = 1");
        let (line, msg) = error_of(&no_auth);
        assert_eq!(line, 21, "{msg}");
        assert!(
            msg.contains("steps[1]") && msg.contains("authenticate"),
            "{msg}"
        );

        let no_connect = GOOD.replace("do = \"connect\"", "do = \"wait\"\nduration_s = 1");
        let (line, msg) = error_of(&no_connect);
        assert_eq!(line, 24, "{msg}");
        assert!(msg.contains("steps[2]") && msg.contains("connect"), "{msg}");

        let endless = GOOD.replace("duration_s = 3\n", "");
        let (line, msg) = error_of(&endless);
        assert_eq!(line, 27, "{msg}");
        assert!(msg.contains("unreachable"), "{msg}");
    }

    #[test]
    fn bundled_scenarios_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        for name in [
            "smoke.toml",
            "connect-and-heartbeat.toml",
            "match-15hz.toml",
            "rooms-replay.toml",
            "chat-fanout.toml",
            "economy.toml",
        ] {
            let s = Scenario::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(s.schedule().total_players() > 0);
        }
    }
}
