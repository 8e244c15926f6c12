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
//! it runs (that is `steps`, which reads these types). It holds:
//! - here: the scenario, its phases and its steps ([`Scenario`], [`Phase`], [`Step`]);
//! - `parse.rs`: TOML into those types, each step kind taking only its own keys;
//! - `validate.rs`: what needs the whole file (players to run, steps in a possible order);
//! - [`chat`], [`game`], [`rpc`], [`metagame`]: the keys of the chat, match/room, rpc, storage
//!   and leaderboard steps, with their
//!   defaults and ranges (kept here, not beside the code that runs them, so that reading a
//!   scenario never depends on running one);
//! - [`ramp`]: the arrival schedule the phases describe;
//! - [`replay`]: the replay file format that `replay` steps name (read and checked when the
//!   scenario is loaded, so a bad file fails before any player starts) and `play` records.

pub mod chat;
pub mod game;
pub mod metagame;
pub mod ramp;
pub mod replay;
pub mod rpc;
pub mod world;

mod parse;
mod validate;

use std::path::Path;

use serde::{Deserialize, Deserializer};

use chat::{ChatStep, JoinStep};
use ramp::{Curve, PhasePlan, Schedule, Shape};
use rpc::{Interval, RpcFunction, Transport};

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

/// One step of player behaviour.
///
/// What a realtime socket's frames carry (`connect`'s `format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketFormat {
    /// JSON text frames (the default).
    #[default]
    Json,
    /// Protobuf binary frames, as Nakama's `format=protobuf`.
    Protobuf,
}

impl SocketFormat {
    /// The value of the socket URL's `format` parameter.
    pub fn query(self) -> &'static str {
        match self {
            SocketFormat::Json => "json",
            SocketFormat::Protobuf => "protobuf",
        }
    }
}

/// Which of Nakama's APIs an HTTP step calls (`api = "…"` on `authenticate`, `storage` and
/// `leaderboard`): the REST API (the default) or the same calls over gRPC, on the server's gRPC
/// port (Nakama's convention: the HTTP port less one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    #[default]
    Rest,
    Grpc,
}

/// The vocabulary is small on purpose and grows by adding variants (chat, rpc, match…): each
/// variant carries its own keys (declared in `RawStep` and checked in `RawStep::into_step`, in
/// `parse.rs`), and
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
        /// REST or gRPC.
        api: Api,
        timeout_s: Option<Seconds>,
    },
    /// Open the realtime socket (`GET /ws?token=…&format=json`, WebSocket upgrade).
    Connect {
        /// `format = "protobuf"`: binary protobuf envelopes instead of JSON text (only the
        /// `world`, `wait` and `disconnect` steps speak it).
        format: SocketFormat,
        timeout_s: Option<Seconds>,
    },
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
    /// A match or room step (Space Ape's and Hathora's flows); see [`game::GameStep`].
    Game(game::GameStep),
    /// Join one of M chat rooms (see [`JoinStep`]).
    ChatJoin(JoinStep),
    /// Send chat messages to the room joined last and measure their delivery (see [`ChatStep`]).
    Chat(ChatStep),
    /// Pan a viewport over Muster's persistent world, claiming buildings, receiving its
    /// updates (see [`world::WorldStep`]).
    World(world::WorldStep),
    /// Call server functions at random intervals (see [`rpc`]).
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
    /// Write the player's own storage objects and read them back (see [`metagame`]).
    Storage(metagame::StorageStep),
    /// Submit scores to a leaderboard and list the records around the player (see
    /// [`metagame`]).
    Leaderboard(metagame::LeaderboardStep),
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
            Step::World(_) => "world",
            Step::Rpc {
                transport: Transport::Graphql,
                ..
            } => "graphql",
            Step::Rpc { .. } => "rpc",
            Step::Storage(_) => "storage",
            Step::Leaderboard(_) => "leaderboard",
        }
    }

    /// Whether the step uses the session token (so it must be kept until then).
    pub fn needs_token(&self) -> bool {
        matches!(
            self,
            Step::Connect { .. }
                | Step::Storage(_)
                | Step::Leaderboard(_)
                | Step::Rpc {
                    transport: Transport::Http | Transport::Graphql,
                    ..
                }
        ) || matches!(self, Step::Game(g) if g.needs_token())
    }
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

