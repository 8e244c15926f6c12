//! The cluster's matchmaker tickets and its lease in a shared database ([`MatchmakerStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// A matchmaker ticket as a cluster keeps it ([`MatchmakerStore`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTicket {
    pub id: Uuid,
    pub session_id: Uuid,
    /// The player's user id, for the limit per user.
    pub user_id: Uuid,
    /// The node its session is on, and that node's run.
    pub node: String,
    pub incarnation: i64,
    pub created_ms: i64,
    /// The ticket itself, as JSON (the matchmaker's to read).
    pub body: String,
}

/// What [`MatchmakerStore::add_ticket`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketAdded {
    Added,
    /// The session holds its most tickets already.
    SessionFull,
    /// The user holds their most tickets already.
    UserFull,
}

/// Picks the groups of a pass from every waiting ticket (oldest first).
pub type PickGroups<'a> = dyn Fn(Vec<StoredTicket>) -> Vec<Vec<StoredTicket>> + Send + Sync + 'a;

/// The tickets of a cluster's one matchmaker, and the lease saying which node runs its passes.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait MatchmakerStore: Send + Sync {
    /// Stores `ticket` unless its session has `max_per_session` tickets already, or its user
    /// `max_per_user` (counted under a lock per user, so that nodes adding at once agree).
    async fn add_ticket(
        &self,
        ticket: StoredTicket,
        max_per_session: i64,
        max_per_user: i64,
    ) -> Result<TicketAdded, StoreError>;

    /// Removes ticket `ticket` of session `session`; false when there was none.
    async fn remove_ticket(&self, session: Uuid, ticket: Uuid) -> Result<bool, StoreError>;

    /// Removes every ticket of `session`.
    async fn remove_session_tickets(&self, session: Uuid) -> Result<(), StoreError>;

    /// Removes the tickets of `node` from runs other than `keep_incarnation` (0: of every run);
    /// how many.
    async fn remove_node_tickets(
        &self,
        node: &str,
        keep_incarnation: i64,
    ) -> Result<u64, StoreError>;

    /// Takes lease `name` for `holder` for `ttl_ms` if it is free, expired or already
    /// `holder`'s (a new run of it); the new epoch, or `None` when another holds it.
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError>;

    /// One pass, fenced: if `holder` still holds lease `name` at `epoch`, extends it by `ttl_ms`,
    /// gives `pick` every ticket and deletes the tickets of the groups it returns, all in one
    /// transaction; the groups, or `None` when the lease was lost (nothing changed).
    async fn take_groups(
        &self,
        name: &str,
        holder: &str,
        epoch: i64,
        ttl_ms: i64,
        pick: &PickGroups<'_>,
    ) -> Result<Option<Vec<Vec<StoredTicket>>>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[
    crate::migration!(6, "cluster_matchmaker", "0006_cluster_matchmaker"),
    crate::migration!(8, "matchmaker_ticket_users", "0008_matchmaker_ticket_users"),
];
