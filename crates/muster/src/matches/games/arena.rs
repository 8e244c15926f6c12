//! "arena": the built-in authoritative example game and the match benchmark's workload.
//!
//! Players move on a square board. Each `INPUT` moves its sender one step in its direction, so a
//! player's position is the sum of every input the server applied, each exactly once. Every tick
//! the server broadcasts one `STATE` with every player's position and the sequence number of the
//! newest input it applied for them; clients measure their round trip from it. Wire format:
//! [`muster_proto::arena`].
//!
//! Room `params`: `tick_rate_hz` (1–120; default `matches.tick_rate_hz`).

use muster_proto::arena::{self, Input as Move, PlayerState, Welcome};
use muster_proto::realtime::UserPresence;
use uuid::Uuid;

use crate::matches::handler::{
    Flow, Input, MatchContext, MatchHandler, MatchParams, MatchSettings,
};

/// Distance one input moves a player.
pub const STEP: f32 = 0.5;
/// The board spans -HALF_SIZE..=HALF_SIZE on both axes.
pub const HALF_SIZE: f32 = 1000.0;

#[derive(Default)]
pub struct Arena {
    players: Vec<Player>,
    tick_rate_hz: u8,
    /// Reused STATE buffer (its capacity, not its content, survives ticks).
    scratch: Vec<u8>,
}

struct Player {
    session: Uuid,
    slot: u8,
    x: f32,
    y: f32,
    last_seq: u32,
}

impl Arena {
    fn free_slot(&self) -> u8 {
        (0..=u8::MAX)
            .find(|s| self.players.iter().all(|p| p.slot != *s))
            .unwrap_or(u8::MAX)
    }

    fn apply(&mut self, input: &Input) {
        if input.op_code != arena::OP_INPUT {
            return;
        }
        let Some(movement) = Move::decode(&input.data) else {
            return;
        };
        let Some(player) = self.players.iter_mut().find(|p| p.session == input.from) else {
            return;
        };
        // Duplicates and reordered inputs are ignored: each sequence number moves once.
        if movement.seq <= player.last_seq {
            return;
        }
        player.last_seq = movement.seq;
        player.x = (player.x + f32::from(movement.dx) * STEP).clamp(-HALF_SIZE, HALF_SIZE);
        player.y = (player.y + f32::from(movement.dy) * STEP).clamp(-HALF_SIZE, HALF_SIZE);
    }
}

impl MatchHandler for Arena {
    fn init(&mut self, params: &MatchParams) -> MatchSettings {
        let rate = params
            .params
            .get("tick_rate_hz")
            .and_then(|r| r.parse::<u32>().ok())
            .filter(|r| (1..=120).contains(r))
            .unwrap_or(params.default_tick_rate_hz)
            .clamp(1, 255);
        self.tick_rate_hz = rate as u8;
        self.players.reserve_exact(params.capacity.min(16));
        // A room's `label` param, when it is a JSON object, is the match's label (match
        // listings query its fields); otherwise the label is "arena".
        let label = params
            .params
            .get("label")
            .filter(|l| {
                matches!(
                    serde_json::from_str::<serde_json::Value>(l),
                    Ok(serde_json::Value::Object(_))
                )
            })
            .cloned()
            .unwrap_or_else(|| "arena".into());
        MatchSettings {
            tick_rate_hz: Some(rate),
            label: Some(label),
            tick_when_empty: false,
        }
    }

    fn join_attempt(
        &mut self,
        _ctx: &MatchContext<'_>,
        _presence: &UserPresence,
        _metadata: &std::collections::HashMap<String, String>,
    ) -> Result<(), String> {
        if self.players.len() >= usize::from(u8::MAX) {
            return Err("arena is full".into());
        }
        Ok(())
    }

    fn join(&mut self, ctx: &mut MatchContext<'_>, presence: &UserPresence) {
        let Ok(session) = Uuid::try_parse(&presence.session_id) else {
            return;
        };
        let slot = self.free_slot();
        self.players.push(Player {
            session,
            slot,
            x: 0.0,
            y: 0.0,
            last_seq: 0,
        });
        let welcome = Welcome {
            slot,
            tick_rate_hz: self.tick_rate_hz,
        };
        ctx.send_to(&[session], arena::OP_WELCOME, welcome.encode());
    }

    fn leave(&mut self, _ctx: &mut MatchContext<'_>, presence: &UserPresence) {
        if let Ok(session) = Uuid::try_parse(&presence.session_id) {
            self.players.retain(|p| p.session != session);
        }
    }

    fn tick(&mut self, ctx: &mut MatchContext<'_>, tick: u64, inputs: &[Input]) -> Flow {
        for input in inputs {
            self.apply(input);
        }
        if self.players.is_empty() {
            return Flow::Continue;
        }
        let mut state = std::mem::take(&mut self.scratch);
        state.clear();
        let count = self.players.len().min(usize::from(u8::MAX)) as u8;
        arena::encode_state_header(tick as u32, count, &mut state);
        for p in self.players.iter().take(usize::from(count)) {
            PlayerState {
                slot: p.slot,
                x: p.x,
                y: p.y,
                last_seq: p.last_seq,
            }
            .encode_into(&mut state);
        }
        // Each tick's state supersedes the last: unreliable where the transport has such a
        // channel (ENet), so a lost state is never resent behind a newer one.
        ctx.broadcast_unreliable(arena::OP_STATE, state.clone());
        self.scratch = state;
        Flow::Continue
    }

    fn state(&mut self) -> Option<String> {
        let players: Vec<serde_json::Value> = self
            .players
            .iter()
            .map(|p| {
                serde_json::json!({
                    "session_id": p.session, "slot": p.slot, "x": p.x, "y": p.y,
                    "last_seq": p.last_seq,
                })
            })
            .collect();
        Some(
            serde_json::json!({ "tick_rate_hz": self.tick_rate_hz, "players": players })
                .to_string(),
        )
    }
}
