//! The cursors of purchase and subscription listings: the position of a page's last (`next`)
//! or first (`prev`) row — its purchase time and id — which way to read from it, and whose
//! listing it belongs to (a cursor of another user's, or of another listing, is refused). Written
//! with the codebase's one cursor helper ([`crate::base::cursor`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The listing: `p` purchases, `s` subscriptions.
    pub l: char,
    /// Whose: a user id, or empty for every user's.
    pub u: String,
    /// The row's purchase time (ms) and id.
    pub t: i64,
    pub i: String,
    /// Read towards newer purchases (a `prev_cursor`).
    pub b: bool,
}

/// The cursor of a position.
pub fn encode(position: &Position) -> String {
    crate::base::cursor::encode(position)
}

/// The position `cursor` names, when it reads and is one of listing `listing` of `user`.
pub fn decode(cursor: &str, listing: char, user: Option<Uuid>) -> Option<Position> {
    let position: Position = crate::base::cursor::decode(cursor)?;
    let owner = user.map(|u| u.to_string()).unwrap_or_default();
    (position.l == listing && position.u == owner).then_some(position)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_only_on_its_own_listing() {
        let me = Uuid::new_v4();
        let position = Position {
            l: 'p',
            u: me.to_string(),
            t: 1_700_000_000_123,
            i: "tx-1".into(),
            b: false,
        };
        let cursor = encode(&position);
        assert_eq!(decode(&cursor, 'p', Some(me)), Some(position));
        assert_eq!(decode(&cursor, 's', Some(me)), None, "another listing");
        assert_eq!(
            decode(&cursor, 'p', Some(Uuid::new_v4())),
            None,
            "another user"
        );
        assert_eq!(decode(&cursor, 'p', None), None, "every user's");
        for bad in ["", "!!!", "e30", &"A".repeat(5000)] {
            assert_eq!(decode(bad, 'p', Some(me)), None, "{bad}");
        }
    }
}
