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
use crate::cluster::protocol::{decode_borrowed, encode, Message};
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

impl crate::cluster::protocol::Message for ActRequest {
    const KIND: &'static str = "world.act";
}

/// The owner's answer to an action.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActAnswer {
    Ok(Value),
    Err { code: i32, message: String },
}

impl crate::cluster::protocol::Message for ActAnswer {
    const KIND: &'static str = "world.act_answer";
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

impl crate::cluster::protocol::Message for SubscribeRequest {
    const KIND: &'static str = "world.subscribe";
}

#[derive(Debug, Serialize, Deserialize)]
pub struct UnsubscribeRequest {
    pub session_id: Uuid,
}

impl crate::cluster::protocol::Message for UnsubscribeRequest {
    const KIND: &'static str = "world.unsubscribe";
}

/// A node took a shard.
#[derive(Debug, Serialize, Deserialize)]
pub struct Moved {
    pub shard: u32,
}

impl crate::cluster::protocol::Message for Moved {
    const KIND: &'static str = "world.moved";
}

/// The answer to a subscription: the snapshot (a `WorldState`, encoded), or why it was
/// refused.
#[derive(Debug, Serialize, Deserialize)]
pub struct SubscribeAnswer(Result<serde_bytes::ByteBuf, String>);

impl Message for SubscribeAnswer {
    const KIND: &'static str = "world.subscribe_answer";
}

impl SubscribeAnswer {
    pub fn of(result: Result<WorldState, String>) -> SubscribeAnswer {
        SubscribeAnswer(result.map(|state| serde_bytes::ByteBuf::from(state.encode_to_vec())))
    }

    pub fn into_result(self) -> Result<WorldState, String> {
        let state = self.0?;
        WorldState::decode(state.as_slice())
            .map_err(|e| format!("the shard's node answered a bad snapshot: {e}"))
    }
}

/// Most bytes of one batch of views (NATS takes 1 MB by default).
pub const MAX_VIEW_BATCH: usize = 256 * 1024;

/// One view: an update for the socket `session_id` (watching `shard`) of the node it is sent
/// to, as the socket's frame (text or binary), encoded for it already.
#[derive(Debug, Serialize)]
pub struct ViewEntry {
    pub session_id: Uuid,
    pub shard: u32,
    pub text: bool,
    #[serde(serialize_with = "as_bytes")]
    pub body: bytes::Bytes,
}

fn as_bytes<S: serde::Serializer>(body: &bytes::Bytes, to: S) -> Result<S::Ok, S::Error> {
    to.serialize_bytes(body)
}

impl ViewEntry {
    pub fn of(session_id: Uuid, shard: u32, frame: Frame) -> ViewEntry {
        let (text, body) = match frame {
            Frame::Text(text) => (true, bytes::Bytes::from(text)),
            Frame::Binary(bytes) => (false, bytes),
            _ => (false, bytes::Bytes::new()),
        };
        ViewEntry {
            session_id,
            shard,
            text,
            body,
        }
    }
}

/// A batch of views for one node, as sent.
#[derive(Debug, Serialize)]
struct Views<'a> {
    views: &'a [ViewEntry],
}

impl Message for Views<'_> {
    const KIND: &'static str = "world.views";
}

/// A batch of views as read: each body borrowed from the message's buffer.
#[derive(Debug, Deserialize)]
struct ViewsIn<'a> {
    #[serde(borrow)]
    views: Vec<ViewIn<'a>>,
}

#[derive(Debug, Deserialize)]
struct ViewIn<'a> {
    session_id: Uuid,
    shard: u32,
    text: bool,
    #[serde(borrow, with = "serde_bytes")]
    body: &'a [u8],
}

impl Message for ViewsIn<'_> {
    const KIND: &'static str = "world.views";
}

/// Views for one node, gathered into as few messages as their size allows.
#[derive(Default)]
pub struct ViewBatch {
    /// Each message's views, and their bytes.
    batches: Vec<(Vec<ViewEntry>, usize)>,
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
    pub fn push(&mut self, entry: ViewEntry) {
        // The entry's body and its fields' overhead.
        let need = entry.body.len() + 32;
        match self.batches.last_mut() {
            Some((views, bytes)) if *bytes + need <= MAX_VIEW_BATCH => {
                views.push(entry);
                *bytes += need;
            }
            _ => self.batches.push((vec![entry], need)),
        }
    }

    /// The messages (in the cluster's protocol), and how many views each holds.
    pub fn into_frames(self) -> Vec<(Vec<u8>, usize)> {
        self.batches
            .into_iter()
            .map(|(views, _)| (encode(&Views { views: &views }), views.len()))
            .collect()
    }
}

/// A view as read back: the socket, its shard and its frame.
pub struct View {
    pub session_id: Uuid,
    pub shard: u32,
    pub frame: Frame,
}

/// The views of a batch (none when it does not read); each binary frame shares the message's
/// buffer, no copy.
pub fn read_view_batch(bytes: &bytes::Bytes) -> Vec<View> {
    let Ok(batch) = decode_borrowed::<ViewsIn>(bytes) else {
        return Vec::new();
    };
    batch
        .views
        .into_iter()
        .filter_map(|view| {
            let frame = if view.text {
                Frame::Text(String::from_utf8(view.body.to_vec()).ok()?.into())
            } else {
                Frame::Binary(bytes.slice_ref(view.body))
            };
            Some(View {
                session_id: view.session_id,
                shard: view.shard,
                frame,
            })
        })
        .collect()
}

/// What a request to a shard's owner came to.
pub enum Asked<A> {
    Answer(A),
    /// No node runs the shard right now (it is moving).
    NoOwner,
    Failed(String),
}

/// Sends `question` to shard `shard`'s owner as a `kind` request.
pub async fn ask_owner<Q: Message + Serialize, A: Message + serde::de::DeserializeOwned>(
    bus: &Bus,
    shard: u32,
    kind: &str,
    question: &Q,
    timeout: Duration,
) -> Asked<A> {
    match bus.ask(&shard_topic(shard, kind), question, timeout).await {
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
    use crate::cluster::protocol::decode;
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
            batch.push(ViewEntry::of(*id, 7, frame.clone()));
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
        let whole = &frames[0];
        assert!(
            read_view_batch(&whole[..whole.len() - 2].to_vec().into()).is_empty(),
            "a batch cut short"
        );
        // Past the size bound, a batch splits; every view is still there once.
        let big = Frame::Binary(vec![0u8; 100_000].into());
        let mut batch = ViewBatch::default();
        for id in &ids {
            batch.push(ViewEntry::of(*id, 0, big.clone()));
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
        let answered = |answer: SubscribeAnswer| {
            decode::<SubscribeAnswer>(&encode(&answer))
                .expect("read")
                .into_result()
        };
        assert_eq!(answered(SubscribeAnswer::of(Ok(state.clone()))), Ok(state));
        assert_eq!(
            answered(SubscribeAnswer::of(Err("no".into()))),
            Err("no".into())
        );
        let refused = ActAnswer::of(Err(RpcError::new(RpcCode::NotFound, "gone")));
        let back: ActAnswer = decode(&encode(&refused)).expect("read");
        assert_eq!(
            back.into_result(),
            Err(RpcError::new(RpcCode::NotFound, "gone"))
        );
    }
}
