//! The `storage` step: a player writes its own storage objects and reads them back at random
//! intervals, over Nakama's REST API (`PUT /v2/storage`, `POST /v2/storage`) or, with
//! `api = "grpc"`, the same calls over gRPC (`WriteStorageObjects`, `ReadStorageObjects`).
//!
//! Each call draws a key (one of `keys`), then reads it with probability `read_ratio` or else
//! writes a fresh value of `value_bytes` bytes (`{"p":"<random letters>"}`, owner read and
//! write). Latency goes to `storage_write` or `storage_read`, from the call's intended time,
//! for successful calls only. A read of a key this player wrote earlier in the run must return
//! the object at the version the last write's ack gave (the player is the only writer of its
//! objects), or the player fails as `storage_read_missing`: so a count of reads is a count of
//! reads that found what was written. A refused call fails the player as
//! `storage_write_http_<status>` / `storage_read_http_<status>`, no answer in time as
//! `storage_write_timeout` / `storage_read_timeout`.

use std::time::Duration;

use rand::Rng as _;
use serde::Deserialize;
use tokio::time::Instant;

use crate::net::failure::Failure;
use crate::net::grpc::GrpcCall;
use crate::net::transport::Ws;
use crate::scenario::metagame::StorageStep;
use crate::steps::ctx::Ctx;
use crate::steps::paced::{call_api, user_id_of, Pace, Written};

/// `PUT /v2/storage`'s answer: one ack per object written.
#[derive(Deserialize)]
struct Acks {
    #[serde(default)]
    acks: Vec<Versioned>,
}

/// `POST /v2/storage`'s answer: the objects that exist and the caller may read.
#[derive(Deserialize)]
struct Objects {
    #[serde(default)]
    objects: Vec<Versioned>,
}

#[derive(Deserialize)]
struct Versioned {
    #[serde(default)]
    key: String,
    #[serde(default)]
    version: String,
}

/// Runs the step from `start` until `until` (or the end of the run).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    ctx: &Ctx,
    mut ws: Option<&mut Ws>,
    token: &str,
    index: u64,
    start: Instant,
    step: &StorageStep,
    until: Option<Instant>,
    limit: Duration,
    written: &mut Option<Box<Written>>,
) -> Result<(), Failure> {
    let user_id = user_id_of(token)?;
    let url = format!("{}/v2/storage", ctx.base_url);
    let mut pace = Pace::new(index ^ 0x5707_a6e0, start, step.interval_s, until);
    while let Some(intended) = pace.next(ctx, ws.as_deref_mut()).await? {
        let k = pace.rng.random_range(0..step.keys.max(1));
        let key = step.key_name(k);
        if pace.rng.random_bool(step.read_ratio.0) {
            let body = serde_json::json!({
                "object_ids": [{ "collection": step.collection.0, "key": key, "user_id": user_id }],
            });
            let answer = Box::pin(call_api(
                ctx,
                step.api,
                index,
                token,
                (reqwest::Method::POST, url.clone(), Some(body.to_string())),
                || (GrpcCall::ReadStorageObjects, body.clone()),
                "storage_read",
                limit,
            ))
            .await?;
            let found: Objects =
                serde_json::from_slice(&answer).map_err(|_| Failure::BadResponse)?;
            let collection = &step.collection.0;
            if let Some(version) = written.as_ref().and_then(|w| w.version(collection, &key)) {
                let same = |o: &Versioned| o.key == key && o.version == version;
                if !found.objects.iter().any(same) {
                    return Err(Failure::Call {
                        call: "storage_read",
                        problem: "missing".into(),
                    });
                }
            }
            ctx.rec
                .borrow_mut()
                .latency_named("storage_read", Instant::now() - intended);
        } else {
            let value = value(&mut pace, step.value_bytes);
            let body = serde_json::json!({
                "objects": [{
                    "collection": step.collection.0,
                    "key": key,
                    "value": value,
                    "permission_read": 1,
                    "permission_write": 1,
                }],
            });
            let answer = Box::pin(call_api(
                ctx,
                step.api,
                index,
                token,
                (reqwest::Method::PUT, url.clone(), Some(body.to_string())),
                || (GrpcCall::WriteStorageObjects, body.clone()),
                "storage_write",
                limit,
            ))
            .await?;
            let acks: Acks = serde_json::from_slice(&answer).map_err(|_| Failure::BadResponse)?;
            let version = acks
                .acks
                .into_iter()
                .next()
                .map(|a| a.version.into_boxed_str())
                .ok_or(Failure::BadResponse)?;
            written
                .get_or_insert_with(Default::default)
                .wrote(&step.collection.0, &key, version);
            ctx.rec
                .borrow_mut()
                .latency_named("storage_write", Instant::now() - intended);
        }
    }
    Ok(())
}

/// A JSON object of exactly `bytes` bytes (at least 8): `{"p":"<random lowercase letters>"}`,
/// new on every write so that every write changes the object's version.
fn value(pace: &mut Pace, bytes: u32) -> String {
    let letters = (bytes as usize).saturating_sub(8);
    let mut out = String::with_capacity(bytes as usize);
    out.push_str("{\"p\":\"");
    for _ in 0..letters {
        out.push(char::from(pace.rng.random_range(b'a'..=b'z')));
    }
    out.push_str("\"}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::rpc::Interval;
    use crate::scenario::Seconds;

    #[test]
    fn values_are_json_objects_of_the_asked_size() {
        let interval = Interval::Fixed(Seconds(1.0));
        let mut pace = Pace::new(7, Instant::now(), interval, None);
        for bytes in [8, 9, 100, 4096] {
            let v = value(&mut pace, bytes);
            assert_eq!(v.len(), bytes as usize);
            let parsed: serde_json::Value = serde_json::from_str(&v).expect("JSON");
            assert!(parsed.is_object(), "{v}");
        }
        assert_ne!(
            value(&mut pace, 40),
            value(&mut pace, 40),
            "a new value each time"
        );
    }
}
