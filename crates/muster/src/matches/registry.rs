//! Which matches exist and who is in which.
//!
//! Two maps, both sharded (`DashMap`), neither ever walked on a request path:
//! - `matches`: match uuid → the match (a relayed match's shared member list, or an
//!   authoritative match's handle to its task);
//! - `memberships`: session id → the matches that session is in, each with its input rate
//!   bucket. A `match_data_send` finds its match here (being found is the membership check), and
//!   a closing socket leaves all its matches in O(its memberships).
//!
//! Ended matches leave a tombstone for a while, so a late join is told "ended", not "not found".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use tokio::time::Instant;
use uuid::Uuid;

use super::authoritative::AuthoritativeHandle;
use super::error::MatchError;
use super::id::MatchId;
use super::relayed::RelayedMatch;

pub use super::member::Member;

/// A live match of either kind; in a session's memberships, also a match on another node.
#[derive(Clone)]
pub enum MatchRef {
    Relayed(Arc<RelayedMatch>),
    Authoritative(Arc<AuthoritativeHandle>),
    /// A match that lives on another node of the cluster (only ever in memberships).
    Remote(Arc<RemoteMatch>),
}

/// A match of another node that a session here is in.
#[derive(Debug)]
pub struct RemoteMatch {
    pub id: MatchId,
    /// The node it lives on.
    pub owner: String,
}

impl MatchRef {
    pub fn id(&self) -> MatchId {
        match self {
            MatchRef::Relayed(m) => m.id,
            MatchRef::Authoritative(m) => m.id,
            MatchRef::Remote(m) => m.id,
        }
    }
}

/// A token bucket: `rate` messages per second, up to `burst` at once.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn full(burst: u32) -> Bucket {
        Bucket {
            tokens: f64::from(burst),
            last: Instant::now(),
        }
    }

    pub fn allow(&mut self, rate: u32, burst: u32) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * f64::from(rate);
        self.last = now;
        self.tokens = (self.tokens + refill).min(f64::from(burst));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One of a session's matches.
pub struct Membership {
    pub target: MatchRef,
    pub bucket: Bucket,
}

#[derive(Default)]
pub struct MatchRegistry {
    matches: DashMap<Uuid, MatchRef>,
    /// Names of relayed matches created with `match_create { name }`.
    names: DashMap<String, Uuid>,
    memberships: DashMap<Uuid, Vec<Membership>>,
    /// Ended matches: uuid → when (unix seconds), pruned by [`MatchRegistry::prune`].
    ended: DashMap<Uuid, i64>,
    live: AtomicUsize,
}

/// How long an ended match is remembered as ended.
const TOMBSTONE_SEC: i64 = 600;

impl MatchRegistry {
    pub fn get(&self, id: MatchId) -> Result<MatchRef, MatchError> {
        match self.matches.get(&id.uuid) {
            Some(m) if m.id() == id => Ok(m.clone()),
            _ if self.ended.contains_key(&id.uuid) => {
                Err(MatchError::Ended("Match has ended.".into()))
            }
            _ => Err(MatchError::NotFound("Match not found.".into())),
        }
    }

