//! What a parsed JSON value costs in memory, so the cache is bounded by what it really holds.
//!
//! An answer's text says little about that: `[0,0,0,…]` is 2 bytes of text per element and 32
//! bytes parsed (a `serde_json::Value`), `{"a":0,…}` about 6 bytes of text and well over 100
//! parsed. The estimate errs on the high side: it counts every allocation's capacity, the
//! allocator's own header on each, and map entries as if their tree's nodes were only half full.
//! It is computed once, when a value is fetched, and walks the value once.

use std::mem::size_of;

use serde_json::Value as Json;

/// A `Value` where it sits: inline in its parent (array slot, map entry) or, for the root, in
/// the cache's entry.
const VALUE: u64 = size_of::<Json>() as u64;

/// What the allocator adds to each allocation (its header and rounding).
const ALLOCATION: u64 = 16;

/// One object member: its key's `String` and its `Value`, in a B-tree node that may be only
/// half full (so twice that), plus the node's own header spread over its entries.
const MAP_ENTRY: u64 = 2 * (size_of::<String>() as u64 + VALUE) + 16;

/// The bytes `value` holds, itself included.
pub fn json_bytes(value: &Json) -> u64 {
    VALUE + heap_bytes(value)
}

/// The bytes `value` holds on the heap, beyond the `Value` itself.
fn heap_bytes(value: &Json) -> u64 {
    match value {
        Json::Null | Json::Bool(_) | Json::Number(_) => 0,
        Json::String(text) => allocation(text.capacity() as u64),
        Json::Array(items) => {
            allocation(items.capacity() as u64 * VALUE) + items.iter().map(heap_bytes).sum::<u64>()
        }
        Json::Object(members) => members
            .iter()
            .map(|(key, value)| MAP_ENTRY + allocation(key.capacity() as u64) + heap_bytes(value))
            .sum(),
    }
}

/// An allocation of `bytes`, with the allocator's share; nothing when empty (no allocation).
fn allocation(bytes: u64) -> u64 {
    match bytes {
        0 => 0,
        bytes => bytes + ALLOCATION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_weighs_its_parsed_size_not_its_text() {
        let zeros = format!("[{}0]", "0,".repeat(99_999));
        let parsed: Json = serde_json::from_str(&zeros).expect("JSON");
        assert_eq!(zeros.len(), 200_001);
        // 100,000 values of 32 bytes each, at least: 16 times the text.
        assert!(
            json_bytes(&parsed) >= 100_000 * VALUE,
            "{}",
            json_bytes(&parsed)
        );

        let members: Vec<String> = (0..10_000).map(|i| format!("\"k{i}\":0")).collect();
        let object = format!("{{{}}}", members.join(","));
        let parsed: Json = serde_json::from_str(&object).expect("JSON");
        // Each member's key and value sit in the map, however short its text.
        let floor = 10_000 * (size_of::<String>() as u64 + VALUE);
        assert!(
            json_bytes(&parsed) >= floor,
            "{} < {floor}",
            json_bytes(&parsed)
        );
        assert!(json_bytes(&parsed) > 10 * object.len() as u64);
    }

    #[test]
    fn scalars_weigh_their_value_and_strings_their_text() {
        assert_eq!(json_bytes(&Json::Null), VALUE);
        assert_eq!(json_bytes(&serde_json::json!(12)), VALUE);
        assert!(json_bytes(&serde_json::json!("x".repeat(1000))) >= VALUE + 1000);
    }
}