/// Why `--scale` cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error("--scale {0}: must be a number above 0 and at most 1000")]
    OutOfRange(f64),
    #[error("--scale {0} leaves no player to run")]
    NoPlayers(f64),
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
        let (scenario, spans) = parse::parse(text, origin)?;
        validate::validate(&scenario, text, origin, &spans)?;
        Ok(scenario)
    }

    /// The scenario shrunk (or grown) by `factor` for a smaller (or larger) fleet: every phase's
    /// players and arrival rate, and the number of chat rooms, are multiplied by it; durations,
    /// intervals and what each player does stay the scenario's. Where players matchmake in groups
    /// of `count`, a phase's players are rounded to a multiple of it so nobody waits alone.
    pub fn scaled(mut self, factor: f64) -> Result<Scenario, ScaleError> {
        if !(factor.is_finite() && factor > 0.0 && factor <= 1_000.0) {
            return Err(ScaleError::OutOfRange(factor));
        }
        if factor == 1.0 {
            return Ok(self);
        }
        let group = self
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Game(game::GameStep::Matchmake { count, .. }) => Some(u64::from(*count)),
                _ => None,
            })
            .unwrap_or(1)
            .max(1);
        for phase in &mut self.phases {
            if let Some(n) = phase.players.filter(|n| *n > 0) {
                let scaled = (n as f64 * factor / group as f64).round() as u64 * group;
                phase.players = Some(scaled.max(group));
            }
            if let Some(rate) = phase.arrival_rate {
                phase.arrival_rate = Some(rate * factor);
            }
        }
        for step in &mut self.steps {
            if let Step::ChatJoin(join) = step {
                join.channels = ((join.channels as f64 * factor).round() as u64).max(1);
            }
        }
        if self.schedule().total_players() == 0 {
            return Err(ScaleError::NoPlayers(factor));
        }
        self.description = format!("{} (scaled ×{factor})", self.description);
        Ok(self)
    }

    /// The replay files the steps read (resolved as the scenario names them).
    pub fn replay_files(&self) -> Vec<std::path::PathBuf> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Game(game::GameStep::Replay { file, .. }) => Some(file.clone()),
                _ => None,
            })
            .collect()
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

