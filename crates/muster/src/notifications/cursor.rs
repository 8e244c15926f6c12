//! The cacheable cursor of a notification listing: the store's position of the last
//! notification listed, in URL-safe base64 of JSON, opaque to clients. A forged one only moves
//! the caller's own listing (the user comes from the session, never from the cursor).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Longest cursor decoded.
const MAX_CURSOR_BYTES: usize = 256;

#[derive(Serialize, Deserialize)]
struct Position {
    s: i64,
}

/// The cursor of the position after `seq`.
pub fn encode(seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&Position { s: seq }).unwrap_or_default())
}

/// The position a cursor names, if it decodes.
pub fn decode(cursor: &str) -> Option<i64> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let position: Position = serde_json::from_slice(&bytes).ok()?;
    Some(position.s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_its_position_and_garbage_to_nothing() {
        assert_eq!(decode(&encode(1_795_000_123)), Some(1_795_000_123));
        for bad in ["", "!!!", "e30", &"A".repeat(300)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
