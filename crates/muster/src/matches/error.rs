//! The one error type of matches, the matchmaker and rooms, mapped to Nakama's realtime error
//! codes in exactly one place ([`MatchError::code`]). Messages are shown to the client.

use muster_proto::realtime::{error_code, Envelope};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// No such match (unknown id, or not one of the caller's matches).
    #[error("{0}")]
    NotFound(String),
    /// The match existed and is over.
    #[error("{0}")]
    Ended(String),
    /// The match would not take the player: full, refused by its handler, or busy.
    #[error("{0}")]
    Rejected(String),
    /// The caller may not do this (e.g. destroy someone else's room).
    #[error("{0}")]
    Forbidden(String),
    /// The request itself is wrong: malformed id, bad token, oversized data, over a limit.
    #[error("{0}")]
    BadInput(String),
}

impl MatchError {
    /// Nakama's realtime error code for this error.
    pub fn code(&self) -> i32 {
        match self {
            MatchError::NotFound(_) | MatchError::Ended(_) => error_code::MATCH_NOT_FOUND,
            MatchError::Rejected(_) | MatchError::Forbidden(_) => error_code::MATCH_JOIN_REJECTED,
            MatchError::BadInput(_) => error_code::BAD_INPUT,
        }
    }

    /// The metric label of this error.
    pub fn label(&self) -> &'static str {
        match self {
            MatchError::NotFound(_) => "not_found",
            MatchError::Ended(_) => "ended",
            MatchError::Rejected(_) => "rejected",
            MatchError::Forbidden(_) => "forbidden",
            MatchError::BadInput(_) => "bad_input",
        }
    }

    /// The error envelope answering the message with correlation id `cid`.
    pub fn envelope(&self, cid: impl Into<String>) -> Envelope {
        Envelope::error(cid, self.code(), self.to_string())
    }
}
