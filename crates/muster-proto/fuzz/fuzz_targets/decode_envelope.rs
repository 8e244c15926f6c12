//! Run with: `cd crates/muster-proto && cargo +nightly fuzz run decode_envelope`
//!
//! Feeds arbitrary bytes to both realtime decoders. Neither may panic; whatever decodes must
//! encode and decode again to the same envelope.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster_proto::realtime::{decode_json, decode_protobuf, encode_json, encode_protobuf};

fuzz_target!(|data: &[u8]| {
    if let Ok(envelope) = decode_json(data) {
        let again = decode_json(encode_json(&envelope).as_bytes()).expect("re-decodes");
        assert!(again == envelope);
    }
    if let Ok(envelope) = decode_protobuf(data) {
        let again = decode_protobuf(&encode_protobuf(&envelope)).expect("re-decodes");
        assert!(again == envelope);
    }
});
