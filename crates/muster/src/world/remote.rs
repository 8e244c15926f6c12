//! A clustered world's messages between nodes, over the cluster's bus (NATS):
//!
//! - `world.shard.<n>.act`, `.subscribe`, `.unsubscribe`: requests for shard `n`, answered by the
//!   one node that runs it (it subscribes while it holds the shard's lease; with no node running
//!   it, NATS answers "no responders" at once);
//! - `world.view.<node>`: a remote subscriber's updates, to the node its socket is on;
//! - `world.moved`: a node took a shard; every node subscribes its sockets that watch that
//!   shard again, and they get a fresh snapshot.
//!
//! Requests and control messages are JSON; a view is the socket's session id (16 bytes) and
//! the `WorldState` as protobuf, so the owner encodes each update once whatever the socket's
//! format.

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

/// An update for the socket `session_id` of the node it is sent to.
pub fn view_frame(session_id: Uuid, state: &WorldState) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16 + state.encoded_len());
    bytes.extend_from_slice(session_id.as_bytes());
    state.encode(&mut bytes).unwrap_or_default();
    bytes
}

pub fn read_view_frame(bytes: &[u8]) -> Option<(Uuid, WorldState)> {
    if bytes.len() < 16 {
        return None;
    }
    let (id, state) = bytes.split_at(16);
    let session_id = Uuid::from_slice(id).ok()?;
    Some((session_id, WorldState::decode(state).ok()?))
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
        let id = Uuid::new_v4();
        let (back_id, back) = read_view_frame(&view_frame(id, &state)).expect("frame");
        assert_eq!((back_id, &back), (id, &state));
        assert!(read_view_frame(&[1, 2, 3]).is_none());
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
