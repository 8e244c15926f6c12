//! The matchmaker: players add tickets (`matchmaker_add`); every `matchmaker.interval_ms` one
//! pass groups compatible tickets into matches and sends each player `matchmaker_matched` with a
//! join token of its own (signed, expiring, single-use; see [`super::join_tokens`]).
//!
//! The matchmaker is an actor: one task owns every ticket, so adds, removes and passes never
//! contend. A request never scans tickets; only the pass does, at a bounded cost:
//!
//! 1. index: each waiting ticket's string properties go into an inverted index
//!    `(key, value) → tickets` — O(T·P) for T tickets of P properties;
//! 2. for each unmatched ticket, oldest first, candidates come from the smallest index list named
//!    by its `+properties.k:v` terms (or every ticket when it has none), starting just after it;
//!    a candidate joins the group when the queries of it and of every member already in the
//!    group accept each other (Nakama's mutual match) and the group's size still fits every
//!    member's `min_count..=max_count`. The scan stops when the group is full or after
//!    `matchmaker.max_candidates` tickets — O(T·C), C ≤ `max_candidates`, and C is about the group
//!    size when most tickets are compatible;
//! 3. a group forms at the smallest `max_count` of its members, or, once its first ticket has
//!    waited `matchmaker.max_intervals` passes, at the largest `min_count` of its members.
//!
//! So a pass costs O(T·(P + C)) and allocates the index once. `muster_matchmaker_pass_duration_seconds`
//! measures it; `matchmaker::tests::pass_cost` prints it for 10,000 and 100,000 tickets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_proto::realtime::{
    matchmaker_matched, Envelope, MatchmakerAdd, MatchmakerMatched, MatchmakerTicket,
    MatchmakerUser, Message, UserPresence,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::error::MatchError;
use super::handler::MatchParams;
use super::id::MatchId;
use super::query::Query;
use super::shared_matchmaker::SharedTickets;
use super::Matches;
use crate::cluster::Recipient;
use crate::matches::config::MatchmakerConfig;
use crate::session::fanout::Encoded;
use crate::session::Session;

/// Requests to the matchmaker task.
enum Command {
    Add {
        ticket: Box<Ticket>,
        reply: oneshot::Sender<Result<(), MatchError>>,
    },
    Remove {
        session: Uuid,
        ticket: Uuid,
        reply: oneshot::Sender<Result<(), MatchError>>,
    },
    SessionClosed {
        session: Uuid,
    },
}

/// One player (or one party, its leader's ticket) looking for a match.
pub struct Ticket {
    pub id: Uuid,
    /// Who is told of the match; `None` in tests of the grouping alone.
    pub recipient: Option<Recipient>,
    pub presence: UserPresence,
    pub session_id: Uuid,
    /// The party the ticket is for (empty for one player's).
    pub party_id: String,
    /// The party's other members, matched with its leader as one.
    pub party: Vec<PartyMember>,
    pub query: Query,
    pub min_count: u32,
    pub max_count: u32,
    pub strings: HashMap<String, String>,
    pub numbers: HashMap<String, f64>,
    /// Passes this ticket has waited through.
    pub intervals: u32,
}

/// A party member on its leader's ticket: told of the match as the leader is.
#[derive(Clone)]
pub struct PartyMember {
    pub recipient: Option<Recipient>,
    pub presence: UserPresence,
}

impl Ticket {
    /// Players the ticket brings: one, or its party's members.
    pub fn size(&self) -> u32 {
        1 + self.party.len() as u32
    }
}

/// The handle the rest of the server uses; the tickets live in [`run`]'s task.
pub struct Matchmaker {
    config: MatchmakerConfig,
    /// In a cluster on PostgreSQL: the tickets are the cluster's, not this task's.
    shared: Option<SharedTickets>,
    commands: mpsc::Sender<Command>,
    receiver: Mutex<Option<mpsc::Receiver<Command>>>,
}

/// Commands waiting for the matchmaker task.
const COMMAND_QUEUE: usize = 4096;

