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

/// One tournament to create at start if it does not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TournamentSpec {
    pub id: String,
    pub authoritative: bool,
    /// `"desc"` (higher is better) or `"asc"`.
    pub sort_order: String,
    /// `"best"`, `"set"`, `"incr"` or `"decr"`.
    pub operator: String,
    /// A cron expression (UTC); empty: one period from `start_time`.
    pub reset_schedule: String,
    /// A JSON object.
    pub metadata: String,
    pub title: String,
    pub description: String,
    /// 0 to 127.
    pub category: i32,
    /// Unix seconds; 0: when first created.
    pub start_time: i64,
    /// Unix seconds; 0: never ends.
    pub end_time: i64,
    /// Seconds each period is open for scores (at least 1).
    pub duration: i64,
    /// Most records a period may hold; 0: no bound.
    pub max_size: i32,
    /// Most submissions one record may take; 0: no bound.
    pub max_num_score: i32,
    /// Players must join a period before scoring in it.
    pub join_required: bool,
}

impl Default for TournamentSpec {
    fn default() -> Self {
        TournamentSpec {
            id: String::new(),
            authoritative: false,
            sort_order: "desc".into(),
            operator: "best".into(),
            reset_schedule: String::new(),
            metadata: "{}".into(),
            title: String::new(),
            description: String::new(),
            category: 0,
            start_time: 0,
            end_time: 0,
            duration: 0,
            max_size: 0,
            max_num_score: 0,
            join_required: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaderboardsConfig {
    /// Leaderboards to create at start.
    pub boards: Vec<LeaderboardSpec>,
    /// Tournaments to create at start.
    pub tournaments: Vec<TournamentSpec>,
}
