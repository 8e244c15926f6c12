//! A clustered world's messages between nodes, over the cluster's bus (NATS):
//!
//! - `world.shard.<n>.act`, `.subscribe`, `.unsubscribe`: requests for shard `n`, answered by the
//!   one node that runs it (it subscribes while it holds the shard's lease; with no node running
//!   it, NATS answers "no responders" at once);
//! - `world.view.<node>`: remote subscribers' updates, to the node their sockets are on, batched:
//!   one message per node per tick (split past [`MAX_VIEW_BATCH`] bytes);
//! - `world.moved`: a node took a shard; every node subscribes its sockets that watch that
//!   shard again, and they get a fresh snapshot.
//!
//! Requests and control messages are JSON; a view is the socket's session id (16 bytes) and
//! the `WorldState` as protobuf, so the owner encodes each update once whatever the socket's
//! format; a batch is views one after the other, each after its length (u32, little-endian).

use std::time::Duration;

use muster_proto::realtime::WorldState;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::actions::Action;
use crate::cluster::bus::Bus;
use crate::functions::{RpcCode, RpcError};

/// How long a node waits for the owner's answer to an action (it may route a connect).
pub const ACT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a node waits for the owner's snapshot.
pub const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Requests for shard `shard`, all of them (what its owner subscribes to).
pub fn shard_topics(shard: u32) -> String {
    format!("world.shard.{shard}.>")
}

pub fn shard_topic(shard: u32, kind: &str) -> String {
    format!("world.shard.{shard}.{kind}")
}

pub fn view_topic(node: &str) -> String {
    format!("world.view.{node}")
}

pub const MOVED_TOPIC: &str = "world.moved";

/// A player's action, for the shard's owner to quote, charge and apply.
#[derive(Debug, Serialize, Deserialize)]
pub struct ActRequest {
    pub user: Uuid,
    pub action: Action,
}

/// The owner's answer to an action.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActAnswer {
    Ok(Value),
    Err { code: i32, message: String },
}

impl ActAnswer {
    pub fn of(result: Result<Value, RpcError>) -> ActAnswer {
        match result {
            Ok(value) => ActAnswer::Ok(value),
            Err(error) => ActAnswer::Err {
                code: error.code.grpc(),
                message: error.message,
            },
        }
    }

    pub fn into_result(self) -> Result<Value, RpcError> {
        match self {
            ActAnswer::Ok(value) => Ok(value),
            ActAnswer::Err { code, message } => Err(RpcError::new(
                RpcCode::from_grpc(code).unwrap_or(RpcCode::Internal),
                message,
            )),
        }
    }
}

/// A socket of node `node` subscribing to a box of the shard.
#[derive(Debug, Serialize, Deserialize)]
pub struct SubscribeRequest {
    pub node: String,
    pub session_id: Uuid,
    /// min x, min y, max x, max y.
    pub rect: [f32; 4],
}

#[derive(Debug, Serialize, Deserialize)]
pub struct UnsubscribeRequest {
    pub session_id: Uuid,
}

/// A node took a shard.
#[derive(Debug, Serialize, Deserialize)]
pub struct Moved {
    pub shard: u32,
    pub node: String,
    pub epoch: i64,
}

/// The answer to a subscription: `0` and the snapshot, or `1` and why it was refused.
pub fn subscribe_answer(result: Result<WorldState, String>) -> Vec<u8> {
    match result {
        Ok(state) => {
            let mut bytes = vec![0];
            state.encode(&mut bytes).unwrap_or_default();
            bytes
        }
        Err(why) => {
            let mut bytes = vec![1];
            bytes.extend_from_slice(why.as_bytes());
            bytes
        }
    }
}

pub fn read_subscribe_answer(bytes: &[u8]) -> Result<WorldState, String> {
    match bytes.split_first() {
        Some((0, state)) => WorldState::decode(state)
            .map_err(|e| format!("the shard's node answered a bad snapshot: {e}")),
        Some((1, why)) => Err(String::from_utf8_lossy(why).into_owned()),
        _ => Err("the shard's node answered nothing readable".into()),
    }
}

/// Most bytes of one batch of views (NATS takes 1 MB by default).
pub const MAX_VIEW_BATCH: usize = 256 * 1024;

/// One view: an update for the socket `session_id` of the node it is sent to.
pub fn view_entry(session_id: Uuid, state: &WorldState) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16 + state.encoded_len());
    bytes.extend_from_slice(session_id.as_bytes());
    state.encode(&mut bytes).unwrap_or_default();
    bytes
}

