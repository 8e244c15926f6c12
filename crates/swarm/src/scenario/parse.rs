//! Reading a scenario file: TOML into a [`Scenario`], key by key.
//!
//! Every step kind accepts only its own keys. A step is read as `RawStep`, one struct with every
//! key any step may have, each with its TOML span, and then checked against its kind, so a
//! misplaced or mistyped key is reported at its own line. What needs the whole scenario (totals,
//! the order of the steps) is checked afterwards, in `validate.rs`.

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::chat::{BytesRange, ChatStep, JoinStep, SecondsRange};
use super::game;
use super::metagame::{
    check_count, check_keys_fit, LeaderboardStep, Name, Ratio, ScoreRange, StorageStep, MAX_KEYS,
    MAX_LIMIT, MAX_VALUE_BYTES, MIN_VALUE_BYTES,
};
use super::rpc::{Interval, RawFunction, RawQuery, Transport};
use super::{invalid, Phase, Scenario, ScenarioError, Seconds, Step};

/// Parses `text` into a scenario, with the span of each step for the order check's messages.
/// Relative paths inside it (replay files) are resolved against `origin`'s folder.
pub(super) fn parse(
    text: &str,
    origin: &str,
) -> Result<(Scenario, Vec<Range<usize>>), ScenarioError> {
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
    Ok((scenario, spans))
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
    Graphql,
    World,
    Storage,
    Leaderboard,
}

/// `transport = "…"` as written. One key serves three steps: `join_match` takes `websocket`,
/// `tcp` or `enet`, `room_connect` `tcp` or `enet`, `rpc` `socket` or `http`; each step refuses
/// the others' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TransportKey {
    Websocket,
    Tcp,
    Enet,
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
    // Match and room steps (see `game`).
    query: Option<Spanned<String>>,
    count: Option<Spanned<u32>>,
    /// `join_match` (`websocket`, `tcp`) and `rpc` (`socket`, `http`).
    transport: Option<Spanned<TransportKey>>,
    tcp_port: Option<Spanned<u16>>,
    enet_port: Option<Spanned<u16>>,
    rate_hz: Option<Spanned<f64>>,
    align: Option<Spanned<game::Align>>,
    lead_ms: Option<Spanned<f64>>,
    record: Option<Spanned<String>>,
    handler: Option<Spanned<String>>,
    capacity: Option<Spanned<u32>>,
    tick_rate_hz: Option<Spanned<u32>>,
    connections: Option<Spanned<u32>>,
    open: Option<Spanned<bool>>,
    /// `room_connect`: `muster` or `lines`.
    protocol: Option<Spanned<game::Protocol>>,
    file: Option<Spanned<String>>,
    channels: Option<Spanned<u64>>,
    group_size: Option<Spanned<u64>>,
    room_prefix: Option<Spanned<String>>,
    persistence: Option<Spanned<bool>>,
    hidden: Option<Spanned<bool>>,
    send_interval_s: Option<Spanned<SecondsRange>>,
    message_bytes: Option<Spanned<BytesRange>>,
    functions: Option<Spanned<Vec<RawFunction>>>,
    /// `graphql`: its query templates.
    queries: Option<Spanned<Vec<RawQuery>>>,
    /// `connect`: `json` or `protobuf`.
    format: Option<Spanned<super::SocketFormat>>,
    /// `authenticate`, `storage`, `leaderboard`: `rest` or `grpc`.
    api: Option<Spanned<super::Api>>,
    // The `world` step (see `world`).
    shard: Option<Spanned<u32>>,
    center: Option<Spanned<Vec<f64>>>,
    spread_m: Option<Spanned<f64>>,
    box_m: Option<Spanned<f64>>,
    pan_every_s: Option<Spanned<Seconds>>,
    pan_m: Option<Spanned<f64>>,
    claim_every_s: Option<Spanned<Seconds>>,
    buildings: Option<Spanned<u32>>,
    // The `storage` and `leaderboard` steps (see `metagame`).
    collection: Option<Spanned<Name>>,
    key: Option<Spanned<Name>>,
    keys: Option<Spanned<u32>>,
    value_bytes: Option<Spanned<u32>>,
    read_ratio: Option<Spanned<Ratio>>,
    leaderboard: Option<Spanned<Name>>,
    score: Option<Spanned<ScoreRange>>,
    limit: Option<Spanned<u32>>,
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
    span: Range<usize>,
    message: String,
}

/// A step's required, non-empty list `key` (of `do = "step"`), each entry checked by `check`.
fn checked_list<R, T>(
    list: Option<Spanned<Vec<R>>>,
    span: &Range<usize>,
    step: &str,
    key: &str,
    check: fn(R) -> Result<T, String>,
) -> Result<Vec<T>, Misplaced> {
    let list = list.ok_or_else(|| Misplaced {
        span: span.clone(),
        message: format!("do = \"{step}\" needs `{key}`"),
    })?;
    let at = list.span();
    let raw = list.into_inner();
    if raw.is_empty() {
        return Err(Misplaced {
            span: at,
            message: format!("key `{key}`: list at least one entry"),
        });
    }
    raw.into_iter()
        .map(check)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|message| Misplaced {
            span: at.clone(),
            message: format!("key `{key}`: {message}"),
        })
}

