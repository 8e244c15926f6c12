//! Settings of matches, the matchmaker and rooms (sections `[matches]`, `[matchmaker]` and
//! `[rooms]` of the configuration file; each field is documented in `config.example.toml`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatchesConfig {
    /// This node's name: the suffix of authoritative match ids (`{uuid}.{node_name}`).
    pub node_name: String,
    /// Default tick rate of authoritative matches whose handler does not choose one.
    pub tick_rate_hz: u32,
    /// Most matches (relayed and authoritative) alive at once on this node.
    pub max_matches: usize,
    /// Most matches one session may be in at once.
    pub max_matches_per_session: usize,
    /// Most members of a relayed match.
    pub max_relayed_size: usize,
    /// Largest `data` of one `match_data_send`, in bytes.
    pub max_data_bytes: usize,
    /// Match messages one player may send per second into one match (token bucket rate).
    pub max_inputs_per_sec: u32,
    /// Burst allowance on top of `max_inputs_per_sec`.
    pub input_burst: u32,
    /// Inputs waiting for an authoritative match's next tick; past it inputs are dropped.
    pub input_queue_size: usize,
    /// Joins and leaves waiting for an authoritative match's task.
    pub control_queue_size: usize,
    /// How long a join waits for an authoritative match's answer.
    pub join_timeout_ms: u64,
    /// An authoritative match (a room, a matchmaker match) with no player for this long ends.
    pub empty_timeout_ms: u64,
    /// HMAC key signing join tokens (matchmaker tokens and room tickets); empty: generated once
    /// and kept in the database.
    pub join_token_key: String,
    /// Lifetime of a join token.
    pub join_token_expiry_sec: u64,
}

impl Default for MatchesConfig {
    fn default() -> Self {
        MatchesConfig {
            node_name: "muster".into(),
            tick_rate_hz: 15,
            max_matches: 100_000,
            max_matches_per_session: 8,
            max_relayed_size: 64,
            max_data_bytes: 1024,
            max_inputs_per_sec: 60,
            input_burst: 30,
            input_queue_size: 256,
            control_queue_size: 64,
            join_timeout_ms: 5_000,
            empty_timeout_ms: 30_000,
            join_token_key: String::new(),
            join_token_expiry_sec: 60,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatchmakerConfig {
    /// How often the matchmaker forms matches from waiting tickets.
    pub interval_ms: u64,
    /// Most tickets waiting on this node.
    pub max_tickets: usize,
    /// Most tickets one session may have waiting.
    pub max_tickets_per_session: usize,
    /// Most tickets one user may have waiting, all their sessions together (on this node; in a
    /// cluster, in the cluster).
    pub max_tickets_per_user: usize,
    /// Longest query, in bytes.
    pub max_query_length: usize,
    /// Most string plus numeric properties on one ticket.
    pub max_properties: usize,
    /// Largest `max_count` a ticket may ask for.
    pub max_count: u32,
    /// Passes a ticket waits for a full (`max_count`) match before it accepts `min_count`.
    pub max_intervals: u32,
    /// Most other tickets one ticket examines per pass (bounds a pass's cost).
    pub max_candidates: usize,
    /// Handler of the authoritative match made for each group; empty: a relayed match.
    pub match_handler: String,
}

impl Default for MatchmakerConfig {
    fn default() -> Self {
        MatchmakerConfig {
            interval_ms: 1_000,
            max_tickets: 100_000,
            max_tickets_per_session: 3,
            max_tickets_per_user: 3,
            max_query_length: 512,
            max_properties: 16,
            max_count: 32,
            max_intervals: 2,
            max_candidates: 256,
            match_handler: String::new(),
        }
    }
}

impl MatchesConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !crate::base::names::is_name(&self.node_name) {
            return Err("matches.node_name must be letters, digits, '-' or '_'".into());
        }
        if !(1..=1000).contains(&self.tick_rate_hz) {
            return Err("matches.tick_rate_hz must be between 1 and 1000".into());
        }
        for (value, key) in [
            (self.max_matches, "max_matches"),
            (self.max_matches_per_session, "max_matches_per_session"),
            (self.max_relayed_size, "max_relayed_size"),
            (self.max_data_bytes, "max_data_bytes"),
            (self.input_queue_size, "input_queue_size"),
            (self.control_queue_size, "control_queue_size"),
        ] {
            if value == 0 {
                return Err(format!("matches.{key} must be at least 1"));
            }
        }
        if self.max_inputs_per_sec == 0 || self.input_burst == 0 {
            return Err("matches.max_inputs_per_sec and input_burst must be at least 1".into());
        }
        if self.join_timeout_ms == 0 || self.join_token_expiry_sec == 0 {
            return Err("matches.join_timeout_ms and join_token_expiry_sec must be > 0".into());
        }
        Ok(())
    }
}

impl MatchmakerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.interval_ms == 0 {
            return Err("matchmaker.interval_ms must be > 0".into());
        }
        if self.max_count < 2 {
            return Err("matchmaker.max_count must be at least 2".into());
        }
        if self.max_tickets == 0
            || self.max_tickets_per_session == 0
            || self.max_tickets_per_user == 0
            || self.max_candidates == 0
        {
            return Err(
                "matchmaker.max_tickets, max_tickets_per_session, max_tickets_per_user and max_candidates must be at least 1"
                    .into(),
            );
        }
        Ok(())
    }
}
