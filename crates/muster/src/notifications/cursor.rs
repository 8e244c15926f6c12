//! The cacheable cursor of a notification listing: the store's position of the last
//! notification listed, in URL-safe base64 of JSON, opaque to clients. A forged one only moves
//! the caller's own listing (the user comes from the session, never from the cursor).

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Position {
    s: i64,
}

/// The cursor of the position after `seq`.
pub fn encode(seq: i64) -> String {
    crate::base::cursor::encode(&Position { s: seq })
}

/// The position a cursor names, if it decodes.
pub fn decode(cursor: &str) -> Option<i64> {
    crate::base::cursor::decode::<Position>(cursor).map(|p| p.s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_its_position_and_garbage_to_nothing() {
        assert_eq!(decode(&encode(1_795_000_123)), Some(1_795_000_123));
        for bad in ["", "!!!", "e30", &"A".repeat(3000)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
