//! Wire format of "arena", Muster's built-in authoritative example game (the match benchmark's
//! workload): players send movement inputs, the server moves everyone and broadcasts the state
//! every tick. The payloads travel in `match_data_send` / `match_data` (`data` field); all
//! integers are little-endian.
//!
//! | op code | direction | payload |
//! |---|---|---|
//! | 1 `INPUT` | client → server | `seq: u32, dx: i8, dy: i8` (6 bytes): the player's input number `seq` (increasing) and direction, each of `dx`, `dy` in -1..=1 |
//! | 2 `STATE` | server → all | `tick: u32, count: u8`, then per player `slot: u8, x: f32, y: f32, last_seq: u32` (13 bytes each) |
//! | 3 `WELCOME` | server → the joiner | `slot: u8, tick_rate_hz: u8` |
//!
//! `last_seq` echoes the newest input the server has applied for that player, so a client
//! measures its round trip as (arrival of the first state echoing `seq`) − (when it sent `seq`).

/// Client → server: one movement input.
pub const OP_INPUT: i64 = 1;
/// Server → clients: every player's position, once per tick.
pub const OP_STATE: i64 = 2;
/// Server → the joining player: its slot in `STATE` messages.
pub const OP_WELCOME: i64 = 3;

/// Bytes of one player's entry in a `STATE` payload.
pub const STATE_ENTRY_LEN: usize = 13;

/// One movement input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    pub seq: u32,
    pub dx: i8,
    pub dy: i8,
}

impl Input {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(6);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(self.dx as u8);
        out.push(self.dy as u8);
        out
    }

    /// `None` unless the payload is exactly an input with directions in -1..=1.
    pub fn decode(data: &[u8]) -> Option<Input> {
        let bytes: &[u8; 6] = data.try_into().ok()?;
        let input = Input {
            seq: u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            dx: bytes[4] as i8,
            dy: bytes[5] as i8,
        };
        ((-1..=1).contains(&input.dx) && (-1..=1).contains(&input.dy)).then_some(input)
    }
}

/// One player's entry in a `STATE` message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerState {
    pub slot: u8,
    pub x: f32,
    pub y: f32,
    pub last_seq: u32,
}

/// Appends a `STATE` payload's header; entries follow with [`PlayerState::encode_into`].
pub fn encode_state_header(tick: u32, count: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(&tick.to_le_bytes());
    out.push(count);
}

impl PlayerState {
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.slot);
        out.extend_from_slice(&self.x.to_le_bytes());
        out.extend_from_slice(&self.y.to_le_bytes());
        out.extend_from_slice(&self.last_seq.to_le_bytes());
    }
}

/// A decoded `STATE` payload.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub tick: u32,
    pub players: Vec<PlayerState>,
}

impl State {
    pub fn decode(data: &[u8]) -> Option<State> {
        let (head, rest) = data.split_at_checked(5)?;
        let tick = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let count = usize::from(head[4]);
        if rest.len() != count * STATE_ENTRY_LEN {
            return None;
        }
        let players = rest
            .chunks_exact(STATE_ENTRY_LEN)
            .map(|e| PlayerState {
                slot: e[0],
                x: f32::from_le_bytes([e[1], e[2], e[3], e[4]]),
                y: f32::from_le_bytes([e[5], e[6], e[7], e[8]]),
                last_seq: u32::from_le_bytes([e[9], e[10], e[11], e[12]]),
            })
            .collect();
        Some(State { tick, players })
    }

    /// The `last_seq` echoed for `slot`, read without decoding the other entries.
    pub fn last_seq_of(data: &[u8], slot: u8) -> Option<u32> {
        let rest = data.get(5..)?;
        rest.chunks_exact(STATE_ENTRY_LEN)
            .find(|e| e[0] == slot)
            .map(|e| u32::from_le_bytes([e[9], e[10], e[11], e[12]]))
    }
}

/// A decoded `WELCOME` payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    pub slot: u8,
    pub tick_rate_hz: u8,
}

impl Welcome {
    pub fn encode(&self) -> Vec<u8> {
        vec![self.slot, self.tick_rate_hz]
    }

    pub fn decode(data: &[u8]) -> Option<Welcome> {
        match data {
            [slot, rate] => Some(Welcome {
                slot: *slot,
                tick_rate_hz: *rate,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        let input = Input {
            seq: 70_000,
            dx: -1,
            dy: 1,
        };
        assert_eq!(Input::decode(&input.encode()), Some(input));
        assert_eq!(Input::decode(&[0, 0, 0, 0, 2, 0]), None, "dx out of range");
        assert_eq!(Input::decode(&[0; 5]), None);
        let mut state = Vec::new();
        encode_state_header(9, 2, &mut state);
        for slot in 0..2 {
            PlayerState {
                slot,
                x: 1.5,
                y: -2.0,
                last_seq: 40 + u32::from(slot),
            }
            .encode_into(&mut state);
        }
        let decoded = State::decode(&state).expect("state");
        assert_eq!(decoded.tick, 9);
        assert_eq!(decoded.players[1].last_seq, 41);
        assert_eq!(State::last_seq_of(&state, 1), Some(41));
        assert_eq!(State::last_seq_of(&state, 5), None);
        assert_eq!(State::decode(&state[..state.len() - 1]), None);
        let welcome = Welcome {
            slot: 1,
            tick_rate_hz: 15,
        };
        assert_eq!(Welcome::decode(&welcome.encode()), Some(welcome));
    }
}
