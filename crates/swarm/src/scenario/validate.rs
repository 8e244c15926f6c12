//! Checks on a parsed scenario that serde cannot make: that the phases bring players, and that
//! the steps come in an order a player can follow (a session before a socket, a socket before a
//! heartbeat, nothing after a step that lasts until the run ends).

use std::ops::Range;

use super::ramp::Shape;
use super::rpc::Transport;
use super::{game, invalid, metagame, Scenario, ScenarioError, Step};

/// Checks what serde cannot: totals, and that the steps make sense in their order.
pub(super) fn validate(
    scenario: &Scenario,
    text: &str,
    origin: &str,
    spans: &[Range<usize>],
) -> Result<(), ScenarioError> {
    let top = 0..0;
    if scenario.phases.is_empty() {
        return Err(invalid(
            text,
            origin,
            top,
            "`phases`: at least one phase is needed",
        ));
    }
    if scenario.steps.is_empty() {
        return Err(invalid(
            text,
            origin,
            top,
            "`steps`: at least one step is needed",
        ));
    }
    for (i, phase) in scenario.phases.iter().enumerate() {
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
    if scenario.schedule().total_players() == 0 {
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
    // Whether the open socket speaks protobuf, which only some steps do.
    let mut protobuf = false;
    let mut joined = false;
    let mut endless = false;
    let mut game = game::Progress::default();
    for (i, step) in scenario.steps.iter().enumerate() {
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
                "unreachable: the heartbeat, chat, rpc, storage or leaderboard step before it has \
                 no `duration_s`, so it lasts until the run ends",
            );
        }
        // Steps that write or read JSON on the socket.
        let speaks_json = matches!(
            step,
            Step::Heartbeat { .. }
                | Step::ChatJoin(_)
                | Step::Chat(_)
                | Step::Game(_)
                | Step::Rpc {
                    transport: Transport::Socket,
                    ..
                }
        );
        if connected && protobuf && speaks_json {
            return fail(
                "the socket speaks protobuf (`format = \"protobuf\"` on its `connect`), which \
                 only the `world`, `wait` and `disconnect` steps do",
            );
        }
        match step {
            Step::Authenticate { .. } => authenticated = true,
            Step::Connect { format, .. } => {
                protobuf = *format == crate::scenario::SocketFormat::Protobuf;
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
                    Transport::Http | Transport::Graphql if !authenticated => {
                        return fail("needs a session: add an `authenticate` step before it");
                    }
                    _ => {}
                }
                endless = duration_s.is_none();
            }
            Step::Storage(metagame::StorageStep { duration_s, .. })
            | Step::Leaderboard(metagame::LeaderboardStep { duration_s, .. }) => {
                if !authenticated {
                    return fail("needs a session: add an `authenticate` step before it");
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
            Step::World(_) => {
                if !connected {
                    return fail("needs an open socket: add a `connect` step before it");
                }
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

/// Span of the `n`th `[[name]]` header, so table-level errors point at the right phase.
fn find_nth_table(text: &str, name: &str, n: usize) -> Range<usize> {
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