    /// Matches alive now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub fn is_ended(&self, uuid: Uuid) -> bool {
        self.ended.contains_key(&uuid)
    }

    /// Adds a new match, unless `max` are alive already.
    pub fn insert(&self, target: MatchRef, max: usize) -> Result<(), MatchError> {
        if self.live.fetch_add(1, Ordering::Relaxed) >= max {
            self.live.fetch_sub(1, Ordering::Relaxed);
            return Err(MatchError::Rejected(
                "Too many matches on this server; try later.".into(),
            ));
        }
        self.matches.insert(target.id().uuid, target);
        Ok(())
    }

    /// The relayed match called `name`, made by `create` when there is none.
    pub fn named_or_insert(
        &self,
        name: &str,
        max: usize,
        create: impl FnOnce() -> Arc<RelayedMatch>,
    ) -> Result<Arc<RelayedMatch>, MatchError> {
        use dashmap::mapref::entry::Entry;
        // The name entry is held while the match is made, so two creators of one name agree.
        match self.names.entry(name.to_owned()) {
            Entry::Occupied(existing) => match self.matches.get(existing.get()) {
                Some(m) => match m.value() {
                    MatchRef::Relayed(r) => Ok(r.clone()),
                    MatchRef::Authoritative(_) | MatchRef::Remote(_) => {
                        Err(MatchError::BadInput("Match name in use.".into()))
                    }
                },
                None => {
                    let created = create();
                    self.insert(MatchRef::Relayed(created.clone()), max)?;
                    existing.replace_entry(created.id.uuid);
                    Ok(created)
                }
            },
            Entry::Vacant(slot) => {
                let created = create();
                self.insert(MatchRef::Relayed(created.clone()), max)?;
                slot.insert(created.id.uuid);
                Ok(created)
            }
        }
    }

    /// The relayed match with this id, created when it does not exist (matchmaker tokens name a
    /// relayed match before anyone is in it).
    pub fn relayed_or_insert(
        &self,
        id: MatchId,
        max: usize,
        create: impl FnOnce() -> Arc<RelayedMatch>,
    ) -> Result<Arc<RelayedMatch>, MatchError> {
        use dashmap::mapref::entry::Entry;
        if self.is_ended(id.uuid) {
            return Err(MatchError::Ended("Match has ended.".into()));
        }
        match self.matches.entry(id.uuid) {
            Entry::Occupied(existing) => match existing.get() {
                MatchRef::Relayed(r) => Ok(r.clone()),
                MatchRef::Authoritative(_) | MatchRef::Remote(_) => {
                    Err(MatchError::NotFound("Match not found.".into()))
                }
            },
            Entry::Vacant(slot) => {
                if self.live.fetch_add(1, Ordering::Relaxed) >= max {
                    self.live.fetch_sub(1, Ordering::Relaxed);
                    return Err(MatchError::Rejected(
                        "Too many matches on this server; try later.".into(),
                    ));
                }
                let created = create();
                slot.insert(MatchRef::Relayed(created.clone()));
                Ok(created)
            }
        }
    }

    /// Forgets an ended match and remembers that it ended. False if it was already gone.
    pub fn remove(&self, id: MatchId, name: Option<&str>) -> bool {
        let removed = self
            .matches
            .remove_if(&id.uuid, |_, m| m.id() == id)
            .is_some();
        if removed {
            self.live.fetch_sub(1, Ordering::Relaxed);
            self.ended.insert(id.uuid, crate::base::clock::now_secs());
            if let Some(name) = name {
                self.names.remove_if(name, |_, uuid| *uuid == id.uuid);
            }
        }
        removed
    }

    /// How many matches `session` is in.
    pub fn memberships_of(&self, session: Uuid) -> usize {
        self.memberships.get(&session).map_or(0, |m| m.len())
    }

    /// Whether `session` is in match `id`.
    pub fn member_of(&self, session: Uuid, id: MatchId) -> bool {
        self.memberships
            .get(&session)
            .is_some_and(|list| list.iter().any(|m| m.target.id() == id))
    }

    /// Records that `session` is in `target` (once).
    pub fn add_membership(&self, session: Uuid, target: MatchRef, bucket: Bucket) {
        let mut entry = self.memberships.entry(session).or_default();
        let id = target.id();
        if entry.iter().all(|m| m.target.id() != id) {
            entry.push(Membership { target, bucket });
        }
    }

    /// Removes `session`'s membership of `id`, returning the match if it was one.
    pub fn remove_membership(&self, session: Uuid, id: MatchId) -> Option<MatchRef> {
        let mut removed = None;
        self.memberships.remove_if_mut(&session, |_, list| {
            if let Some(i) = list.iter().position(|m| m.target.id() == id) {
                removed = Some(list.swap_remove(i).target);
            }
            list.is_empty()
        });
        removed
    }

    /// Removes and returns every match `session` is in (the socket closed).
    pub fn take_memberships(&self, session: Uuid) -> Vec<MatchRef> {
        self.memberships
            .remove(&session)
            .map(|(_, list)| list.into_iter().map(|m| m.target).collect())
            .unwrap_or_default()
    }

    /// `session`'s match `id` if it is in it and its bucket allows one more message; `Ok(None)`
    /// when it is not a member.
    pub fn member_send(
        &self,
        session: Uuid,
        id: MatchId,
        rate: u32,
        burst: u32,
    ) -> Result<Option<MatchRef>, MatchError> {
        let Some(mut list) = self.memberships.get_mut(&session) else {
            return Ok(None);
        };
        let Some(membership) = list.iter_mut().find(|m| m.target.id() == id) else {
            return Ok(None);
        };
        if !membership.bucket.allow(rate, burst) {
            return Err(MatchError::BadInput(
                "Too many match messages; slow down.".into(),
            ));
        }
        Ok(Some(membership.target.clone()))
    }

    /// Forgets tombstones older than `TOMBSTONE_SEC`.
    pub fn prune(&self) {
        let oldest = crate::base::clock::now_secs() - TOMBSTONE_SEC;
        self.ended.retain(|_, at| *at >= oldest);
    }

    /// Every match of this node (for listings; walks the map, so never on a hot path).
    pub fn all(&self) -> impl Iterator<Item = MatchRef> + '_ {
        self.matches.iter().map(|m| m.value().clone())
    }

    /// Every live authoritative match (for listings; walks the map, so never on a hot path).
    pub fn authoritative(&self) -> impl Iterator<Item = Arc<AuthoritativeHandle>> + '_ {
        self.matches.iter().filter_map(|m| match m.value() {
            MatchRef::Authoritative(a) => Some(a.clone()),
            MatchRef::Relayed(_) | MatchRef::Remote(_) => None,
        })
    }
}