impl RawStep {
    /// Checks that only this kind's keys are present and builds the step.
    ///
    /// Relative file paths (`file`, `record`) are taken from `base`, the scenario file's folder.
    fn into_step(self, span: Range<usize>, base: &Path) -> Result<Step, Misplaced> {
        let kind = *self.kind.get_ref();
        let name = snake_case(&format!("{kind:?}"));
        let allowed: &[&str] = match kind {
            StepKind::Authenticate => &["create", "reuse_accounts", "api", "timeout_s"],
            StepKind::Connect => &["format", "timeout_s"],
            StepKind::Disconnect => &["timeout_s"],
            StepKind::Heartbeat => &["interval_s", "duration_s", "timeout_s"],
            StepKind::Wait => &["duration_s"],
            StepKind::Matchmake => &["query", "count", "timeout_s"],
            StepKind::JoinMatch => &["transport", "tcp_port", "enet_port", "timeout_s"],
            StepKind::Play => &[
                "rate_hz",
                "duration_s",
                "align",
                "lead_ms",
                "record",
                "timeout_s",
            ],
            StepKind::CreateRoom => &["handler", "capacity", "tick_rate_hz", "timeout_s"],
            StepKind::RoomConnect => &["connections", "open", "transport", "protocol", "timeout_s"],
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
            StepKind::Graphql => &["queries", "interval_s", "duration_s", "timeout_s"],
            StepKind::World => &[
                "shard",
                "center",
                "spread_m",
                "box_m",
                "pan_every_s",
                "pan_m",
                "claim_every_s",
                "buildings",
                "duration_s",
                "timeout_s",
            ],
            StepKind::Storage => &[
                "api",
                "collection",
                "key",
                "keys",
                "value_bytes",
                "read_ratio",
                "interval_s",
                "duration_s",
                "timeout_s",
            ],
            StepKind::Leaderboard => &[
                "api",
                "leaderboard",
                "score",
                "limit",
                "read_ratio",
                "interval_s",
                "duration_s",
                "timeout_s",
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
            ("format", self.format.as_ref().map(|v| v.span())),
            ("api", self.api.as_ref().map(|v| v.span())),
            ("tcp_port", self.tcp_port.as_ref().map(|v| v.span())),
            ("enet_port", self.enet_port.as_ref().map(|v| v.span())),
            ("rate_hz", self.rate_hz.as_ref().map(|v| v.span())),
            ("align", self.align.as_ref().map(|v| v.span())),
            ("lead_ms", self.lead_ms.as_ref().map(|v| v.span())),
            ("record", self.record.as_ref().map(|v| v.span())),
            ("handler", self.handler.as_ref().map(|v| v.span())),
            ("capacity", self.capacity.as_ref().map(|v| v.span())),
            ("tick_rate_hz", self.tick_rate_hz.as_ref().map(|v| v.span())),
            ("connections", self.connections.as_ref().map(|v| v.span())),
            ("open", self.open.as_ref().map(|v| v.span())),
            ("protocol", self.protocol.as_ref().map(|v| v.span())),
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
            ("queries", self.queries.as_ref().map(|v| v.span())),
            ("shard", self.shard.as_ref().map(|v| v.span())),
            ("center", self.center.as_ref().map(|v| v.span())),
            ("spread_m", self.spread_m.as_ref().map(|v| v.span())),
            ("box_m", self.box_m.as_ref().map(|v| v.span())),
            ("pan_every_s", self.pan_every_s.as_ref().map(|v| v.span())),
            ("pan_m", self.pan_m.as_ref().map(|v| v.span())),
            (
                "claim_every_s",
                self.claim_every_s.as_ref().map(|v| v.span()),
            ),
            ("buildings", self.buildings.as_ref().map(|v| v.span())),
            ("collection", self.collection.as_ref().map(|v| v.span())),
            ("key", self.key.as_ref().map(|v| v.span())),
            ("keys", self.keys.as_ref().map(|v| v.span())),
            ("value_bytes", self.value_bytes.as_ref().map(|v| v.span())),
            ("read_ratio", self.read_ratio.as_ref().map(|v| v.span())),
            ("leaderboard", self.leaderboard.as_ref().map(|v| v.span())),
            ("score", self.score.as_ref().map(|v| v.span())),
            ("limit", self.limit.as_ref().map(|v| v.span())),
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
        // A count in its range, or its default; an error points at the key's line.
        let count = |v: Option<Spanned<u32>>, key: &str, default: u32, min: u32, max: u32| match v {
            None => Ok(default),
            Some(v) => check_count(key, *v.get_ref(), min, max).map_err(|message| Misplaced {
                span: v.span(),
                message,
            }),
        };
        let read_ratio = self.read_ratio.map_or(Ratio(0.5), Spanned::into_inner);
        let api = self.api.map(Spanned::into_inner).unwrap_or_default();
        Ok(match kind {
            StepKind::Storage => {
                let keys = count(self.keys.clone(), "keys", 1, 1, MAX_KEYS)?;
                let key = self.key.map_or_else(
                    || (Name("save".into()), None),
                    |k| {
                        let at = k.span();
                        (k.into_inner(), Some(at))
                    },
                );
                check_keys_fit(&key.0, keys).map_err(|message| Misplaced {
                    span: key
                        .1
                        .or_else(|| self.keys.as_ref().map(|k| k.span()))
                        .unwrap_or_else(|| span.clone()),
                    message,
                })?;
                Step::Storage(StorageStep {
                    collection: self
                        .collection
                        .map_or_else(|| Name("swarm".into()), Spanned::into_inner),
                    key: key.0,
                    keys,
                    value_bytes: count(
                        self.value_bytes,
                        "value_bytes",
                        100,
                        MIN_VALUE_BYTES,
                        MAX_VALUE_BYTES,
                    )?,
                    read_ratio,
                    interval_s: *interval(self.interval_s)?.get_ref(),
                    duration_s: inner(self.duration_s),
                    timeout_s: inner(self.timeout_s),
                    api,
                })
            }
            StepKind::Leaderboard => Step::Leaderboard(LeaderboardStep {
                leaderboard: self.leaderboard.map(Spanned::into_inner).ok_or_else(|| {
                    Misplaced {
                        span: span.clone(),
                        message: format!("do = \"{name}\" needs `leaderboard`"),
                    }
                })?,
                score: self
                    .score
                    .map_or(ScoreRange(0, 1_000_000), Spanned::into_inner),
                limit: count(self.limit, "limit", 10, 1, MAX_LIMIT)?,
                read_ratio,
                interval_s: *interval(self.interval_s)?.get_ref(),
                duration_s: inner(self.duration_s),
                timeout_s: inner(self.timeout_s),
                api,
            }),
            StepKind::Authenticate => Step::Authenticate {
                create: self.create.map(Spanned::into_inner).unwrap_or(true),
                reuse_accounts: self
                    .reuse_accounts
                    .map(Spanned::into_inner)
                    .unwrap_or(false),
                api,
                timeout_s: inner(self.timeout_s),
            },
            StepKind::Connect => Step::Connect {
                format: self.format.map(Spanned::into_inner).unwrap_or_default(),
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
                let game = game::RawGameStep {
                    query: self.query.map(Spanned::into_inner),
                    count: self.count.map(Spanned::into_inner),
                    transport: match self.transport {
                        None => None,
                        Some(t) => Some(match *t.get_ref() {
                            TransportKey::Websocket => game::Transport::Websocket,
                            TransportKey::Tcp => game::Transport::Tcp,
                            TransportKey::Enet => game::Transport::Enet,
                            TransportKey::Socket | TransportKey::Http => {
                                return Err(Misplaced {
                                    span: t.span(),
                                    message:
                                        "key `transport`: \"websocket\", \"tcp\" or \"enet\" here"
                                            .into(),
                                })
                            }
                        }),
                    },
                    tcp_port: self.tcp_port.map(Spanned::into_inner),
                    enet_port: self.enet_port.map(Spanned::into_inner),
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
                    protocol: self.protocol.map(Spanned::into_inner),
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
            StepKind::Graphql => Step::Rpc {
                functions: checked_list(
                    self.queries,
                    &span,
                    "graphql",
                    "queries",
                    RawQuery::check,
                )?,
                interval_s: *interval(self.interval_s)?.get_ref(),
                duration_s: inner(self.duration_s),
                timeout_s: inner(self.timeout_s),
                transport: Transport::Graphql,
            },
            StepKind::Rpc => {
                let functions = checked_list(
                    self.functions,
                    &span,
                    "rpc",
                    "functions",
                    RawFunction::check,
                )?;
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
                            TransportKey::Websocket | TransportKey::Tcp | TransportKey::Enet => {
                                return Err(Misplaced {
                                    span: t.span(),
                                    message: "key `transport`: \"socket\" or \"http\" here".into(),
                                })
                            }
                        },
                    },
                }
            }
            StepKind::World => Step::World(
                super::world::RawWorldStep {
                    shard: self.shard.map(Spanned::into_inner),
                    center: self.center.map(Spanned::into_inner),
                    spread_m: self.spread_m.map(Spanned::into_inner),
                    box_m: self.box_m.map(Spanned::into_inner),
                    pan_every_s: self.pan_every_s.map(Spanned::into_inner),
                    pan_m: self.pan_m.map(Spanned::into_inner),
                    claim_every_s: self.claim_every_s.map(Spanned::into_inner),
                    buildings: self.buildings.map(Spanned::into_inner),
                    duration_s: inner(self.duration_s),
                    timeout_s: inner(self.timeout_s),
                }
                .build()
                .map_err(|message| Misplaced {
                    span: span.clone(),
                    message: format!("do = \"{name}\": {message}"),
                })?,
            ),
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

/// `file` as written, joined to `base` unless it is absolute.
fn relative_to(base: &Path, file: String) -> String {
    let path = Path::new(&file);
    if path.is_absolute() || base.as_os_str().is_empty() {
        file
    } else {
        base.join(path).display().to_string()
    }
}