impl Matchmaker {
    /// `shared`: the cluster's tickets, when this node is part of one on PostgreSQL.
    pub fn new(config: MatchmakerConfig, shared: Option<SharedTickets>) -> Matchmaker {
        let (commands, receiver) = mpsc::channel(COMMAND_QUEUE);
        Matchmaker {
            config,
            shared,
            commands,
            receiver: Mutex::new(Some(receiver)),
        }
    }

    /// Validates a `matchmaker_add` and queues its ticket.
    pub async fn add(
        &self,
        session: &Arc<Session>,
        add: MatchmakerAdd,
    ) -> Result<MatchmakerTicket, MatchError> {
        let query = add.query.clone();
        let ticket = self.ticket(session, add)?;
        let id = ticket.id;
        if let Some(shared) = &self.shared {
            shared.add(&ticket, query, &self.config).await?;
            return Ok(MatchmakerTicket {
                ticket: id.to_string(),
            });
        }
        self.call(|reply| Command::Add {
            ticket: Box::new(ticket),
            reply,
        })
        .await?;
        Ok(MatchmakerTicket {
            ticket: id.to_string(),
        })
    }

    /// Validates a party's `party_matchmaker_add` (made by its leader, `leader`) and queues
    /// its ticket: the party is matched as one, each member told as a player would be.
    pub async fn add_party(
        &self,
        leader: Recipient,
        party_id: &str,
        members: Vec<PartyMember>,
        add: MatchmakerAdd,
    ) -> Result<MatchmakerTicket, MatchError> {
        let query = add.query.clone();
        let size = 1 + members.len();
        if size as i32 > add.max_count {
            return Err(MatchError::BadInput(format!(
                "max_count must be at least the party's size ({size})."
            )));
        }
        let presence = leader.presence();
        let session_id = leader.session_id();
        let mut ticket = self.validated(add, Some(leader), presence, session_id)?;
        ticket.party_id = party_id.to_owned();
        ticket.party = members;
        let id = ticket.id;
        if let Some(shared) = &self.shared {
            shared.add(&ticket, query, &self.config).await?;
        } else {
            self.call(|reply| Command::Add {
                ticket: Box::new(ticket),
                reply,
            })
            .await?;
        }
        Ok(MatchmakerTicket {
            ticket: id.to_string(),
        })
    }

    fn ticket(&self, session: &Arc<Session>, add: MatchmakerAdd) -> Result<Ticket, MatchError> {
        self.validated(
            add,
            Some(Recipient::local(session)),
            session.presence(),
            session.session_id,
        )
    }

    fn validated(
        &self,
        add: MatchmakerAdd,
        recipient: Option<Recipient>,
        presence: UserPresence,
        session_id: Uuid,
    ) -> Result<Ticket, MatchError> {
        let c = &self.config;
        let bad = |m: String| Err(MatchError::BadInput(m));
        if add.min_count < 2 {
            return bad("min_count must be at least 2.".into());
        }
        if add.max_count < add.min_count {
            return bad("max_count must be at least min_count.".into());
        }
        if add.max_count as u32 > c.max_count {
            return bad(format!("max_count must be at most {}.", c.max_count));
        }
        if add.query.len() > c.max_query_length {
            return bad(format!(
                "Query is longer than {} bytes.",
                c.max_query_length
            ));
        }
        let properties = add.string_properties.len() + add.numeric_properties.len();
        if properties > c.max_properties {
            return bad(format!(
                "Ticket has {properties} properties; at most {} are allowed.",
                c.max_properties
            ));
        }
        let too_long = |s: &String| s.len() > 128;
        if add
            .string_properties
            .iter()
            .any(|(k, v)| too_long(k) || too_long(v))
            || add.numeric_properties.keys().any(too_long)
        {
            return bad("Property names and values are at most 128 bytes.".into());
        }
        if add.numeric_properties.values().any(|v| !v.is_finite()) {
            return bad("Numeric properties must be finite numbers.".into());
        }
        let query = Query::parse(&add.query)
            .map_err(|e| MatchError::BadInput(format!("Bad query: {e}.")))?;
        Ok(Ticket {
            id: Uuid::new_v4(),
            recipient,
            presence,
            session_id,
            party_id: String::new(),
            party: Vec::new(),
            query,
            min_count: add.min_count as u32,
            max_count: add.max_count as u32,
            strings: add.string_properties,
            numbers: add.numeric_properties,
            intervals: 0,
        })
    }

