//! Leaderboard records and tournaments as Nakama's API renders them (the REST routes and
//! server code answer in these shapes).

use muster_proto::api::{LeaderboardRecord, LeaderboardRecordList, Tournament};

use super::tournament::TournamentInfo;
use super::{Record, RecordList};
use crate::base::clock::rfc3339;

/// A record as Nakama renders it.
pub fn record(record: Record) -> LeaderboardRecord {
    let row = record.row;
    LeaderboardRecord {
        leaderboard_id: row.leaderboard_id,
        owner_id: row.owner_id.to_string(),
        username: row.username,
        score: row.score,
        subscore: row.subscore,
        num_score: row.num_score,
        metadata: row.metadata,
        create_time: rfc3339(row.create_time_ms),
        update_time: rfc3339(row.update_time_ms),
        expiry_time: (row.expiry_time != 0).then(|| rfc3339(row.expiry_time.saturating_mul(1000))),
        rank: record.rank,
        max_num_score: row.max_num_score,
    }
}

pub fn list_of(page: RecordList) -> LeaderboardRecordList {
    LeaderboardRecordList {
        records: page.records.into_iter().map(record).collect(),
        owner_records: page.owner_records.into_iter().map(record).collect(),
        next_cursor: page.next_cursor.unwrap_or_default(),
        prev_cursor: page.prev_cursor.unwrap_or_default(),
        rank_count: page.rank_count,
    }
}

fn seconds(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

pub fn tournament(info: TournamentInfo) -> Tournament {
    let def = info.def;
    let t = def.tournament;
    Tournament {
        id: def.id,
        title: t.title,
        description: t.description,
        category: seconds(i64::from(t.category)),
        sort_order: seconds(i64::from(def.sort_order)),
        size: seconds(info.size),
        max_size: seconds(i64::from(t.max_size)),
        max_num_score: seconds(i64::from(t.max_num_score)),
        can_enter: info.can_enter,
        end_active: seconds(info.deadlines.end_active),
        next_reset: seconds(info.deadlines.expiry),
        metadata: def.metadata,
        create_time: rfc3339(def.create_time_ms),
        start_time: rfc3339(t.start_time.saturating_mul(1000)),
        end_time: (t.end_time > 0).then(|| rfc3339(t.end_time.saturating_mul(1000))),
        duration: seconds(t.duration),
        start_active: seconds(info.deadlines.start_active),
        prev_reset: seconds(info.prev_reset),
        // Stored 0 best … 3 decrement; the enum numbers them from 1 (0: no override).
        operator: i32::from(def.operator) + 1,
        authoritative: def.authoritative,
        join_required: t.join_required,
    }
}
