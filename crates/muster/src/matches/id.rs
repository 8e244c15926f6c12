//! Match ids in Nakama's form: `{uuid}.` for a relayed match and `{uuid}.{node}` for an
//! authoritative one, so a client can tell from the id alone which kind of match it names.
//!
//! Which node a match lives on is in its uuid, for both kinds: the last six bytes (random in a
//! version-4 uuid) are a hash of the creating node's name ([`node_tag`]). A relayed id carries no
//! node name, and a join token names only the uuid, yet any node of a cluster finds the owner
//! by comparing the tag with its live peers' tags, without asking anyone.

use std::fmt;

use uuid::Uuid;

use super::error::MatchError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchId {
    pub uuid: Uuid,
    pub authoritative: bool,
}

/// The owner's mark in a match uuid: the first six bytes of the FNV-1a hash of its node name
/// (a fixed function, so that nodes of different builds agree).
pub fn node_tag(node: &str) -> [u8; 6] {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in node.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let bytes = hash.to_be_bytes();
    [bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5]]
}

impl MatchId {
    /// A new relayed match of node `node`.
    pub fn new_relayed(node: &str) -> MatchId {
        MatchId {
            uuid: tagged_uuid(node),
            authoritative: false,
        }
    }

    /// A new authoritative match of node `node`.
    pub fn new_authoritative(node: &str) -> MatchId {
        MatchId {
            uuid: tagged_uuid(node),
            authoritative: true,
        }
    }

    /// The tag of the node that made the match (see [`node_tag`]).
    pub fn tag(&self) -> [u8; 6] {
        let bytes = self.uuid.as_bytes();
        [
            bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15],
        ]
    }

    /// Parses a client-given id that must name a match of this node (`node`): an authoritative
    /// id of another node is "not found" here.
    pub fn parse(text: &str, node: &str) -> Result<MatchId, MatchError> {
        let (id, suffix) = MatchId::parse_any(text)?;
        if id.authoritative && suffix != node {
            return Err(MatchError::NotFound(format!(
                "match {} is not on this node",
                shorten(text)
            )));
        }
        Ok(id)
    }

    /// Parses a client-given id of any node; returns it and the node its text names (empty for
    /// a relayed match).
    pub fn parse_any(text: &str) -> Result<(MatchId, &str), MatchError> {
        let bad = || MatchError::BadInput(format!("'{}' is not a match id", shorten(text)));
        let (uuid, suffix) = text.split_once('.').ok_or_else(bad)?;
        let uuid = Uuid::try_parse(uuid).map_err(|_| bad())?;
        if !suffix.is_empty() && !crate::base::names::is_name(suffix) {
            return Err(bad());
        }
        let authoritative = !suffix.is_empty();
        Ok((
            MatchId {
                uuid,
                authoritative,
            },
            suffix,
        ))
    }

    /// The id as clients see it.
    pub fn display(&self, node: &str) -> String {
        if self.authoritative {
            format!("{}.{node}", self.uuid)
        } else {
            format!("{}.", self.uuid)
        }
    }
}

impl fmt::Display for MatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.uuid)
    }
}

fn tagged_uuid(node: &str) -> Uuid {
    let mut bytes = *Uuid::new_v4().as_bytes();
    bytes[10..16].copy_from_slice(&node_tag(node));
    Uuid::from_bytes(bytes)
}

/// At most 80 characters of client text, for error messages.
pub fn shorten(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds_and_rejects_the_rest() {
        let relayed = MatchId::new_relayed("n1");
        let text = relayed.display("n1");
        assert!(text.ends_with('.'));
        assert_eq!(MatchId::parse(&text, "n1"), Ok(relayed));
        let auth = MatchId::new_authoritative("n1");
        assert_eq!(MatchId::parse(&auth.display("n1"), "n1"), Ok(auth));
        assert_eq!(MatchId::parse_any(&auth.display("n2")), Ok((auth, "n2")));
        assert!(matches!(
            MatchId::parse(&auth.display("n2"), "n1"),
            Err(MatchError::NotFound(_))
        ));
        let hostile = format!("{}.n1.x", relayed.uuid);
        for bad in ["", "x", "x.", "123.", &relayed.uuid.to_string(), &hostile] {
            assert!(
                matches!(MatchId::parse(bad, "n1"), Err(MatchError::BadInput(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_match_id_names_the_node_that_made_it() {
        for node in ["muster-0", "muster-1", "a"] {
            let tag = node_tag(node);
            let relayed = MatchId::new_relayed(node);
            let auth = MatchId::new_authoritative(node);
            assert_eq!((relayed.tag(), auth.tag()), (tag, tag));
            assert_eq!(relayed.uuid.get_version_num(), 4, "still a version-4 uuid");
            assert_ne!(relayed.uuid, MatchId::new_relayed(node).uuid, "random");
        }
        assert_ne!(node_tag("muster-0"), node_tag("muster-1"));
        // Fixed across builds: nodes of two versions must agree.
        assert_eq!(node_tag(""), [0xcb, 0xf2, 0x9c, 0xe4, 0x84, 0x22]);
    }
}