    /// `matchmaker_remove`: only the session that added a ticket may remove it.
    pub async fn remove(&self, session: Uuid, ticket: &str) -> Result<(), MatchError> {
        let ticket = Uuid::try_parse(ticket)
            .map_err(|_| MatchError::BadInput("Matchmaker ticket not found.".into()))?;
        if let Some(shared) = &self.shared {
            return shared.remove(session, ticket).await;
        }
        self.call(|reply| Command::Remove {
            session,
            ticket,
            reply,
        })
        .await
    }

    /// Drops every ticket of a closed session.
    pub fn session_closed(&self, session: Uuid) {
        if let Some(shared) = &self.shared {
            shared.session_closed(session);
            return;
        }
        let command = Command::SessionClosed { session };
        if let Err(mpsc::error::TrySendError::Full(command)) = self.commands.try_send(command) {
            let commands = self.commands.clone();
            tokio::spawn(async move {
                let _ = commands.send(command).await;
            });
        }
    }

    /// The cluster's tickets, when they are shared.
    pub fn shared(&self) -> Option<&SharedTickets> {
        self.shared.as_ref()
    }

    async fn call(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), MatchError>>) -> Command,
    ) -> Result<(), MatchError> {
        let (reply, answer) = oneshot::channel();
        let busy = || MatchError::BadInput("Matchmaker is busy; try again.".into());
        self.commands.try_send(make(reply)).map_err(|_| busy())?;
        answer.await.map_err(|_| busy())?
    }
}

/// The tickets, owned by the matchmaker task.
#[derive(Default)]
pub struct Pool {
    tickets: Vec<Ticket>,
    per_session: HashMap<Uuid, usize>,
    /// Tickets per user id (as the presence names it), all their sessions together.
    per_user: HashMap<String, usize>,
}

/// A group the pass formed: indices into the pool's tickets.
type Group = Vec<usize>;

impl Pool {
    pub fn len(&self) -> usize {
        self.tickets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty()
    }

    pub fn add(&mut self, ticket: Ticket, config: &MatchmakerConfig) -> Result<(), MatchError> {
        if self.tickets.len() >= config.max_tickets {
            return Err(MatchError::BadInput(
                "Matchmaker is full; try again later.".into(),
            ));
        }
        let count = self
            .per_session
            .get(&ticket.session_id)
            .copied()
            .unwrap_or(0);
        if count >= config.max_tickets_per_session {
            return Err(MatchError::BadInput(format!(
                "At most {} matchmaker tickets per connection.",
                config.max_tickets_per_session
            )));
        }
        let user = ticket.presence.user_id.clone();
        if self.per_user.get(&user).copied().unwrap_or(0) >= config.max_tickets_per_user {
            return Err(MatchError::BadInput(format!(
                "At most {} matchmaker tickets per user.",
                config.max_tickets_per_user
            )));
        }
        *self.per_session.entry(ticket.session_id).or_insert(0) += 1;
        *self.per_user.entry(user).or_insert(0) += 1;
        self.tickets.push(ticket);
        Ok(())
    }

    pub fn remove(&mut self, session: Uuid, ticket: Uuid) -> bool {
        let Some(i) = self
            .tickets
            .iter()
            .position(|t| t.id == ticket && t.session_id == session)
        else {
            return false;
        };
        let removed = self.tickets.remove(i);
        self.forget(&removed);
        true
    }

    pub fn remove_session(&mut self, session: Uuid) -> usize {
        let (gone, kept): (Vec<Ticket>, Vec<Ticket>) = std::mem::take(&mut self.tickets)
            .into_iter()
            .partition(|t| t.session_id == session);
        self.tickets = kept;
        for ticket in &gone {
            self.forget(ticket);
        }
        gone.len()
    }

