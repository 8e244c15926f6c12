//! The one error type of matches, the matchmaker and rooms. Messages are shown to the client;
//! each transport's edge maps the kinds to its own codes (`net::dispatch`, `net::http::error`).

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
    /// A join token (or room ticket) that was good but is no longer: expired, or used already.
    #[error("{0}")]
    TokenSpent(String),
    /// The caller is over a quota or a rate (rooms per player, room creations per minute).
    #[error("{0}")]
    TooMany(String),
}

impl MatchError {
    /// The metric label of this error.
    pub fn label(&self) -> &'static str {
        match self {
            MatchError::NotFound(_) => "not_found",
            MatchError::Ended(_) => "ended",
            MatchError::Rejected(_) => "rejected",
            MatchError::Forbidden(_) => "forbidden",
            MatchError::BadInput(_) => "bad_input",
            MatchError::TokenSpent(_) => "token_spent",
            MatchError::TooMany(_) => "too_many",
        }
    }
}
