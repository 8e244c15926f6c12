//! Run with: `cd crates/muster-proto && cargo +nightly fuzz run delivery`
//!
//! Feeds arbitrary bytes to the ENet transport's delivery peek. It may not panic, and on any
//! bytes that decode as an envelope it must agree with the decoder: unreliable exactly when the
//! envelope is `match_data` with `reliable` false.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster_proto::realtime::delivery::{delivery, Delivery};
use muster_proto::realtime::{decode_protobuf, Message};

fuzz_target!(|data: &[u8]| {
    let peeked = delivery(data);
    if let Ok(envelope) = decode_protobuf(data) {
        let unreliable = matches!(envelope.message, Some(Message::MatchData(ref d)) if !d.reliable);
        assert_eq!(peeked == Delivery::Unreliable, unreliable);
    }
});