    /// Takes `ticket` off its session's and its user's counts.
    fn forget(&mut self, ticket: &Ticket) {
        fn less<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
            if let Some(count) = counts.get_mut(key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    counts.remove(key);
                }
            }
        }
        less(&mut self.per_session, &ticket.session_id);
        less(&mut self.per_user, &ticket.presence.user_id);
    }

    /// One pass: forms every group it can, removes their tickets and returns them.
    pub fn pass(&mut self, config: &MatchmakerConfig) -> Vec<Vec<Ticket>> {
        let groups = self.find_groups(config);
        let mut taken = vec![false; self.tickets.len()];
        for group in &groups {
            for &i in group {
                taken[i] = true;
            }
        }
        let mut slots: Vec<Option<Ticket>> = std::mem::take(&mut self.tickets)
            .into_iter()
            .map(Some)
            .collect();
        let formed: Vec<Vec<Ticket>> = groups
            .iter()
            .map(|g| g.iter().filter_map(|&i| slots[i].take()).collect())
            .collect();
        for ticket in slots.into_iter().flatten() {
            let mut ticket = ticket;
            ticket.intervals = ticket.intervals.saturating_add(1);
            self.tickets.push(ticket);
        }
        for group in &formed {
            for ticket in group {
                self.forget(ticket);
            }
        }
        formed
    }

    fn find_groups(&self, config: &MatchmakerConfig) -> Vec<Group> {
        let tickets = &self.tickets;
        let mut index: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, t) in tickets.iter().enumerate() {
            for (k, v) in &t.strings {
                index.entry((k.as_str(), v.as_str())).or_default().push(i);
            }
        }
        let all: Vec<usize> = (0..tickets.len()).collect();
        let mut matched = vec![false; tickets.len()];
        let mut groups = Vec::new();
        let mut group: Group = Vec::new();
        for (i, active) in tickets.iter().enumerate() {
            if matched[i] {
                continue;
            }
            // The smallest list that every acceptable ticket must be on.
            let mut candidates: &[usize] = &all;
            for (k, v) in active.query.required_strings() {
                let list = index.get(&(k, v)).map_or(&[][..], Vec::as_slice);
                if list.len() < candidates.len() {
                    candidates = list;
                }
            }
            // Start just after the active ticket, then wrap around.
            let split = candidates.partition_point(|&c| c <= i);
            let ordered = candidates[split..].iter().chain(&candidates[..split]);
            group.clear();
            group.push(i);
            // Players, not tickets: a party's ticket brings all of its members.
            let mut size = active.size();
            let mut max_size = active.max_count;
            let mut min_size = active.min_count;
            for &c in ordered.take(config.max_candidates) {
                if c == i || matched[c] {
                    continue;
                }
                let candidate = &tickets[c];
                let new_max = max_size.min(candidate.max_count);
                let new_min = min_size.max(candidate.min_count);
                if size + candidate.size() > new_max || new_min > new_max {
                    continue;
                }
                let compatible = group.iter().all(|&m| {
                    let member = &tickets[m];
                    member.session_id != candidate.session_id
                        && member.query.matches(&candidate.strings, &candidate.numbers)
                        && candidate.query.matches(&member.strings, &member.numbers)
                });
                if !compatible {
                    continue;
                }
                group.push(c);
                size += candidate.size();
                max_size = new_max;
                min_size = new_min;
                if size == max_size {
                    break;
                }
            }
            let full = size == max_size;
            let enough = size >= min_size && active.intervals >= config.max_intervals;
            if size >= 2 && (full || enough) {
                for &m in &group {
                    matched[m] = true;
                }
                groups.push(group.clone());
            }
        }
        groups
    }
}

