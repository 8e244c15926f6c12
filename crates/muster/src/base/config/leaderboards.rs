//! The `[leaderboards]` section: leaderboards created at start (`crate::leaderboards`).

use serde::{Deserialize, Serialize};

/// One leaderboard to create at start if it does not exist (an existing one is left as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaderboardSpec {
    pub id: String,
    /// Only server code may write records.
    pub authoritative: bool,
    /// `"desc"` (higher is better) or `"asc"`.
    pub sort_order: String,
    /// `"best"`, `"set"`, `"incr"` or `"decr"`.
    pub operator: String,
    /// A cron expression (minute hour day-of-month month day-of-week, UTC); empty: never resets.
    pub reset_schedule: String,
    /// A JSON object.
    pub metadata: String,
}

impl Default for LeaderboardSpec {
    fn default() -> Self {
        LeaderboardSpec {
            id: String::new(),
            authoritative: false,
            sort_order: "desc".into(),
            operator: "best".into(),
            reset_schedule: String::new(),
            metadata: "{}".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaderboardsConfig {
    /// Leaderboards to create at start.
    pub boards: Vec<LeaderboardSpec>,
}
