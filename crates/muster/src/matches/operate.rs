//! An operator's hand on a match (the console, server code): who is in it and its state, a
//! signal to its handler, a player removed — on this node, or, in a cluster, on the node the
//! match lives on (asked over the bus, [`super::remote::RoomAsk`]).

use std::time::Duration;

use uuid::Uuid;

use super::authoritative::Inspection;
use super::error::MatchError;
use super::id::MatchId;
use super::registry::MatchRef;
use super::remote::from_answer;
use super::remote::{MatchLink, RoomAsk};
use super::Matches;

impl Matches {
    /// The node room (or match) `id` lives on, when it is another node of the cluster.
    pub(crate) fn elsewhere(&self, id: &str) -> Result<Option<(&MatchLink, String)>, MatchError> {
        let (match_id, _) = MatchId::parse_any(id)?;
        Ok(self
            .link
            .as_deref()
            .and_then(|link| link.owner_of(match_id).map(|owner| (link, owner))))
    }

    /// How long an operator's call waits for a match's task.
    fn operator_limit(&self) -> Duration {
        Duration::from_millis(self.config.join_timeout_ms)
    }

    /// The match `match_id` of this node.
    fn match_here(&self, match_id: &str) -> Result<MatchRef, MatchError> {
        let (id, _) = MatchId::parse_any(match_id)?;
        let id = if id.authoritative {
            MatchId::parse(match_id, self.node())?
        } else {
            id
        };
        self.registry.get(id)
    }

    /// Who is in match `match_id` of this node and, for an authoritative one, its state.
    pub async fn inspect(&self, match_id: &str) -> Result<Inspection, MatchError> {
        match self.match_here(match_id)? {
            MatchRef::Authoritative(handle) => handle.inspect(self.operator_limit()).await,
            MatchRef::Relayed(relayed) => {
                let presences = relayed.presences();
                Ok(Inspection {
                    match_id: relayed.id_text.clone(),
                    handler: String::new(),
                    authoritative: false,
                    label: None,
                    size: presences.len(),
                    tick_rate_hz: 0,
                    tick: 0,
                    presences,
                    state: None,
                })
            }
            MatchRef::Remote(_) => Err(MatchError::NotFound("Match not found.".into())),
        }
    }

    /// Sends `data` to the handler of the authoritative match `match_id` on this node
    /// (Nakama's `matchSignal`): its answer.
    pub async fn signal(&self, match_id: &str, data: String) -> Result<String, MatchError> {
        let handle = self.authoritative_here(match_id)?;
        handle.signal(data, self.operator_limit()).await
    }

    /// Removes the player of `session` from match `match_id` of this node, as a handler's kick
    /// does: the others are told it left. Whether it was in the match.
    pub async fn kick(&self, match_id: &str, session: Uuid) -> Result<bool, MatchError> {
        match self.match_here(match_id)? {
            MatchRef::Authoritative(handle) => handle.kick(session, self.operator_limit()).await,
            MatchRef::Relayed(relayed) => {
                let member = relayed
                    .presences()
                    .iter()
                    .any(|p| Uuid::try_parse(&p.session_id).is_ok_and(|s| s == session));
                if member {
                    self.registry.remove_membership(session, relayed.id);
                    self.leave_target(session, MatchRef::Relayed(relayed));
                }
                Ok(member)
            }
            MatchRef::Remote(_) => Err(MatchError::NotFound("Match not found.".into())),
        }
    }

    /// [`Matches::inspect`] on whichever node the match lives on.
    pub async fn inspect_anywhere(&self, match_id: &str) -> Result<Inspection, MatchError> {
        match self.elsewhere(match_id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Inspect {
                    id: match_id.to_owned(),
                };
                from_answer(link.room(&owner, &ask).await?)
            }
            None => self.inspect(match_id).await,
        }
    }

    /// [`Matches::signal`] on whichever node the match lives on.
    pub async fn signal_anywhere(
        &self,
        match_id: &str,
        data: String,
    ) -> Result<String, MatchError> {
        match self.elsewhere(match_id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Signal {
                    id: match_id.to_owned(),
                    data,
                };
                from_answer(link.room(&owner, &ask).await?)
            }
            None => self.signal(match_id, data).await,
        }
    }

    /// [`Matches::kick`] on whichever node the match lives on.
    pub async fn kick_anywhere(&self, match_id: &str, session: Uuid) -> Result<bool, MatchError> {
        match self.elsewhere(match_id)? {
            Some((link, owner)) => {
                let ask = RoomAsk::Kick {
                    id: match_id.to_owned(),
                    session,
                };
                from_answer(link.room(&owner, &ask).await?)
            }
            None => self.kick(match_id, session).await,
        }
    }
}