/// The matchmaker task: commands as they come, a pass every `matchmaker.interval_ms`.
pub async fn run(matches: Arc<Matches>) {
    if matches.matchmaker.shared.is_some() {
        return super::shared_matchmaker::run(matches).await;
    }
    let Some(mut commands) = matches.matchmaker.receiver.lock().take() else {
        return;
    };
    let config = matches.matchmaker_config.clone();
    let metrics = matches.metrics.clone();
    let mut pool = Pool::default();
    let mut every = tokio::time::interval(Duration::from_millis(config.interval_ms));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = matches.shutdown.cancelled() => return,
            command = commands.recv() => match command {
                None => return,
                Some(Command::Add { ticket, reply }) => {
                    let result = pool.add(*ticket, &config);
                    let _ = reply.send(result);
                }
                Some(Command::Remove { session, ticket, reply }) => {
                    let result = if pool.remove(session, ticket) {
                        Ok(())
                    } else {
                        Err(MatchError::BadInput("Matchmaker ticket not found.".into()))
                    };
                    let _ = reply.send(result);
                }
                Some(Command::SessionClosed { session }) => {
                    pool.remove_session(session);
                }
            },
            _ = every.tick() => {
                if pool.is_empty() {
                    continue;
                }
                let started = Instant::now();
                let groups = pool.pass(&config);
                metrics.matchmaker_pass.observe(started.elapsed().as_secs_f64());
                for group in groups {
                    announce(&matches, group);
                }
            }
        }
        metrics.matchmaker_tickets.set(pool.len() as i64);
    }
}

/// Server code told of every group the matchmaker forms, before its players are.
#[async_trait::async_trait]
pub trait MatchedHook: Send + Sync + 'static {
    /// The id of the match the group is to join (one the hook made, e.g. with
    /// `nk.matchCreate`), or `None` for the matchmaker's own choice; an error drops the group.
    async fn matched(&self, users: Vec<MatchmakerUser>) -> Result<Option<String>, String>;
}

/// Makes the group's match and tells each player how to join it; with a [`MatchedHook`], once
/// the hook has answered.
pub(super) fn announce(matches: &Arc<Matches>, group: Vec<Ticket>) {
    let Some(hook) = matches.matched_hook().cloned() else {
        if let Some(id) = default_match(matches, &group) {
            deliver(matches, id, None, &group);
        }
        return;
    };
    let matches = matches.clone();
    tokio::spawn(async move {
        let users = users_of(&group);
        // A match the hook names is announced by its id, as Nakama does; the matchmaker's own
        // by a join token.
        let chosen = match hook.matched(users).await {
            Ok(Some(text)) => match MatchId::parse(&text, matches.node()) {
                Ok(id) => Some((id, Some(text))),
                Err(error) => {
                    tracing::warn!(%error, "the matchmaker matched hook named no match of this node; the group is dropped");
                    None
                }
            },
            Ok(None) => default_match(&matches, &group).map(|id| (id, None)),
            Err(error) => {
                tracing::warn!(%error, "the matchmaker matched hook failed; the group is dropped");
                None
            }
        };
        if let Some((id, named)) = chosen {
            deliver(&matches, id, named, &group);
        }
    });
}

/// Every player of the group, each with the ticket that brought them and where to tell them,
/// as the matched message lists them.
fn players_of(group: &[Ticket]) -> Vec<(&Ticket, Option<&Recipient>, MatchmakerUser)> {
    group
        .iter()
        .flat_map(|t| {
            let user = |presence: &UserPresence| MatchmakerUser {
                presence: Some(presence.clone()),
                party_id: t.party_id.clone(),
                string_properties: t.strings.clone(),
                numeric_properties: t.numbers.clone(),
            };
            std::iter::once((t, t.recipient.as_ref(), user(&t.presence))).chain(
                t.party
                    .iter()
                    .map(move |m| (t, m.recipient.as_ref(), user(&m.presence))),
            )
        })
        .collect()
}

/// Every player of the group as the matched message lists them.
fn users_of(group: &[Ticket]) -> Vec<MatchmakerUser> {
    players_of(group).into_iter().map(|(_, _, u)| u).collect()
}

