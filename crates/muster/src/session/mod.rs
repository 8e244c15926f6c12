//! Sessions: one per open realtime connection, whatever its transport.
//!
//! - [`registry`]: who is online, the socket limit ([`registry::Admission`]), counts kept as counters;
//! - [`outbox`]: a session's bounded queue of frames written by other tasks;
//! - [`codec`]: envelopes to frames and back, in the session's [`Format`];
//! - [`fanout`]: one message encoded once per format and handed to many outboxes.

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
