//! Leaderboards and tournaments, as the server (authoritative boards too):
//! `leaderboardCreate`, `leaderboardDelete`, `leaderboardRecordWrite`,
//! `leaderboardRecordDelete`, `leaderboardRecordsList`, `leaderboardRecordsHaystack`,
//! `tournamentCreate`, `tournamentDelete`, `tournamentJoin`, `tournamentRecordWrite`,
//! `tournamentRecordsList`, `tournamentList`, `leaderboardsGetId`, `tournamentsGetId`,
//! `leaderboardList`, `leaderboardRecordsListCursorFromRank`, `tournamentRecordsHaystack`,
//! `tournamentAddAttempt`.

use muster_js::JsError;
use serde_json::{json, Value};
use uuid::Uuid;

use super::context::{invalid, refused, shaped, Args, ServerHost};
use crate::leaderboards::tournament::NewTournament;
use crate::leaderboards::view::{list_of, record, tournament};
use crate::leaderboards::{Caller, LeaderboardInfo, NewLeaderboard, PageAsk, Submission};

pub(super) const NAMES: &[&str] = &[
    "leaderboardCreate",
    "leaderboardDelete",
    "leaderboardRecordWrite",
    "leaderboardRecordDelete",
    "leaderboardRecordsList",
    "leaderboardRecordsHaystack",
    "tournamentCreate",
    "tournamentDelete",
    "tournamentJoin",
    "tournamentRecordWrite",
    "tournamentRecordDelete",
    "tournamentRecordsList",
    "tournamentList",
    "leaderboardsGetId",
    "tournamentsGetId",
    "leaderboardList",
    "leaderboardRecordsListCursorFromRank",
    "tournamentRecordsHaystack",
    "tournamentAddAttempt",
];

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let boards = &host.services.leaderboards;
    match name {
        // leaderboardCreate(id, authoritative, sortOrder?, operator?, resetSchedule?, metadata?)
        "leaderboardCreate" => {
            let new = NewLeaderboard {
                id: args.string(0, "leaderboardID")?,
                authoritative: args.bool(1).unwrap_or(false),
                sort_order: sort_order(args, 2)?,
                operator: operator(args, 3)?,
                reset_schedule: args.opt_string(4).unwrap_or_default(),
                metadata: args.json_text(5, "metadata")?,
            };
            host.wait(boards.create(new))?.map_err(refused)?;
            Ok(Value::Null)
        }
        "leaderboardDelete" | "tournamentDelete" => {
            let id = args.string(0, "id")?;
            host.wait(boards.delete(&id))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // …RecordWrite(id, ownerId, username?, score?, subscore?, metadata?, operator?)
        "leaderboardRecordWrite" | "tournamentRecordWrite" => {
            let id = args.string(0, "id")?;
            let owner = args.user(1, "ownerID")?;
            let username = args.opt_string(2).unwrap_or_default();
            let score = args.int(3, "score")?.unwrap_or(0);
            let subscore = args.int(4, "subscore")?.unwrap_or(0);
            let metadata = match args.missing(5) {
                true => None,
                false => Some(args.json_text(5, "metadata")?),
            };
            let operator = override_operator(args, 6)?;
            let submission = Submission {
                owner,
                username,
                score,
                subscore,
                metadata,
                operator,
            };
            let written = if name == "leaderboardRecordWrite" {
                host.wait(boards.write(Caller::Server, &id, submission))?
            } else {
                host.wait(boards.write_tournament(Caller::Server, &id, submission))?
            };
            Ok(shaped(record(written.map_err(refused)?)))
        }
        "leaderboardRecordDelete" | "tournamentRecordDelete" => {
            let id = args.string(0, "id")?;
            let owner = args.user(1, "ownerID")?;
            host.wait(boards.delete_record(Caller::Server, &id, owner))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        // …RecordsList(id, ownerIds?, limit?, cursor?, overrideExpiry?)
        "leaderboardRecordsList" | "tournamentRecordsList" => {
            let id = args.string(0, "id")?;
            let owners = super::accounts::user_ids(args, 1, "ownerIds")?;
            let page = page_ask(args, 2)?;
            let page = if name == "leaderboardRecordsList" {
                host.wait(boards.list(&id, owners, page))?
            } else {
                host.wait(boards.list_tournament_records(&id, owners, page))?
            };
            Ok(shaped(list_of(page.map_err(refused)?)))
        }
        // leaderboardRecordsHaystack(id, ownerId, limit, cursor, overrideExpiry)
        "leaderboardRecordsHaystack" => {
            let id = args.string(0, "leaderboardId")?;
            let owner = args.user(1, "ownerId")?;
            let page = page_ask(args, 2)?;
            let page = host
                .wait(boards.around_owner(&id, owner, page))?
                .map_err(refused)?;
            Ok(shaped(list_of(page)))
        }
        // tournamentCreate(id, authoritative, sortOrder, operator, duration?, resetSchedule?,
        // metadata?, title?, description?, category?, startTime?, endTime?, maxSize?,
        // maxNumScore?, joinRequired?)
        "tournamentCreate" => {
            let int = |i: usize, what: &str| args.int(i, what).map(|v| v.unwrap_or(0));
            let new = NewTournament {
                id: args.string(0, "tournamentID")?,
                authoritative: args.bool(1).unwrap_or(false),
                sort_order: sort_order(args, 2)?,
                operator: operator(args, 3)?,
                duration: int(4, "duration")?,
                reset_schedule: args.opt_string(5).unwrap_or_default(),
                metadata: args.json_text(6, "metadata")?,
                title: args.opt_string(7).unwrap_or_default(),
                description: args.opt_string(8).unwrap_or_default(),
                category: int(9, "category")? as i32,
                start_time: int(10, "startTime")?,
                end_time: int(11, "endTime")?,
                max_size: int(12, "maxSize")? as i32,
                max_num_score: int(13, "maxNumScore")? as i32,
                join_required: args.bool(14).unwrap_or(false),
            };
            host.wait(boards.create_tournament(new))?.map_err(refused)?;
            Ok(Value::Null)
        }
        // tournamentJoin(id, userId, username)
        "tournamentJoin" => {
            let id = args.string(0, "tournamentID")?;
            let user: Uuid = args.user(1, "userId")?;
            let username = args.opt_string(2).unwrap_or_default();
            host.wait(boards.join_tournament(&id, user, &username))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        // tournamentList(categoryStart?, categoryEnd?, startTime?, endTime?, limit?, cursor?)
        "tournamentList" => {
            let start = args.int(0, "categoryStart")?.unwrap_or(0) as i32;
            let end = args.int(1, "categoryEnd")?.unwrap_or(127) as i32;
            let start_time = args.int(2, "startTime")?;
            let end_time = args.int(3, "endTime")?;
            let limit = args
                .int(4, "limit")?
                .map_or(crate::leaderboards::tournament::MAX_LIST_LIMIT, |l| {
                    l.max(1) as usize
                });
            let cursor = args.opt_string(5);
            let (found, cursor) = host
                .wait(boards.list_tournaments(
                    start,
                    end,
                    start_time,
                    end_time,
                    limit,
                    cursor.as_deref(),
                ))?
                .map_err(refused)?;
            let tournaments: Vec<Value> =
                found.into_iter().map(|t| shaped(tournament(t))).collect();
            let mut answer = json!({ "tournaments": tournaments });
            if let Some(cursor) = cursor {
                answer["cursor"] = cursor.into();
            }
            Ok(answer)
        }
        // leaderboardsGetId(ids): the leaderboards found (tournaments and unknown ids left out).
        "leaderboardsGetId" => {
            let ids = args.strings(0, "leaderboardIDs")?;
            let found: Vec<Value> = ids
                .iter()
                .filter_map(|id| boards.leaderboard_info(id))
                .map(|info| leaderboard(&info))
                .collect();
            Ok(Value::Array(found))
        }
        // tournamentsGetId(ids): the tournaments found.
        "tournamentsGetId" => {
            let ids = args.strings(0, "tournamentIDs")?;
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(info) = host.wait(boards.tournament_info(&id))?.map_err(refused)? {
                    found.push(shaped(tournament(info)));
                }
            }
            Ok(Value::Array(found))
        }
        // leaderboardList(limit?, cursor?): {leaderboards, cursor} (cursor null on the last
        // page); leaderboards by id, tournaments left out.
        "leaderboardList" => {
            let limit = match args.int(0, "limit")? {
                None => 10,
                Some(l) if (1..=100).contains(&l) => l as usize,
                Some(_) => return Err(invalid("limit must be 1-100")),
            };
            let cursor = args.opt_string(1);
            let (found, cursor) = boards
                .list_boards(limit, cursor.as_deref())
                .map_err(refused)?;
            let leaderboards: Vec<Value> = found.iter().map(leaderboard).collect();
            Ok(json!({ "leaderboards": leaderboards, "cursor": cursor }))
        }
        // leaderboardRecordsListCursorFromRank(id, rank, overrideExpiry?): a cursor for
        // leaderboardRecordsList that lists from `rank` on ("" for rank 1).
        "leaderboardRecordsListCursorFromRank" => {
            let id = args
                .opt_string(0)
                .ok_or_else(|| invalid("invalid leaderboard id"))?;
            let rank = args
                .int(1, "rank")?
                .ok_or_else(|| invalid("invalid rank - must be > 1"))?;
            let expiry = args.int(2, "overrideExpiry")?.unwrap_or(0);
            let cursor = host
                .wait(boards.cursor_from_rank(&id, rank, expiry))?
                .map_err(refused)?;
            Ok(json!(cursor))
        }
        // tournamentRecordsHaystack(id, ownerId, limit?, cursor?, expiry?)
        "tournamentRecordsHaystack" => {
            let id = args
                .opt_string(0)
                .ok_or_else(|| invalid("expects a tournament ID string"))?;
            let owner = args.user(1, "ownerId")?;
            let limit = match args.int(2, "limit")? {
                None => 10,
                Some(l) if (1..=100).contains(&l) => l as usize,
                Some(_) => return Err(invalid("limit must be 1-100")),
            };
            let page = PageAsk {
                limit: Some(limit),
                cursor: args.opt_string(3),
                expiry: args.int(4, "expiry")?.unwrap_or(0),
            };
            let page = host
                .wait(boards.tournament_around_owner(&id, owner, page))?
                .map_err(refused)?;
            Ok(shaped(list_of(page)))
        }
        // tournamentAddAttempt(id, ownerId, count)
        "tournamentAddAttempt" => {
            let id = args
                .opt_string(0)
                .ok_or_else(|| invalid("expects a tournament ID string"))?;
            let owner = args.user(1, "ownerId")?;
            let count = args
                .int(2, "count")?
                .filter(|c| *c != 0)
                .ok_or_else(|| invalid("expects an attempt count number != 0"))?;
            host.wait(boards.add_attempts(&id, owner, count))?
                .map_err(refused)?;
            Ok(Value::Null)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// Nakama's `SortOrder` (`ascending`, `descending`) as the service names it.
fn sort_order(args: &Args, i: usize) -> Result<String, JsError> {
    match args.get(i).as_str().unwrap_or("descending") {
        "descending" | "desc" | "" => Ok("desc".into()),
        "ascending" | "asc" => Ok("asc".into()),
        other => Err(invalid(format!(
            "sortOrder {other:?}: use ascending or descending"
        ))),
    }
}

/// Nakama's `Operator` (`best`, `set`, `increment`, `decrement`) as the service names it.
fn operator(args: &Args, i: usize) -> Result<String, JsError> {
    match args.get(i).as_str().unwrap_or("best") {
        "best" | "" => Ok("best".into()),
        "set" => Ok("set".into()),
        "increment" | "incr" => Ok("incr".into()),
        "decrement" | "decr" => Ok("decr".into()),
        other => Err(invalid(format!(
            "operator {other:?}: use best, set, increment or decrement"
        ))),
    }
}

/// An `OverrideOperator` as Nakama's API numbers it (0: the board's own).
fn override_operator(args: &Args, i: usize) -> Result<i32, JsError> {
    match args.get(i) {
        Value::Null => Ok(0),
        value => match value.as_str().unwrap_or_default() {
            "best" => Ok(1),
            "set" => Ok(2),
            "increment" => Ok(3),
            "decrement" => Ok(4),
            other => Err(invalid(format!(
                "operator {other:?}: use best, set, increment or decrement"
            ))),
        },
    }
}

/// A leaderboard as Nakama's runtime gives one: its operator by name, its metadata an object,
/// times in Unix seconds.
pub(crate) fn leaderboard(info: &LeaderboardInfo) -> Value {
    let def = &info.def;
    let operator = match def.operator {
        crate::leaderboards::SET => "set",
        crate::leaderboards::INCREMENT => "increment",
        crate::leaderboards::DECREMENT => "decrement",
        _ => "best",
    };
    let metadata: Value = serde_json::from_str(&def.metadata).unwrap_or_else(|_| json!({}));
    json!({
        "id": def.id,
        "title": def.tournament.title,
        "description": def.tournament.description,
        "category": def.tournament.category,
        "authoritative": def.authoritative,
        "sortOrder": def.sort_order,
        "operator": operator,
        "prevReset": info.prev_reset,
        "nextReset": info.next_reset,
        "metadata": metadata,
        "createTime": def.create_time_ms / 1000,
    })
}

/// `limit`, `cursor` and `overrideExpiry` at `args[from..]`, as a listing takes them.
fn page_ask(args: &Args, from: usize) -> Result<PageAsk, JsError> {
    Ok(PageAsk {
        limit: args.int(from, "limit")?.map(|l| l.max(0) as usize),
        cursor: args.opt_string(from + 1),
        expiry: args.int(from + 2, "overrideExpiry")?.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaderboards::store::{LeaderboardDef, TournamentFields};
    use crate::leaderboards::LeaderboardInfo;

    #[test]
    fn a_leaderboard_has_the_runtime_shape() {
        let info = LeaderboardInfo {
            def: LeaderboardDef {
                id: "weekly".into(),
                authoritative: true,
                sort_order: crate::leaderboards::ASCENDING,
                operator: crate::leaderboards::INCREMENT,
                reset_schedule: "0 0 * * 1".into(),
                metadata: r#"{"prize":"gold"}"#.into(),
                create_time_ms: 1_700_000_000_123,
                tournament: TournamentFields::default(),
            },
            prev_reset: 1_767_571_200,
            next_reset: 1_768_176_000,
        };
        assert_eq!(
            leaderboard(&info),
            json!({
                "id": "weekly", "title": "", "description": "", "category": 0,
                "authoritative": true, "sortOrder": 0, "operator": "increment",
                "prevReset": 1_767_571_200, "nextReset": 1_768_176_000,
                "metadata": {"prize": "gold"}, "createTime": 1_700_000_000,
            })
        );
    }
}
