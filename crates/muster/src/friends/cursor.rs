//! The cursor of a friends listing: where the page ended — the last edge's state, position and
//! user — in URL-safe base64 of JSON, opaque to clients. A forged one only moves the caller's own
//! listing (the user comes from the session, never from the cursor).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

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
    crate::base::cursor::encode(&position)
}

/// `(state, position, user)`, if the cursor decodes.
pub fn decode(cursor: &str) -> Option<(i32, i64, Uuid)> {
    let position: Position = crate::base::cursor::decode(cursor)?;
    Some((position.s, position.p, position.u))
}

#[derive(Serialize, Deserialize)]
struct Pair {
    r: Uuid,
    u: Uuid,
}

/// The cursor of a friends-of-friends page ending at `(referrer, user)`.
pub fn encode_pair(referrer: Uuid, user: Uuid) -> String {
    crate::base::cursor::encode(&Pair {
        r: referrer,
        u: user,
    })
}

/// `(referrer, user)`, if the cursor decodes.
pub fn decode_pair(cursor: &str) -> Option<(Uuid, Uuid)> {
    let pair: Pair = crate::base::cursor::decode(cursor)?;
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
