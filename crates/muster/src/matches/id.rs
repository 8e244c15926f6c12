//! Match ids in Nakama's form: `{uuid}.` for a relayed match and `{uuid}.{node}` for an
//! authoritative one, so a client (or a future router) can tell from the id alone which kind of
//! match it names and which node runs it.

use std::fmt;

use uuid::Uuid;

use super::error::MatchError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchId {
    pub uuid: Uuid,
    pub authoritative: bool,
}

impl MatchId {
    pub fn new_relayed() -> MatchId {
        MatchId {
            uuid: Uuid::new_v4(),
            authoritative: false,
        }
    }

    pub fn new_authoritative() -> MatchId {
        MatchId {
            uuid: Uuid::new_v4(),
            authoritative: true,
        }
    }

    /// Parses a client-given id. An authoritative id of another node is "not found" here.
    pub fn parse(text: &str, node: &str) -> Result<MatchId, MatchError> {
        let bad = || MatchError::BadInput(format!("'{}' is not a match id", shorten(text)));
        let (uuid, suffix) = text.split_once('.').ok_or_else(bad)?;
        let uuid = Uuid::try_parse(uuid).map_err(|_| bad())?;
        match suffix {
            "" => Ok(MatchId {
                uuid,
                authoritative: false,
            }),
            s if s == node => Ok(MatchId {
                uuid,
                authoritative: true,
            }),
            _ => Err(MatchError::NotFound(format!(
                "match {} is not on this node",
                shorten(text)
            ))),
        }
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

/// At most 80 characters of client text, for error messages.
pub fn shorten(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds_and_rejects_the_rest() {
        let relayed = MatchId::new_relayed();
        let text = relayed.display("n1");
        assert!(text.ends_with('.'));
        assert_eq!(MatchId::parse(&text, "n1"), Ok(relayed));
        let auth = MatchId::new_authoritative();
        assert_eq!(MatchId::parse(&auth.display("n1"), "n1"), Ok(auth));
        assert!(matches!(
            MatchId::parse(&auth.display("n2"), "n1"),
            Err(MatchError::NotFound(_))
        ));
        for bad in ["", "x", "x.", "123.", &relayed.uuid.to_string()] {
            assert!(
                matches!(MatchId::parse(bad, "n1"), Err(MatchError::BadInput(_))),
                "{bad}"
            );
        }
    }
}