/// Views for one node, gathered into as few messages as their size allows.
#[derive(Default)]
pub struct ViewBatch {
    frames: Vec<Vec<u8>>,
}

impl ViewBatch {
    pub fn push(&mut self, entry: &[u8]) {
        let need = 4 + entry.len();
        match self.frames.last_mut() {
            Some(frame) if frame.len() + need <= MAX_VIEW_BATCH => {
                frame.extend_from_slice(&(entry.len() as u32).to_le_bytes());
                frame.extend_from_slice(entry);
            }
            _ => {
                let mut frame = Vec::with_capacity(need.max(16 * 1024));
                frame.extend_from_slice(&(entry.len() as u32).to_le_bytes());
                frame.extend_from_slice(entry);
                self.frames.push(frame);
            }
        }
    }

    pub fn into_frames(self) -> Vec<Vec<u8>> {
        self.frames
    }
}

/// The views of a batch; stops at the first one that does not read.
pub fn read_view_batch(mut bytes: &[u8]) -> Vec<(Uuid, WorldState)> {
    let mut views = Vec::new();
    while bytes.len() >= 4 {
        let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let Some(entry) = bytes.get(4..4 + len) else {
            break;
        };
        if entry.len() < 16 {
            break;
        }
        let (id, state) = entry.split_at(16);
        let (Ok(session_id), Ok(state)) = (Uuid::from_slice(id), WorldState::decode(state)) else {
            break;
        };
        views.push((session_id, state));
        bytes = &bytes[4 + len..];
    }
    views
}

/// What a request to a shard's owner came to.
pub enum Asked {
    Answer(Vec<u8>),
    /// No node runs the shard right now (it is moving).
    NoOwner,
    Failed(String),
}

/// Sends `payload` to shard `shard`'s owner as a `kind` request.
pub async fn ask_owner(
    bus: &Bus,
    shard: u32,
    kind: &str,
    payload: Vec<u8>,
    timeout: Duration,
) -> Asked {
    match bus
        .request(&shard_topic(shard, kind), payload, timeout)
        .await
    {
        Ok(answer) => Asked::Answer(answer),
        Err(error) => {
            let no_owner = error
                .downcast_ref::<async_nats::client::RequestError>()
                .is_some_and(|e| e.kind() == async_nats::client::RequestErrorKind::NoResponders);
            if no_owner {
                Asked::NoOwner
            } else {
                Asked::Failed(error.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_proto::realtime::WorldTower;

    #[test]
    fn frames_and_answers_read_back() {
        let state = WorldState {
            shard: 1,
            tick: 7,
            snapshot: true,
            towers: vec![WorldTower {
                id: 3,
                x: 1.5,
                y: -2.0,
                owner: 4,
                level: 1,
            }],
            ..Default::default()
        };
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        let mut batch = ViewBatch::default();
        for id in &ids {
            batch.push(&view_entry(*id, &state));
        }
        let frames = batch.into_frames();
        assert_eq!(frames.len(), 1, "small views share one message");
        let back = read_view_batch(&frames[0]);
        assert_eq!(back.len(), 3);
        assert!(back
            .iter()
            .zip(&ids)
            .all(|((id, s), want)| id == want && *s == state));
        assert!(read_view_batch(&[1, 2, 3]).is_empty());
        assert!(
            read_view_batch(&[200, 0, 0, 0, 1]).is_empty(),
            "a length past the end"
        );
        // Past the size bound, a batch splits; every view is still there once.
        let big = WorldState {
            gone_creeps: (0..60_000).collect(),
            ..Default::default()
        };
        let mut batch = ViewBatch::default();
        for id in &ids {
            batch.push(&view_entry(*id, &big));
        }
        let frames = batch.into_frames();
        assert!(frames.len() > 1 && frames.iter().all(|f| f.len() <= MAX_VIEW_BATCH));
        let count: usize = frames.iter().map(|f| read_view_batch(f).len()).sum();
        assert_eq!(count, 3);
        assert_eq!(
            read_subscribe_answer(&subscribe_answer(Ok(state.clone()))),
            Ok(state)
        );
        assert_eq!(
            read_subscribe_answer(&subscribe_answer(Err("no".into()))),
            Err("no".into())
        );
        assert!(read_subscribe_answer(&[]).is_err());
        let refused = ActAnswer::of(Err(RpcError::new(RpcCode::NotFound, "gone")));
        let json = serde_json::to_vec(&refused).expect("json");
        let back: ActAnswer = serde_json::from_slice(&json).expect("read");
        assert_eq!(
            back.into_result(),
            Err(RpcError::new(RpcCode::NotFound, "gone"))
        );
    }
}
