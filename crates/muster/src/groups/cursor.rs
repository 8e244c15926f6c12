//! The cursor of a group listing: where the page ended — the last group's name (a name
//! listing) or its size and id — in URL-safe base64 of JSON, opaque to clients. A forged one
//! only moves the listing.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::groups::store::GroupAfter;

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
    crate::base::cursor::encode(&position)
}

/// Where the listing resumes, if the cursor decodes.
pub fn decode(cursor: &str) -> Option<GroupAfter> {
    Some(match crate::base::cursor::decode(cursor)? {
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
        for bad in ["", "!!!", "e30", &"A".repeat(3000)] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
