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
//! Requests and control messages are JSON. A view is the socket's session id (16 bytes), the
//! shard (u32), the frame's kind (0 text, 1 binary) and the frame itself, encoded by the shard's
//! node in the socket's own format (JSON or protobuf), on its view threads: the socket's node
//! only queues it. A batch is views one after the other, each after its length (u32, both
//! little-endian).

use std::time::Duration;

use muster_proto::realtime::WorldState;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::actions::Action;
use crate::base::rpc::{RpcCode, RpcError};
use crate::cluster::bus::Bus;
use crate::session::codec::Frame;
use crate::session::Format;
use muster_world::geo::{Point, Rect};

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

impl SubscribeRequest {
    pub fn rect(&self) -> Rect {
        let [min_x, min_y, max_x, max_y] = self.rect;
        Rect {
            min: Point::new(min_x, min_y),
            max: Point::new(max_x, max_y),
        }
    }

    /// The socket's format, which its updates are encoded in.
    pub fn format(&self) -> Format {
        if self.protobuf {
            Format::Protobuf
        } else {
            Format::Json
        }
    }
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
    /// The socket speaks protobuf (else JSON): its updates are encoded so.
    #[serde(default)]
    pub protobuf: bool,
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

/// One view: an update for the socket `session_id` (watching `shard`) of the node it is sent
/// to, as the socket's frame.
pub fn view_entry(session_id: Uuid, shard: u32, frame: &Frame) -> Vec<u8> {
    let (kind, body): (u8, &[u8]) = match frame {
        Frame::Text(text) => (0, text.as_bytes()),
        Frame::Binary(bytes) => (1, bytes),
        _ => (1, &[]),
    };
    let mut bytes = Vec::with_capacity(21 + body.len());
    bytes.extend_from_slice(session_id.as_bytes());
    bytes.extend_from_slice(&shard.to_le_bytes());
    bytes.push(kind);
    bytes.extend_from_slice(body);
    bytes
}

/// Views for one node, gathered into as few messages as their size allows.
#[derive(Default)]
pub struct ViewBatch {
    /// Each message, and how many views it holds.
    frames: Vec<(Vec<u8>, usize)>,
}

/// Messages of views waiting to be published at most: past it (NATS away or too slow) views
/// are dropped and counted as skipped (at most 64 MiB held).
pub const VIEWS_WAITING: usize = 256;

/// One message of views for a node's subject.
pub struct ViewMessage {
    pub topic: String,
    pub bytes: Vec<u8>,
}

impl ViewBatch {
    pub fn push(&mut self, entry: &[u8]) {
        let need = 4 + entry.len();
        match self.frames.last_mut() {
            Some((frame, views)) if frame.len() + need <= MAX_VIEW_BATCH => {
                frame.extend_from_slice(&(entry.len() as u32).to_le_bytes());
                frame.extend_from_slice(entry);
                *views += 1;
            }
            _ => {
                let mut frame = Vec::with_capacity(need.max(16 * 1024));
                frame.extend_from_slice(&(entry.len() as u32).to_le_bytes());
                frame.extend_from_slice(entry);
                self.frames.push((frame, 1));
            }
        }
    }

    /// The messages, and how many views each holds.
    pub fn into_frames(self) -> Vec<(Vec<u8>, usize)> {
        self.frames
    }
}

/// A view as read back: the socket, its shard and its frame.
pub struct View {
    pub session_id: Uuid,
    pub shard: u32,
    pub frame: Frame,
}

/// The views of a batch; stops at the first one that does not read.
pub fn read_view_batch(bytes: &bytes::Bytes) -> Vec<View> {
    let mut views = Vec::new();
    let mut at = 0;
    while bytes.len() >= at + 4 {
        let len =
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        let start = at + 4;
        if len < 21 || bytes.len() < start + len {
            break;
        }
        let entry = &bytes[start..start + len];
        let Ok(session_id) = Uuid::from_slice(&entry[..16]) else {
            break;
        };
        let shard = u32::from_le_bytes([entry[16], entry[17], entry[18], entry[19]]);
        // The frame shares the message's buffer: no copy.
        let body = bytes.slice(start + 21..start + len);
        let frame = match entry[20] {
            0 => match String::from_utf8(body.to_vec()) {
                Ok(text) => Frame::Text(text.into()),
                Err(_) => break,
            },
            _ => Frame::Binary(body),
        };
        views.push(View {
            session_id,
            shard,
            frame,
        });
        at = start + len;
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
        let text = Frame::Text("{\"world_state\":{}}".into());
        let binary = Frame::Binary(vec![1u8, 2, 3].into());
        let mut batch = ViewBatch::default();
        for (i, id) in ids.iter().enumerate() {
            let frame = if i == 1 { &binary } else { &text };
            batch.push(&view_entry(*id, 7, frame));
        }
        let frames: Vec<Vec<u8>> = batch.into_frames().into_iter().map(|(f, _)| f).collect();
        assert_eq!(frames.len(), 1, "small views share one message");
        let back = read_view_batch(&frames[0].clone().into());
        assert_eq!(back.len(), 3);
        for (i, view) in back.iter().enumerate() {
            assert_eq!((view.session_id, view.shard), (ids[i], 7));
            let want = if i == 1 { &binary } else { &text };
            assert_eq!(&view.frame, want);
        }
        assert!(read_view_batch(&vec![1u8, 2, 3].into()).is_empty());
        assert!(
            read_view_batch(&vec![200u8, 0, 0, 0, 1].into()).is_empty(),
            "a length past the end"
        );
        // Past the size bound, a batch splits; every view is still there once.
        let big = Frame::Binary(vec![0u8; 100_000].into());
        let mut batch = ViewBatch::default();
        for id in &ids {
            batch.push(&view_entry(*id, 0, &big));
        }
        let frames = batch.into_frames();
        assert_eq!(frames.iter().map(|(_, n)| n).sum::<usize>(), 3);
        let frames: Vec<Vec<u8>> = frames.into_iter().map(|(f, _)| f).collect();
        assert!(frames.len() > 1 && frames.iter().all(|f| f.len() <= MAX_VIEW_BATCH));
        let count: usize = frames
            .iter()
            .map(|f| read_view_batch(&f.clone().into()).len())
            .sum();
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
