//! The `leaderboard` step: a player submits scores to one leaderboard and lists the records
//! around itself at random intervals, over Nakama's REST API (`POST /v2/leaderboard/{id}`,
//! `GET /v2/leaderboard/{id}/owner/{user_id}?limit=N`).
//!
//! Each call lists with probability `read_ratio`, or else submits a score drawn uniformly from
//! `score` (subscore 0). Latency goes to `leaderboard_write` or `leaderboard_around`, from the
//! call's intended time, for successful calls only. Once the player has a record (a submission
//! was answered, in this step or an earlier one), every listing around it must include it, or the player fails as
//! `leaderboard_around_missing`. A refused call fails the player as
//! `leaderboard_write_http_<status>` / `leaderboard_around_http_<status>` (404: no such
//! leaderboard), no answer in time as `leaderboard_write_timeout` / `leaderboard_around_timeout`.

use std::time::Duration;

use rand::Rng as _;
use serde::Deserialize;
use tokio::time::Instant;

use crate::net::failure::Failure;
use crate::net::grpc::GrpcCall;
use crate::net::transport::Ws;
use crate::scenario::metagame::LeaderboardStep;
use crate::steps::ctx::Ctx;
use crate::steps::paced::{call_api, user_id_of, Pace, Written};

/// A record, as far as the step looks at it.
#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    owner_id: String,
}

/// A listing's answer.
#[derive(Deserialize)]
struct Records {
    #[serde(default)]
    records: Vec<Record>,
}

/// Runs the step from `start` until `until` (or the end of the run).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    ctx: &Ctx,
    mut ws: Option<&mut Ws>,
    token: &str,
    index: u64,
    start: Instant,
    step: &LeaderboardStep,
    until: Option<Instant>,
    limit: Duration,
    written: &mut Option<Box<Written>>,
) -> Result<(), Failure> {
    let user_id = user_id_of(token)?;
    let board = &step.leaderboard.0;
    let write_url = format!("{}/v2/leaderboard/{board}", ctx.base_url);
    let around_url = format!(
        "{}/v2/leaderboard/{board}/owner/{user_id}?limit={}",
        ctx.base_url, step.limit
    );
    let mut pace = Pace::new(index ^ 0x1ead_b0a4, start, step.interval_s, until);
    while let Some(intended) = pace.next(ctx, ws.as_deref_mut()).await? {
        if pace.rng.random_bool(step.read_ratio.0) {
            let request = || {
                let request = serde_json::json!({
                    "leaderboard_id": board, "owner_id": user_id, "limit": step.limit,
                });
                (GrpcCall::ListLeaderboardRecordsAroundOwner, request)
            };
            let answer = Box::pin(call_api(
                ctx,
                step.api,
                index,
                token,
                (reqwest::Method::GET, around_url.clone(), None),
                request,
                "leaderboard_around",
                limit,
            ))
            .await?;
            let listed: Records =
                serde_json::from_slice(&answer).map_err(|_| Failure::BadResponse)?;
            let has_record = written
                .as_ref()
                .is_some_and(|w| w.boards.iter().any(|b| **b == **board));
            if has_record && !listed.records.iter().any(|r| r.owner_id == user_id) {
                return Err(Failure::Call {
                    call: "leaderboard_around",
                    problem: "missing".into(),
                });
            }
            ctx.rec
                .borrow_mut()
                .latency_named("leaderboard_around", Instant::now() - intended);
        } else {
            let score = pace.rng.random_range(step.score.0..=step.score.1);
            let record = serde_json::json!({ "score": score, "subscore": 0 });
            let request = || {
                let request = serde_json::json!({ "leaderboard_id": board, "record": record });
                (GrpcCall::WriteLeaderboardRecord, request)
            };
            let answer = Box::pin(call_api(
                ctx,
                step.api,
                index,
                token,
                (
                    reqwest::Method::POST,
                    write_url.clone(),
                    Some(record.to_string()),
                ),
                request,
                "leaderboard_write",
                limit,
            ))
            .await?;
            let record: Record =
                serde_json::from_slice(&answer).map_err(|_| Failure::BadResponse)?;
            if record.owner_id != user_id {
                return Err(Failure::BadResponse);
            }
            let w = written.get_or_insert_with(Default::default);
            if !w.boards.iter().any(|b| **b == **board) {
                w.boards.push(board.as_str().into());
            }
            ctx.rec
                .borrow_mut()
                .latency_named("leaderboard_write", Instant::now() - intended);
        }
    }
    Ok(())
}