/// The match the matchmaker makes for a group itself: relayed, or of
/// `matchmaker.match_handler`.
fn default_match(matches: &Matches, group: &[Ticket]) -> Option<MatchId> {
    let handler = &matches.matchmaker_config.match_handler;
    let id = if handler.is_empty() {
        // Relayed: created by the first player who joins with a token, on the node of the
        // group's first player (in a cluster; here otherwise).
        let owner = group
            .first()
            .and_then(|t| t.recipient.as_ref())
            .and_then(Recipient::node)
            .unwrap_or(matches.node());
        MatchId::new_relayed(owner)
    } else {
        let params = MatchParams {
            capacity: group.iter().map(|t| t.size() as usize).sum(),
            expected: group
                .iter()
                .flat_map(|t| {
                    std::iter::once(t.presence.clone())
                        .chain(t.party.iter().map(|m| m.presence.clone()))
                })
                .collect(),
            ..Default::default()
        };
        match matches.create_authoritative(handler, params, None) {
            Ok(handle) => handle.id,
            Err(error) => {
                tracing::warn!(%error, "matchmaker could not create a match; the group is dropped");
                return None;
            }
        }
    };
    Some(id)
}

/// Tells each player of the group how to join match `id`: by `named`, the id a matched hook
/// gave, or else by a join token of their own.
fn deliver(matches: &Matches, id: MatchId, named: Option<String>, group: &[Ticket]) {
    let players = players_of(group);
    let users: Vec<MatchmakerUser> = players.iter().map(|(_, _, u)| u.clone()).collect();
    matches
        .metrics
        .matchmaker_matched
        .inc_by(players.len() as u64);
    let pass_secs = matches.matchmaker_config.interval_ms as f64 / 1000.0;
    for ticket in group {
        matches
            .metrics
            .matchmaker_wait
            .observe(f64::from(ticket.intervals) * pass_secs);
    }
    for (ticket, recipient, me) in &players {
        let Some(recipient) = recipient else {
            continue;
        };
        let how = match &named {
            Some(text) => matchmaker_matched::Id::MatchId(text.clone()),
            None => {
                let username = me.presence.as_ref().map_or("", |p| p.username.as_str());
                let (token, _) = matches.tokens.issue(id, recipient.user_id(), username);
                matchmaker_matched::Id::Token(token)
            }
        };
        let message = MatchmakerMatched {
            ticket: ticket.id.to_string(),
            id: Some(how),
            users: users.clone(),
            self_user: Some(me.clone()),
        };
        recipient.deliver(&Encoded::new(Envelope::new(
            "",
            Message::MatchmakerMatched(message),
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(n: u128, query: &str, min: u32, max: u32, region: &str, skill: f64) -> Ticket {
        let session_id = Uuid::from_u128(n);
        Ticket {
            id: Uuid::from_u128(1_000_000 + n),
            recipient: None,
            presence: UserPresence {
                session_id: session_id.to_string(),
                // A user of its own per session.
                user_id: session_id.to_string(),
                ..Default::default()
            },
            session_id,
            party_id: String::new(),
            party: Vec::new(),
            query: Query::parse(query).expect("query"),
            min_count: min,
            max_count: max,
            strings: [("region".to_string(), region.to_string())].into(),
            numbers: [("skill".to_string(), skill)].into(),
            intervals: 0,
        }
    }

    #[test]
    fn a_party_ticket_counts_its_members() {
        let mut pool = Pool::default();
        let config = MatchmakerConfig::default();
        let mut party = ticket(1, "*", 3, 3, "eu", 1.0);
        party.party = vec![PartyMember {
            recipient: None,
            presence: UserPresence::default(),
        }];
        pool.add(party, &config).expect("party");
        pool.add(ticket(2, "*", 3, 3, "eu", 1.0), &config)
            .expect("solo");
        let groups = pool.pass(&config);
        assert_eq!(groups.len(), 1, "two tickets, three players: one group");
        assert_eq!(groups[0].iter().map(Ticket::size).sum::<u32>(), 3);
        let mut pool = Pool::default();
        for n in 10..13 {
            pool.add(ticket(n, "*", 3, 3, "eu", 1.0), &config)
                .expect("solo");
        }
        let mut party = ticket(20, "*", 3, 3, "eu", 1.0);
        party.party = vec![PartyMember {
            recipient: None,
            presence: UserPresence::default(),
        }];
        pool.add(party, &config).expect("party");
        let groups = pool.pass(&config);
        assert!(
            groups
                .iter()
                .all(|g| g.iter().map(Ticket::size).sum::<u32>() == 3),
            "no group past its max_count in players"
        );
    }

    fn sessions(group: &[Ticket]) -> Vec<u128> {
        let mut s: Vec<u128> = group.iter().map(|t| t.session_id.as_u128()).collect();
        s.sort();
        s
    }

    #[test]
    fn pairs_compatible_tickets_and_not_others() {
        let config = MatchmakerConfig::default();
        let mut pool = Pool::default();
        pool.add(
            ticket(1, "+properties.region:eu", 2, 2, "eu", 10.0),
            &config,
        )
        .expect("add");
        pool.add(
            ticket(2, "+properties.region:us", 2, 2, "us", 10.0),
            &config,
        )
        .expect("add");
        pool.add(
            ticket(
                3,
                "+properties.region:eu -properties.skill:>50",
                2,
                2,
                "eu",
                60.0,
            ),
            &config,
        )
        .expect("add");
        pool.add(ticket(4, "*", 2, 2, "eu", 20.0), &config)
            .expect("add");
        pool.add(
            ticket(5, "+properties.region:us", 2, 2, "us", 99.0),
            &config,
        )
        .expect("add");
        let groups = pool.pass(&config);
        let mut found: Vec<Vec<u128>> = groups.iter().map(|g| sessions(g)).collect();
        found.sort();
        // 3 rejects 1 (skill 60 > 50 is excluded by 3's own query? no: 3 excludes partners with
        // skill > 50; 1 has 10, so 1 and 3 are compatible) — 1 pairs first with the oldest fit.
        assert_eq!(found, vec![vec![1, 3], vec![2, 5]]);
        assert_eq!(pool.len(), 1, "ticket 4 waits");
        // 4 accepts anyone but 3's query rejects nobody... 4 is alone now: no group of one.
        assert!(pool.pass(&config).is_empty());
    }

    #[test]
    fn mutual_queries_and_min_count_after_waiting() {
        let config = MatchmakerConfig {
            max_intervals: 1,
            ..Default::default()
        };
        let mut pool = Pool::default();
        // a wants skill >= 50, b has 10: no match either way.
        pool.add(
            ticket(1, "+properties.skill:>=50", 2, 4, "eu", 60.0),
            &config,
        )
        .expect("add");
        pool.add(ticket(2, "*", 2, 4, "eu", 10.0), &config)
            .expect("add");
        pool.add(ticket(3, "*", 2, 4, "eu", 70.0), &config)
            .expect("add");
        // First pass: 1+3 (and 2 with 3?) could form 2-player groups, but max is 4: wait.
        assert!(pool.pass(&config).is_empty());
        // Second pass: waited max_intervals, accept min_count.
        let groups = pool.pass(&config);
        assert_eq!(groups.len(), 1);
        assert_eq!(sessions(&groups[0]), vec![1, 3]);
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn limits_per_session_and_pool() {
        let config = MatchmakerConfig {
            max_tickets: 3,
            max_tickets_per_session: 2,
            ..Default::default()
        };
        let mut pool = Pool::default();
        pool.add(ticket(1, "*", 2, 2, "eu", 0.0), &config)
            .expect("first");
        let mut second = ticket(1, "*", 2, 2, "eu", 0.0);
        second.id = Uuid::new_v4();
        pool.add(second, &config).expect("second");
        let mut third = ticket(1, "*", 2, 2, "eu", 0.0);
        third.id = Uuid::new_v4();
        assert!(pool.add(third, &config).is_err(), "per session");
        pool.add(ticket(2, "*", 2, 2, "eu", 0.0), &config)
            .expect("other session");
        assert!(
            pool.add(ticket(3, "*", 2, 2, "eu", 0.0), &config).is_err(),
            "pool full"
        );
        // Two tickets of one session never match each other.
        assert!(pool.remove(Uuid::from_u128(2), Uuid::from_u128(1_000_002)));
        // One user's sessions together are held to max_tickets_per_user.
        let config = MatchmakerConfig {
            max_tickets_per_user: 2,
            ..config
        };
        let mut users = Pool::default();
        for session in 10..13u128 {
            let mut t = ticket(session, "*", 2, 2, "eu", 0.0);
            t.presence.user_id = "the-same-user".into();
            let added = users.add(t, &config);
            assert_eq!(added.is_ok(), session < 12, "session {session}");
        }
        assert_eq!(users.remove_session(Uuid::from_u128(10)), 1);
        let mut again = ticket(13, "*", 2, 2, "eu", 0.0);
        again.presence.user_id = "the-same-user".into();
        users.add(again, &config).expect("a place was given back");
        assert!(pool.pass(&config).is_empty());
        assert_eq!(pool.remove_session(Uuid::from_u128(1)), 2);
        assert!(pool.is_empty());
    }

    /// Prints the cost of one pass (2-player `*` queries, and queries bucketed by 16 regions)
    /// over 10,000 tickets, or over `PASS_COST_TICKETS` (bench/matchmaker.sh runs it in release
    /// mode with 100,000). Asserts only correctness; the figure goes in bench/RESULTS.md.
    #[test]
    fn pass_cost() {
        let n: u128 = std::env::var("PASS_COST_TICKETS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let config = MatchmakerConfig {
            max_tickets: n as usize,
            ..Default::default()
        };
        for (label, regions) in [("star", 1u128), ("16 regions", 16)] {
            let mut pool = Pool::default();
            for i in 0..n {
                let region = format!("r{}", i % regions);
                let query = if regions == 1 {
                    "*".to_string()
                } else {
                    format!("+properties.region:{region}")
                };
                pool.add(ticket(i, &query, 2, 2, &region, (i % 100) as f64), &config)
                    .expect("add");
            }
            let started = Instant::now();
            let groups = pool.pass(&config);
            let took = started.elapsed();
            let expected: u128 = (0..regions)
                .map(|r| (n / regions + u128::from(r < n % regions)) / 2)
                .sum();
            assert_eq!(groups.len() as u128, expected, "{label}: everyone paired");
            eprintln!(
                "{{\"bench\":\"matchmaker_pass\",\"tickets\":{n},\"queries\":\"{label}\",\"pass_ms\":{:.3},\"ns_per_ticket\":{:.0}}}",
                took.as_secs_f64() * 1e3,
                took.as_nanos() as f64 / n as f64
            );
        }
    }

    #[test]
    fn add_validates_limits() {
        let mm = Matchmaker::new(MatchmakerConfig::default(), None);
        let registry = Arc::new(crate::session::registry::SessionRegistry::new(Arc::new(
            crate::base::metrics::Metrics::new(),
        )));
        let guard = registry.register(
            registry.admit(0).expect("no limit"),
            Uuid::new_v4(),
            "u",
            crate::session::Format::Json,
            8,
        );
        let base = MatchmakerAdd {
            min_count: 2,
            max_count: 2,
            query: "*".into(),
            ..Default::default()
        };
        assert!(mm.ticket(&guard.entry, base.clone()).is_ok());
        for bad in [
            MatchmakerAdd {
                min_count: 1,
                ..base.clone()
            },
            MatchmakerAdd {
                max_count: 1,
                ..base.clone()
            },
            MatchmakerAdd {
                max_count: 1000,
                ..base.clone()
            },
            MatchmakerAdd {
                query: "x".repeat(600),
                ..base.clone()
            },
            MatchmakerAdd {
                query: "region:eu".into(),
                ..base.clone()
            },
            MatchmakerAdd {
                string_properties: (0..20).map(|i| (i.to_string(), "v".into())).collect(),
                ..base.clone()
            },
            MatchmakerAdd {
                numeric_properties: [("x".to_string(), f64::NAN)].into(),
                ..base.clone()
            },
        ] {
            assert!(matches!(
                mm.ticket(&guard.entry, bad),
                Err(MatchError::BadInput(_))
            ));
        }
    }
}
