//! Sessions: one per open realtime connection, whatever its transport.
//!
//! - [`registry`]: who is online, the socket limit ([`registry::Admission`]), counts kept as counters;
//! - [`outbox`]: a session's bounded queue of frames written by other tasks;
//! - [`codec`]: envelopes to frames and back, in the session's [`Format`];
//! - [`fanout`]: one message encoded once per format and handed to many outboxes;
//! - [`channels`]: which sessions on this node are in which channel, O(1) joins and leaves.

pub mod channels;
pub mod codec;
pub mod fanout;
pub mod outbox;
pub mod registry;

pub use registry::{Admission, Session, SessionGuard, SessionRegistry};

/// The two envelope encodings a session may choose at connect time (the native TCP transport is
/// always protobuf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Protobuf,
}

/// How a domain answers one realtime request from a session. The dispatcher turns it into the
/// envelope (with the request's `cid`) or nothing; a domain's error becomes an error envelope
/// there too, so no domain builds a reply envelope itself.
#[derive(Debug)]
pub enum Answer {
    /// Answer with this message, written before anything the request queued on the session's
    /// outbox (a `match_join`'s `match` precedes the match's first messages).
    Reply(muster_proto::realtime::Message),
    /// Answer with this message behind what the request queued (a chat ack follows the
    /// sender's own copy of its message).
    AfterQueued(muster_proto::realtime::Message),
    /// Done, nothing to say: an empty envelope carrying the request's `cid`, or nothing when
    /// the request had none.
    Done,
    /// No answer at all (match data, as on Nakama).
    Silent,
}
