//! The `[leaderboards]` section: leaderboards created at start (`crate::leaderboards`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaderboardsConfig {
    /// Leaderboards to create at start (if they do not exist; an existing one is left as it is).
    pub boards: Vec<super::NewLeaderboard>,
    /// Tournaments to create at start.
    pub tournaments: Vec<super::tournament::NewTournament>,
}
