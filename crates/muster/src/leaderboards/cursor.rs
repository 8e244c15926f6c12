//! Listing cursors: the record a page ended (or began) at, which way the next page goes, and the
//! leaderboard period it belongs to, in URL-safe base64 of JSON so that clients treat it as
//! opaque. A cursor of another leaderboard or period, or one that does not decode, is refused.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::leaderboards::store::RecordPosition;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The leaderboard and period.
    pub id: String,
    pub expiry: i64,
    /// Towards worse ranks (`true`, the next page) or better ones (the previous page).
    pub next: bool,
    pub score: i64,
    pub subscore: i64,
    pub owner: Uuid,
}

impl Cursor {
    pub fn encode(&self) -> String {
        crate::base::cursor::encode(self)
    }

    /// The cursor `text` names, if it decodes and belongs to this period.
    pub fn decode(text: &str, id: &str, expiry: i64) -> Option<Cursor> {
        let cursor: Cursor = crate::base::cursor::decode(text)?;
        (cursor.id == id && cursor.expiry == expiry).then_some(cursor)
    }

    pub fn position(&self) -> RecordPosition {
        RecordPosition {
            score: self.score,
            subscore: self.subscore,
            owner_id: self.owner,
        }
    }
}
