//! The one cursor every listing pages with: a position (a small serde type of the listing's
//! own), written as URL-safe base64 of JSON so that clients treat it as opaque. A cursor longer
//! than [`MAX_CURSOR_BYTES`], one that is not base64, or one that does not read as the position
//! expected is refused (`None`); a listing then also checks that a cursor that reads is one of
//! its own (the same channel, leaderboard period or collection), so a cursor is never used on
//! another listing by mistake. A forged position only moves the caller's own page: what a caller
//! may see comes from their session, never from a cursor.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Longest cursor read: a position with a key and a collection of 128 bytes each fits many
/// times over.
pub const MAX_CURSOR_BYTES: usize = 2048;

/// The cursor of `position`.
pub fn encode<T: Serialize>(position: &T) -> String {
    // Serializing these plain structs to JSON cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(position).unwrap_or_default())
}

/// The position `cursor` names, when it reads as a `T`.
pub fn decode<T: DeserializeOwned>(cursor: &str) -> Option<T> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Position {
        s: i64,
        k: String,
    }

    #[test]
    fn a_cursor_reads_back_as_its_position_and_garbage_as_nothing() {
        let position = Position {
            s: -3,
            k: "clé".into(),
        };
        assert_eq!(decode::<Position>(&encode(&position)), Some(position));
        let too_long = "A".repeat(MAX_CURSOR_BYTES + 1);
        for bad in ["", "!!!", "e30", &too_long] {
            assert_eq!(decode::<Position>(bad), None, "{bad}");
        }
    }
}
