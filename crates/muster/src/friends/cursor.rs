//! The cursor of a friends listing: where the page ended — the last edge's state, position and
//! user — in URL-safe base64 of JSON, opaque to clients. A forged one only moves the caller's own
//! listing (the user comes from the session, never from the cursor).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const MAX_CURSOR_BYTES: usize = 256;

#[derive(Serialize, Deserialize)]
struct Position {
    s: i32,
    p: i64,
    u: Uuid,
}

pub fn encode(state: i32, position: i64, user: Uuid) -> String {
    let position = Position {
        s: state,
        p: position,
        u: user,
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&position).unwrap_or_default())
}

/// `(state, position, user)`, if the cursor decodes.
pub fn decode(cursor: &str) -> Option<(i32, i64, Uuid)> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let position: Position = serde_json::from_slice(&bytes).ok()?;
    Some((position.s, position.p, position.u))
}

#[derive(Serialize, Deserialize)]
struct Pair {
    r: Uuid,
    u: Uuid,
}

/// The cursor of a friends-of-friends page ending at `(referrer, user)`.
pub fn encode_pair(referrer: Uuid, user: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(
        serde_json::to_vec(&Pair {
            r: referrer,
            u: user,
        })
        .unwrap_or_default(),
    )
}

/// `(referrer, user)`, if the cursor decodes.
pub fn decode_pair(cursor: &str) -> Option<(Uuid, Uuid)> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let pair: Pair = serde_json::from_slice(&bytes).ok()?;
    Some((pair.r, pair.u))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_its_position_and_garbage_to_nothing() {
        let user = Uuid::new_v4();
        assert_eq!(
            decode(&encode(2, 1_795_000_000_000_000, user)),
            Some((2, 1_795_000_000_000_000, user))
        );
        for bad in ["", "!!!", "e30", &"A".repeat(300)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
