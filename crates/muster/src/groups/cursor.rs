//! The cursor of a group listing: where the page ended — the last group's name (a name
//! listing) or its size and id — in URL-safe base64 of JSON, opaque to clients. A forged one
//! only moves the listing.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::groups::store::GroupAfter;

const MAX_CURSOR_BYTES: usize = 1024;

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Position {
    Name { n: String },
    Size { c: i32, g: Uuid },
}

pub fn encode(after: &GroupAfter) -> String {
    let position = match after {
        GroupAfter::Name(name) => Position::Name { n: name.clone() },
        GroupAfter::Size(count, id) => Position::Size { c: *count, g: *id },
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&position).unwrap_or_default())
}

/// Where the listing resumes, if the cursor decodes.
pub fn decode(cursor: &str) -> Option<GroupAfter> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    Some(match serde_json::from_slice(&bytes).ok()? {
        Position::Name { n } => GroupAfter::Name(n),
        Position::Size { c, g } => GroupAfter::Size(c, g),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_its_position_and_garbage_to_nothing() {
        let id = Uuid::new_v4();
        for after in [GroupAfter::Name("Clan é".into()), GroupAfter::Size(7, id)] {
            assert_eq!(decode(&encode(&after)), Some(after));
        }
        for bad in ["", "!!!", "e30", &"A".repeat(2000)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