/// Builds an error pointing at `span`, naming the key written on that line when there is one.
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
                api: Api::Rest,
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
    fn a_protobuf_socket_takes_only_the_steps_that_speak_it() {
        let protobuf = GOOD.replace(
            "do = \"connect\"",
            "do = \"connect\"\nformat = \"protobuf\"",
        );
        // The heartbeat writes JSON pings.
        let (line, msg) = error_of(&protobuf);
        assert_eq!(line, 24, "{msg}");
        assert!(
            msg.contains("steps[2]") && msg.contains("protobuf"),
            "{msg}"
        );
        // Without it, wait and disconnect run on it.
        let quiet = protobuf.replace(
            "do = \"heartbeat\"\ninterval_s = 1\nduration_s = 3",
            "do = \"wait\"\nduration_s = 3",
        );
        let s = Scenario::parse(&quiet, "t.toml").expect("valid");
        assert_eq!(
            s.steps[1],
            Step::Connect {
                format: SocketFormat::Protobuf,
                timeout_s: None
            }
        );
        let (_, msg) =
            error_of(&GOOD.replace("do = \"connect\"", "do = \"connect\"\nformat = \"xml\""));
        assert!(msg.contains("format") && msg.contains("xml"), "{msg}");
    }

    #[test]
    fn seed_scenarios_parse_at_their_full_parameters() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/published");
        let load =
            |name: &str| Scenario::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for name in [
            "nakama-stability.toml",
            "nakama-chat.toml",
            "nakama-economy.toml",
        ] {
            let s = load(name);
            let sched = s.schedule();
            assert_eq!(sched.total_players(), 2_000_000, "{name}");
            assert_eq!(
                sched.phases[0].duration_s, 3000.0,
                "{name}: a 50-minute ramp"
            );
            assert_eq!(sched.duration_s(), 4.0 * 3600.0, "{name}: 4 hours");
        }
        let chat = load("nakama-chat.toml");
        assert!(chat
            .steps
            .iter()
            .any(|s| matches!(s, Step::ChatJoin(j) if j.channels == 400_000)));
        let economy = load("nakama-economy.toml");
        assert!(economy.steps.iter().any(|s| matches!(
            s,
            Step::Rpc { interval_s, functions, .. }
                if *interval_s == Interval::Range(Seconds(60.0), Seconds(120.0))
                    && functions.len() == 2
        )));
        let rooms = load("hathora-rooms.toml");
        assert_eq!(rooms.phases[0].arrival_rate, Some(30.0));
        let process_rooms = load("hathora-process-rooms.toml");
        assert_eq!(process_rooms.phases[0].arrival_rate, Some(30.0));
        assert!(process_rooms.steps.iter().any(|s| matches!(
            s,
            Step::Game(game::GameStep::RoomConnect {
                protocol: game::Protocol::Lines,
                ..
            })
        )));
        let matches = load("spaceape-match.toml");
        assert!(matches.steps.iter().any(|s| s.name() == "play"));
        assert_eq!(matches.schedule().phases[0].curve.shape, Shape::Bell);
    }

    #[test]
    fn scale_shrinks_players_rates_and_rooms_together() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/published");
        let chat = Scenario::load(&dir.join("nakama-chat.toml"))
            .unwrap()
            .scaled(0.005)
            .unwrap();
        assert_eq!(chat.schedule().total_players(), 10_000);
        assert_eq!(chat.schedule().duration_s(), 4.0 * 3600.0, "durations stay");
        assert!(chat
            .steps
            .iter()
            .any(|s| matches!(s, Step::ChatJoin(j) if j.channels == 2_000)));
        let rooms = Scenario::load(&dir.join("hathora-rooms.toml"))
            .unwrap()
            .scaled(0.1)
            .unwrap();
        assert!((rooms.phases[0].arrival_rate.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(rooms.schedule().total_players(), 10_800);
        // Matchmade pairs stay pairs.
        let matches = Scenario::load(&dir.join("spaceape-match.toml"))
            .unwrap()
            .scaled(0.0123)
            .unwrap();
        assert_eq!(matches.schedule().total_players() % 2, 0);
        assert_eq!(matches.schedule().total_players(), 124);
        // Nonsense factors and factors that leave nobody are refused.
        let good = || Scenario::parse(GOOD, "t.toml").expect("valid");
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            assert!(matches!(good().scaled(bad), Err(ScaleError::OutOfRange(_))));
        }
        // A phase that had players keeps at least one; a rate can shrink to nobody.
        assert_eq!(good().scaled(1e-6).unwrap().schedule().total_players(), 1);
        let rooms = Scenario::load(&dir.join("hathora-rooms.toml")).unwrap();
        assert!(matches!(rooms.scaled(1e-6), Err(ScaleError::NoPlayers(_))));
    }

    #[test]
    fn line_protocol_rooms_are_checked() {
        let steps = |tail: &str| {
            format!(
                "name = \"t\"\n[[phases]]\nduration_s = 1\nplayers = 1\n\
                 [[steps]]\ndo = \"authenticate\"\n[[steps]]\ndo = \"create_room\"\n{tail}"
            )
        };
        let ok = steps("[[steps]]\ndo = \"room_connect\"\nprotocol = \"lines\"\n");
        Scenario::parse(&ok, "t.toml").expect("valid");
        let (_, message) = error_of(&steps(
            "[[steps]]\ndo = \"room_connect\"\nprotocol = \"lines\"\ntransport = \"enet\"\n",
        ));
        assert!(
            message.contains("over `transport = \"tcp\"` only"),
            "{message}"
        );
        let (_, message) = error_of(&steps(
            "[[steps]]\ndo = \"room_connect\"\nprotocol = \"lines\"\n\
             [[steps]]\ndo = \"play\"\nduration_s = 1\n",
        ));
        assert!(message.contains("driven by `replay`"), "{message}");
        let (_, message) = error_of(&steps(
            "[[steps]]\ndo = \"room_connect\"\nprotocol = \"lines\"\n\
             [[steps]]\ndo = \"room_connect\"\n",
        ));
        assert!(message.contains("one protocol"), "{message}");
        let (_, message) = error_of(&steps(
            "[[steps]]\ndo = \"room_connect\"\nprotocol = \"udp\"\n",
        ));
        assert!(message.contains("protocol"), "{message}");
    }

    #[test]
    fn bundled_scenarios_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        for name in [
            "smoke.toml",
            "connect-and-heartbeat.toml",
            "match-15hz.toml",
            "match-15hz-enet.toml",
            "rooms-replay.toml",
            "chat-fanout.toml",
            "economy.toml",
            "metagame.toml",
        ] {
            let s = Scenario::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(s.schedule().total_players() > 0);
        }
    }
}
