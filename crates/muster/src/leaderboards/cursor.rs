//! Listing cursors: the record a page ended (or began) at, which way the next page goes, and the
//! leaderboard period it belongs to, in URL-safe base64 of JSON so that clients treat it as
//! opaque. A cursor of another leaderboard or period, or one that does not decode, is refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::leaderboards::store::RecordPosition;

/// Longest cursor decoded.
const MAX_CURSOR_BYTES: usize = 1024;

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
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// The cursor `text` names, if it decodes and belongs to this period.
    pub fn decode(text: &str, id: &str, expiry: i64) -> Option<Cursor> {
        if text.len() > MAX_CURSOR_BYTES {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let cursor: Cursor = serde_json::from_slice(&bytes).ok()?;
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
