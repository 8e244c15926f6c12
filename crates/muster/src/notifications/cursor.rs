//! The cacheable cursor of a notification listing: the last notification's creation time and id
//! in URL-safe base64 of JSON, opaque to clients. A forged one only moves the caller's own
//! listing (the user comes from the session, never from the cursor).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Longest cursor decoded.
const MAX_CURSOR_BYTES: usize = 256;

#[derive(Serialize, Deserialize)]
struct Position {
    t: i64,
    i: Uuid,
}

/// The cursor of the position after `(create_time_ms, id)`.
pub fn encode(create_time_ms: i64, id: Uuid) -> String {
    let position = Position {
        t: create_time_ms,
        i: id,
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&position).unwrap_or_default())
}

/// The position a cursor names, if it decodes.
pub fn decode(cursor: &str) -> Option<(i64, Uuid)> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let position: Position = serde_json::from_slice(&bytes).ok()?;
    Some((position.t, position.i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_its_position_and_garbage_to_nothing() {
        let id = Uuid::new_v4();
        assert_eq!(
            decode(&encode(1_795_000_000_123, id)),
            Some((1_795_000_000_123, id))
        );
        for bad in ["", "!!!", "e30", &"A".repeat(300)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
