//! Listing cursors: where a page ended — the last object's (read, key, owner) — and which
//! listing it belongs to (collection, owner filter, the least read permission listed), in
//! URL-safe base64 of JSON so that clients treat it as opaque. A cursor used with another
//! listing, or one that does not decode, is refused as malformed; a forged position inside the
//! right listing only moves the page, since the permissions come from the caller, not from it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::storage::store::StorageRecord;

/// The listing a cursor belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub collection: String,
    pub owner: Option<Uuid>,
    pub min_read: i16,
}

#[derive(Serialize, Deserialize)]
struct Encoded {
    /// The listing: collection, owner filter, least read permission.
    c: String,
    o: Option<Uuid>,
    m: i16,
    /// The position: the last object's read permission, key and owner.
    r: i16,
    k: String,
    u: Uuid,
}

impl Listing {
    /// The cursor of the page that ends at `last`.
    pub fn cursor_after(&self, last: &StorageRecord) -> String {
        let encoded = Encoded {
            c: self.collection.clone(),
            o: self.owner,
            m: self.min_read,
            r: last.read,
            k: last.id.key.clone(),
            u: last.id.owner,
        };
        crate::base::cursor::encode(&encoded)
    }

    /// The position `cursor` names, if it decodes and belongs to this listing.
    pub fn position(&self, cursor: &str) -> Option<(i16, String, Uuid)> {
        let encoded: Encoded = crate::base::cursor::decode(cursor)?;
        let belongs = encoded.c == self.collection
            && encoded.o == self.owner
            && encoded.m == self.min_read
            && (0..=2).contains(&encoded.r);
        belongs.then_some((encoded.r, encoded.k, encoded.u))
    }
}

/// A cursor of one owner's objects across collections (an operator's view): the last object's
/// collection and key, and the owner it belongs to.
#[derive(Serialize, Deserialize)]
struct OwnedEncoded {
    o: Uuid,
    c: String,
    k: String,
}

/// The cursor of `owner`'s page that ends at `last`.
pub fn owned_cursor_after(owner: Uuid, last: &StorageRecord) -> String {
    let encoded = OwnedEncoded {
        o: owner,
        c: last.id.collection.clone(),
        k: last.id.key.clone(),
    };
    crate::base::cursor::encode(&encoded)
}

/// The (collection, key) `cursor` names, if it decodes and is a cursor of `owner`'s objects.
pub fn owned_position(owner: Uuid, cursor: &str) -> Option<(String, String)> {
    let encoded: OwnedEncoded = crate::base::cursor::decode(cursor)?;
    (encoded.o == owner).then_some((encoded.c, encoded.k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_cursor_reads_back_only_for_its_owner() {
        let (owner, other) = (Uuid::new_v4(), Uuid::new_v4());
        let cursor = owned_cursor_after(owner, &record(1, "slot-2", owner));
        assert_eq!(
            owned_position(owner, &cursor),
            Some(("saves".to_string(), "slot-2".to_string()))
        );
        assert_eq!(owned_position(other, &cursor), None);
        for garbage in [
            "",
            "!!",
            "e30",
            &"A".repeat(crate::base::cursor::MAX_CURSOR_BYTES + 1),
        ] {
            assert_eq!(owned_position(owner, garbage), None, "{garbage:?}");
        }
    }
    use crate::storage::store::StorageKey;

    fn record(read: i16, key: &str, owner: Uuid) -> StorageRecord {
        StorageRecord {
            id: StorageKey {
                collection: "saves".into(),
                key: key.into(),
                owner,
            },
            value: "{}".into(),
            version: String::new(),
            read,
            write: 1,
            create_time_ms: 0,
            update_time_ms: 0,
        }
    }

    #[test]
    fn a_cursor_reads_back_only_in_its_own_listing() {
        let owner = Uuid::new_v4();
        let public = Listing {
            collection: "saves".into(),
            owner: None,
            min_read: 2,
        };
        let cursor = public.cursor_after(&record(2, "slot-7", owner));
        assert_eq!(
            public.position(&cursor),
            Some((2, "slot-7".to_string(), owner))
        );
        // Another collection, another owner filter, or a listing of more permissions: refused.
        for other in [
            Listing {
                collection: "other".into(),
                ..public.clone()
            },
            Listing {
                owner: Some(owner),
                ..public.clone()
            },
            Listing {
                min_read: 0,
                ..public.clone()
            },
        ] {
            assert_eq!(other.position(&cursor), None, "{other:?}");
        }
        for garbage in [
            "",
            "!!",
            "e30",
            &"A".repeat(crate::base::cursor::MAX_CURSOR_BYTES + 1),
        ] {
            assert_eq!(public.position(garbage), None, "{garbage:?}");
        }
    }
}
