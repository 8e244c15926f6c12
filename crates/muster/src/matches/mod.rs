//! Matches, the matchmaker and rooms.
//!
//! - `relayed`: matches whose members' data the server only forwards;
//! - `authoritative` + [`handler`]: matches whose logic the server runs, one task per match,
//!   with the built-in example game in `games`;
//! - `registry`: match ids → matches, and each session's memberships;
//! - `matchmaker` + `query`: tickets grouped into matches on an interval;
//! - [`join_tokens`]: signed, expiring, single-use join tokens (matchmaker tokens, room tickets);
//! - `remote`: in a cluster, joins, data and leaves of sessions on other nodes.
//!
//! [`Matches`] is the service the realtime dispatcher, the rooms API and the TCP transport call.

pub mod config;
pub(crate) mod postgres;
pub mod store;

pub(crate) mod authoritative;
pub(crate) mod error;
pub(crate) mod games;
pub mod handler;
pub mod id;
pub mod join_tokens;
pub(crate) mod listing;
pub(crate) mod matchmaker;
pub(crate) mod member;
pub mod metrics;
pub(crate) mod operate;
pub(crate) mod query;
pub(crate) mod registry;
pub(crate) mod relayed;
pub(crate) mod remote;
pub(crate) mod room_book;
pub(crate) mod shared_matchmaker;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use muster_proto::realtime::{
    match_join, Match, MatchCreate, MatchDataSend, MatchJoin, MatchLeave, Message,
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::authoritative::{ActorEnv, AuthoritativeHandle, InputRefused, RoomMeta};
use self::error::MatchError;
use self::handler::{Handlers, Input, MatchParams};
use self::id::MatchId;
use self::join_tokens::JoinTokens;
use self::matchmaker::Matchmaker;
use self::metrics::MatchMetrics;
use self::registry::{Bucket, MatchRef, MatchRegistry, Member, RemoteMatch};
use self::relayed::RelayedMatch;
use self::remote::MatchLink;
use self::shared_matchmaker::SharedTickets;
use crate::cluster::bus::Bus;
use crate::cluster::membership::{Departure, MembershipObserver};
use crate::matches::config::{MatchesConfig, MatchmakerConfig};
use crate::matches::store::MatchmakerStore;
use crate::session::registry::SessionObserver;
use crate::session::{Answer, Session};
use crate::store::SecretStore;

/// The matches service: one per server, shared by every socket and request.
pub struct Matches {
    pub config: MatchesConfig,
    pub matchmaker_config: MatchmakerConfig,
    pub registry: Arc<MatchRegistry>,
    /// This node's built-in rooms, in order, and what each player has open.
    pub rooms: Arc<room_book::RoomBook>,
    /// The match handlers by name: Muster's, the studio's Rust ones, and a module's (registered
    /// once the module is loaded, [`Matches::register_handler`]).
    handlers: parking_lot::RwLock<Handlers>,
    pub tokens: Arc<JoinTokens>,
    pub metrics: Arc<MatchMetrics>,
    pub matchmaker: Matchmaker,
    /// In a cluster: the matches of the other nodes.
    pub link: Option<Arc<MatchLink>>,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// Server code told of every group the matchmaker forms (a JavaScript module's
    /// `registerMatchmakerMatched`), which may name the match they join.
    matched_hook: OnceLock<Arc<dyn matchmaker::MatchedHook>>,
    /// The rooms service, which answers other nodes' rooms calls for this node's rooms.
    room_answers: OnceLock<Arc<dyn remote::RoomAnswers>>,
    /// Where the native TCP transport listens, once it does.
    tcp_addr: OnceLock<SocketAddr>,
    enet_port: OnceLock<u16>,
    /// This node's HTTP port as players reach it (`cluster.advertise`'s port, else the one it
    /// listens on), for rooms asked about through another node.
    http_port: OnceLock<u16>,
}

/// What the matches service is built from: its sections of the configuration.
pub struct MatchesSetup<'a> {
    pub matches: &'a MatchesConfig,
    pub matchmaker: &'a MatchmakerConfig,
    /// The room book's bounds (`rooms.max_rooms_per_user`, `rooms.creates_per_user_per_minute`).
    pub rooms_per_user: usize,
    pub room_creates_per_user_per_minute: u32,
    /// How long a silent node takes to be taken for dead (`cluster.failure_timeout_ms`): the
    /// shared matchmaker forgets its tickets then.
    pub failure_timeout_ms: u64,
}

/// What a `match_join` names.
pub enum JoinTarget {
    Id(String),
    Token(String),
}

impl Matches {
    /// The matches service; `bus` when this node is part of a cluster (its node name is then
    /// the cluster's, in match ids too), and `shared_tickets` when the cluster shares a
    /// database its matchmaker can keep its tickets in.
    pub async fn build(
        config: MatchesSetup<'_>,
        secrets: &dyn SecretStore,
        metrics: &crate::base::metrics::Metrics,
        handlers: Handlers,
        bus: Option<&Bus>,
        shared_tickets: Option<Arc<dyn MatchmakerStore>>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Arc<Matches>> {
        let metrics_registry = metrics.registry();
        let metrics = Arc::new(MatchMetrics::register(metrics_registry));
        let tokens = Arc::new(
            JoinTokens::open(
                &config.matches.join_token_key,
                config.matches.join_token_expiry_sec,
                secrets,
                metrics.clone(),
            )
            .await?,
        );
        let mut matches_config = config.matches.clone();
        let link = match bus {
            Some(bus) => {
                matches_config.node_name = bus.node().to_string();
                Some(Arc::new(MatchLink::open(bus.clone()).await?))
            }
            None => None,
        };
        Ok(Arc::new(Matches {
            config: matches_config,
            matchmaker_config: config.matchmaker.clone(),
            registry: Arc::new(MatchRegistry::default()),
            rooms: Arc::new(room_book::RoomBook::new(
                config.rooms_per_user,
                config.room_creates_per_user_per_minute,
            )),
            handlers: parking_lot::RwLock::new(handlers),
            tokens,
            matchmaker: Matchmaker::new(
                config.matchmaker.clone(),
                bus.zip(shared_tickets).map(|(bus, store)| {
                    SharedTickets::new(
                        store,
                        bus.clone(),
                        config.failure_timeout_ms,
                        config.matchmaker,
                    )
                }),
            ),
            link,
            metrics,
            shutdown,
            matched_hook: OnceLock::new(),
            room_answers: OnceLock::new(),
            tcp_addr: OnceLock::new(),
            enet_port: OnceLock::new(),
            http_port: OnceLock::new(),
        }))
    }

    /// Starts the background tasks: the matchmaker's passes and periodic pruning.
    pub fn start(self: &Arc<Self>) {
        tokio::spawn(matchmaker::run(self.clone()));
        remote::serve(self.clone());
        let matches = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(10));
            loop {
                tokio::select! {
                    () = matches.shutdown.cancelled() => return,
                    _ = every.tick() => {
                        matches.tokens.prune();
                        matches.registry.prune();
                        matches.rooms.prune();
                    }
                }
            }
        });
    }

    pub fn set_tcp_addr(&self, addr: SocketAddr) {
        let _ = self.tcp_addr.set(addr);
    }

    /// The native TCP transport's address, when it is enabled.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr.get().copied()
    }

    /// Records the port the ENet transport is bound to (`enet.public_port` wins when set).
    pub fn set_enet_port(&self, bound: u16, public: u16) {
        let _ = self.enet_port.set(if public == 0 { bound } else { public });
    }

    /// Records the HTTP port this node listens on (`cluster.advertise`'s port wins when it has one).
    pub fn set_http_port(&self, bound: u16, advertise: &str) {
        let _ = self.http_port.set(
            crate::cluster::config::split_advertise(advertise)
                .1
                .unwrap_or(bound),
        );
    }

    /// This node's HTTP port as players reach it, once it listens.
    pub fn http_port(&self) -> Option<u16> {
        self.http_port.get().copied()
    }

    /// The ENet transport's port as clients should use it, when it is enabled.
    pub fn enet_port(&self) -> Option<u16> {
        self.enet_port.get().copied()
    }

    fn actor_env(&self) -> ActorEnv {
        ActorEnv {
            registry: self.registry.clone(),
            metrics: self.metrics.clone(),
            empty_timeout: Duration::from_millis(self.config.empty_timeout_ms),
            input_queue_size: self.config.input_queue_size,
            control_queue_size: self.config.control_queue_size,
            shutdown: self.shutdown.clone(),
            rooms: self.rooms.clone(),
        }
    }

    /// Registers (or replaces) the match handler called `name` (a module's, once it is loaded).
    pub fn register_handler<F>(&self, name: &str, factory: F)
    where
        F: Fn() -> Box<dyn handler::MatchHandler> + Send + Sync + 'static,
    {
        self.handlers.write().register(name, factory);
    }

    /// Refuses to go on when `matchmaker.match_handler` names no registered handler (checked
    /// once every handler is registered).
    pub fn check_match_handler(&self) -> anyhow::Result<()> {
        let handler = &self.matchmaker_config.match_handler;
        let handlers = self.handlers.read();
        if !handler.is_empty() && handlers.get(handler).is_none() {
            anyhow::bail!(
                "matchmaker.match_handler {handler:?} is not a registered match handler (known: {})",
                handlers.names().join(", ")
            );
        }
        Ok(())
    }

    /// Installs what answers other nodes' rooms calls (once: the rooms service).
    pub fn set_room_answers(&self, answers: Arc<dyn remote::RoomAnswers>) {
        let _ = self.room_answers.set(answers);
    }

    /// Answers another node's call about a match or room of this node: a room's to the rooms
    /// service, the rest here.
    pub(crate) async fn answer_room(
        &self,
        ask: remote::RoomAsk,
    ) -> Result<serde_json::Value, MatchError> {
        use remote::RoomAsk::{Connection, Destroy, Info};
        match (&ask, self.room_answers.get()) {
            (Info { .. } | Connection { .. } | Destroy { .. }, Some(rooms)) => {
                rooms.answer(ask).await
            }
            (Info { .. } | Connection { .. } | Destroy { .. }, None) => {
                Err(MatchError::NotFound("Room not found.".into()))
            }
            _ => self.answer_match(ask).await,
        }
    }

    /// Answers another node's call about a match of this node.
    pub(crate) async fn answer_match(
        &self,
        ask: remote::RoomAsk,
    ) -> Result<serde_json::Value, MatchError> {
        use remote::RoomAsk;
        let value = match ask {
            RoomAsk::Inspect { id } => serde_json::to_value(self.inspect(&id).await?),
            RoomAsk::Signal { id, data } => serde_json::to_value(self.signal(&id, data).await?),
            RoomAsk::Kick { id, session } => serde_json::to_value(self.kick(&id, session).await?),
            RoomAsk::ListMatches(ask) => {
                let filter = ask.filter().map_err(MatchError::BadInput)?;
                serde_json::to_value(listing::list(&self.registry, &filter))
            }
            RoomAsk::Info { .. } | RoomAsk::Connection { .. } | RoomAsk::Destroy { .. } => {
                return Err(MatchError::NotFound("Room not found.".into()))
            }
        };
        value.map_err(|e| MatchError::Rejected(format!("Unencodable answer: {e}")))
    }

    /// Installs the hook told of every group the matchmaker forms (once).
    pub fn set_matched_hook(&self, hook: Arc<dyn matchmaker::MatchedHook>) {
        let _ = self.matched_hook.set(hook);
    }

    pub(crate) fn matched_hook(&self) -> Option<&Arc<dyn matchmaker::MatchedHook>> {
        self.matched_hook.get()
    }

    /// This node's name (the cluster's name for it in a cluster).
    pub fn node(&self) -> &str {
        &self.config.node_name
    }

    /// Creates an authoritative match of the handler called `handler` and starts its task.
    pub fn create_authoritative(
        &self,
        handler: &str,
        params: MatchParams,
        room: Option<RoomMeta>,
    ) -> Result<Arc<AuthoritativeHandle>, MatchError> {
        let factory = self.handlers.read().get(handler).ok_or_else(|| {
            MatchError::BadInput(format!(
                "No match handler called '{}' (known: {}).",
                id::shorten(handler),
                self.handlers.read().names().join(", ")
            ))
        })?;
        let id = MatchId::new_authoritative(self.node());
        let params = MatchParams {
            default_tick_rate_hz: self.config.tick_rate_hz,
            match_id: id.display(self.node()),
            ..params
        };
        let is_room = room.is_some();
        let (handle, actor) = authoritative::create(
            self.actor_env(),
            id,
            id.display(self.node()),
            handler,
            factory(),
            &params,
            room,
        );
        self.registry.insert(
            MatchRef::Authoritative(handle.clone()),
            self.config.max_matches,
        )?;
        self.metrics
            .matches
            .with_label_values(&["authoritative"])
            .inc();
        if is_room {
            self.metrics.rooms.inc();
            self.rooms.add(&handle.handler, &handle.id_text);
        }
        tokio::spawn(actor.run());
        Ok(handle)
    }

    /// The authoritative match `match_id` when it runs on this node.
    pub fn authoritative_here(
        &self,
        match_id: &str,
    ) -> Result<Arc<AuthoritativeHandle>, MatchError> {
        let id = MatchId::parse(match_id, self.node())?;
        match self.registry.get(id)? {
            MatchRef::Authoritative(handle) => Ok(handle),
            _ => Err(MatchError::NotFound("Match not found.".into())),
        }
    }

    pub(crate) fn new_relayed(&self, id: MatchId, name: Option<String>) -> Arc<RelayedMatch> {
        self.metrics.matches.with_label_values(&["relayed"]).inc();
        RelayedMatch::new(id, name)
    }

    /// `match_create`: a new relayed match (or, given a name in use, that match), joined.
    pub fn create(
        &self,
        session: &Arc<Session>,
        request: MatchCreate,
    ) -> Result<Match, MatchError> {
        self.check_membership_room(session, None)?;
        let max = self.config.max_matches;
        let relayed = if request.name.is_empty() {
            let created = self.new_relayed(MatchId::new_relayed(self.node()), None);
            self.registry
                .insert(MatchRef::Relayed(created.clone()), max)
                .inspect_err(|_| {
                    self.metrics.matches.with_label_values(&["relayed"]).dec();
                })?;
            created
        } else {
            if request.name.len() > 128 {
                return Err(MatchError::BadInput(
                    "Match name is longer than 128 bytes.".into(),
                ));
            }
            let name = request.name.clone();
            self.registry.named_or_insert(&request.name, max, || {
                self.new_relayed(MatchId::new_relayed(self.node()), Some(name))
            })?
        };
        let mut reply = self.join_relayed(session, &relayed)?;
        // Nakama's `match_create` counts the creator in `size` (a join's answer does not).
        reply.size = relayed.size() as i32;
        Ok(reply)
    }

    fn join_relayed(
        &self,
        session: &Arc<Session>,
        relayed: &Arc<RelayedMatch>,
    ) -> Result<Match, MatchError> {
        let reply = self.admit_relayed(Member::of(session), relayed)?;
        self.registry.add_membership(
            session.session_id,
            MatchRef::Relayed(relayed.clone()),
            Bucket::full(self.config.input_burst),
        );
        Ok(reply)
    }

    fn admit_relayed(&self, member: Member, relayed: &RelayedMatch) -> Result<Match, MatchError> {
        let joined = relayed.join(member, self.config.max_relayed_size)?;
        if joined.new {
            self.metrics.players.inc();
        }
        Ok(joined.reply)
    }

    /// Refuses a join that would put `session` in more than `max_matches_per_session` matches.
    fn check_membership_room(
        &self,
        session: &Session,
        joining: Option<MatchId>,
    ) -> Result<(), MatchError> {
        let count = self.registry.memberships_of(session.session_id);
        let already = joining.is_some_and(|id| self.registry.member_of(session.session_id, id));
        if !already && count >= self.config.max_matches_per_session {
            return Err(MatchError::BadInput(format!(
                "Already in {count} matches, the most one connection may be in."
            )));
        }
        Ok(())
    }

    /// `match_join`, by match id or by join token.
    pub async fn join(
        &self,
        session: &Arc<Session>,
        target: JoinTarget,
        metadata: HashMap<String, String>,
    ) -> Result<Match, MatchError> {
        match target {
            JoinTarget::Id(text) => {
                let (id, _) = MatchId::parse_any(&text)?;
                if let Some(owner) = self.owner_elsewhere(id) {
                    self.check_membership_room(session, Some(id))?;
                    return self.join_remote(session, id, &owner, false, metadata).await;
                }
                let id = MatchId::parse(&text, self.node())?;
                self.check_membership_room(session, Some(id))?;
                let found = self.registry.get(id)?;
                self.join_found(session, found, metadata).await
            }
            JoinTarget::Token(token) => {
                let claims = self.tokens.verify(&token)?;
                if claims.uid != session.user_id {
                    return Err(MatchError::BadInput(
                        "Join token was issued to another user.".into(),
                    ));
                }
                let id = claims.match_id();
                self.check_membership_room(session, Some(id))?;
                self.tokens.consume(&claims)?;
                if let Some(owner) = self.owner_elsewhere(id) {
                    let result = self
                        .join_remote(session, id, &owner, !id.authoritative, metadata)
                        .await;
                    if matches!(result, Err(MatchError::Rejected(_))) {
                        self.tokens.release(&claims);
                    }
                    return result;
                }
                let found = if id.authoritative {
                    self.registry.get(id)
                } else {
                    self.registry
                        .relayed_or_insert(id, self.config.max_matches, || {
                            self.new_relayed(id, None)
                        })
                        .map(MatchRef::Relayed)
                };
                let result = match found {
                    Ok(found) => self.join_found(session, found, metadata).await,
                    Err(e) => Err(e),
                };
                if matches!(result, Err(MatchError::Rejected(_))) {
                    // Full or busy is not the token's fault: it may be tried again.
                    self.tokens.release(&claims);
                }
                result
            }
        }
    }

    async fn join_found(
        &self,
        session: &Arc<Session>,
        found: MatchRef,
        metadata: HashMap<String, String>,
    ) -> Result<Match, MatchError> {
        let reply = self.admit(Member::of(session), &found, metadata).await?;
        // add_membership adds once: a second join of a relayed match changes nothing.
        self.registry.add_membership(
            session.session_id,
            found,
            Bucket::full(self.config.input_burst),
        );
        Ok(reply)
    }

    /// Puts `member` (of this node or another) in `found`, a match of this node.
    pub(crate) async fn admit(
        &self,
        member: Member,
        found: &MatchRef,
        metadata: HashMap<String, String>,
    ) -> Result<Match, MatchError> {
        match found {
            MatchRef::Relayed(relayed) => self.admit_relayed(member, relayed),
            MatchRef::Authoritative(handle) => {
                let limit = Duration::from_millis(self.config.join_timeout_ms);
                handle.join(member, metadata, limit).await
            }
            MatchRef::Remote(_) => Err(MatchError::NotFound("Match not found.".into())),
        }
    }

    /// In a cluster, the other node match `id` lives on.
    fn owner_elsewhere(&self, id: MatchId) -> Option<String> {
        self.link.as_ref().and_then(|link| link.owner_of(id))
    }

    /// Joins `session` to match `id` of node `owner`.
    async fn join_remote(
        &self,
        session: &Arc<Session>,
        id: MatchId,
        owner: &str,
        create: bool,
        metadata: HashMap<String, String>,
    ) -> Result<Match, MatchError> {
        let Some(link) = &self.link else {
            return Err(MatchError::NotFound("Match not found.".into()));
        };
        let limit = Duration::from_millis(self.config.join_timeout_ms);
        let reply = link
            .join(owner, &Member::of(session), id, create, metadata, limit)
            .await?;
        self.registry.add_membership(
            session.session_id,
            MatchRef::Remote(Arc::new(RemoteMatch {
                id,
                owner: owner.to_string(),
            })),
            Bucket::full(self.config.input_burst),
        );
        Ok(reply)
    }

    /// `match_leave`. Leaving a match one is not in is not an error; an unknown match is.
    pub fn leave(&self, session: &Session, match_id: &str) -> Result<(), MatchError> {
        let (id, _) = MatchId::parse_any(match_id)?;
        match self.registry.remove_membership(session.session_id, id) {
            Some(target) => {
                self.leave_target(session.session_id, target);
                Ok(())
            }
            None if self.owner_elsewhere(id).is_some() => Ok(()),
            None => {
                let id = MatchId::parse(match_id, self.node())?;
                self.registry.get(id).map(|_| ())
            }
        }
    }

    pub(crate) fn leave_target(&self, session: Uuid, target: MatchRef) {
        match target {
            MatchRef::Relayed(relayed) => {
                if let Some(now_empty) = relayed.leave(session) {
                    self.metrics.players.dec();
                    if now_empty && self.registry.remove(relayed.id, relayed.name.as_deref()) {
                        self.metrics.matches.with_label_values(&["relayed"]).dec();
                    }
                }
            }
            MatchRef::Authoritative(handle) => handle.leave(session),
            MatchRef::Remote(remote) => {
                if let Some(link) = &self.link {
                    link.leave(&remote.owner, session, remote.id);
                }
            }
        }
    }

    /// `match_data_send`: forwarded to the other members (relayed) or queued for the match's next
    /// tick (authoritative).
    pub fn send(&self, session: &Session, data: MatchDataSend) -> Result<(), MatchError> {
        let (id, _) = MatchId::parse_any(&data.match_id)?;
        if data.data.len() > self.config.max_data_bytes {
            self.metrics
                .inputs_dropped
                .with_label_values(&["size"])
                .inc();
            return Err(MatchError::BadInput(format!(
                "Match data of {} bytes is over the limit of {}.",
                data.data.len(),
                self.config.max_data_bytes
            )));
        }
        let target = self
            .registry
            .member_send(
                session.session_id,
                id,
                self.config.max_inputs_per_sec,
                self.config.input_burst,
            )
            .inspect_err(|_| {
                self.metrics
                    .inputs_dropped
                    .with_label_values(&["rate"])
                    .inc()
            })?;
        let Some(target) = target else {
            self.metrics
                .inputs_dropped
                .with_label_values(&["not_member"])
                .inc();
            let found =
                MatchId::parse(&data.match_id, self.node()).and_then(|id| self.registry.get(id));
            return Err(match found {
                Err(e) if self.owner_elsewhere(id).is_none() => e,
                _ => MatchError::NotFound("Not a member of this match: join it first.".into()),
            });
        };
        match target {
            MatchRef::Relayed(relayed) => {
                relayed.send(
                    session.session_id,
                    data.op_code,
                    data.data,
                    &data.presences,
                    data.reliable,
                );
                Ok(())
            }
            MatchRef::Remote(remote) => {
                if let Some(link) = &self.link {
                    link.send(&remote.owner, session.session_id, &data);
                }
                Ok(())
            }
            MatchRef::Authoritative(handle) => {
                let input = Input {
                    from: session.session_id,
                    op_code: data.op_code,
                    data: data.data,
                    reliable: data.reliable,
                };
                match handle.input(input) {
                    Err(InputRefused::Ended) => {
                        self.registry
                            .remove_membership(session.session_id, handle.id);
                        Err(MatchError::Ended("Match has ended.".into()))
                    }
                    // The match's queue is full: the match is behind, not the player (who is
                    // within its rate). The input is shed and counted, with no error to the
                    // player, as Nakama drops data its match cannot queue.
                    Err(InputRefused::Full) => {
                        self.metrics
                            .inputs_dropped
                            .with_label_values(&["queue_full"])
                            .inc();
                        Ok(())
                    }
                    Ok(()) => Ok(()),
                }
            }
        }
    }

    /// Answers one match or matchmaker request from `session` (the realtime dispatcher's arm).
    /// A refusal is counted here (`muster_match_errors_total{kind}`) and becomes an error
    /// envelope in the dispatcher.
    pub async fn handle(
        &self,
        session: &Arc<Session>,
        message: Message,
    ) -> Result<Answer, MatchError> {
        let result = match message {
            Message::MatchCreate(request) => self
                .create(session, request)
                .map(|m| Answer::Reply(Message::Match(m))),
            Message::MatchJoin(MatchJoin { id, metadata }) => match id {
                Some(match_join::Id::MatchId(id)) => self
                    .join(session, JoinTarget::Id(id), metadata)
                    .await
                    .map(|m| Answer::Reply(Message::Match(m))),
                Some(match_join::Id::Token(token)) => self
                    .join(session, JoinTarget::Token(token), metadata)
                    .await
                    .map(|m| Answer::Reply(Message::Match(m))),
                None => Err(MatchError::BadInput(
                    "match_join needs a match_id or a token.".into(),
                )),
            },
            Message::MatchLeave(MatchLeave { match_id }) => {
                self.leave(session, &match_id).map(|()| Answer::Done)
            }
            // No answer to data, as in Nakama (the client does not wait for one).
            Message::MatchDataSend(data) => self.send(session, data).map(|()| Answer::Silent),
            Message::MatchmakerAdd(add) => self
                .matchmaker
                .add(session, add)
                .await
                .map(|t| Answer::Reply(Message::MatchmakerTicket(t))),
            Message::MatchmakerRemove(remove) => self
                .matchmaker
                .remove(session.session_id, &remove.ticket)
                .await
                .map(|()| Answer::Done),
            other => Err(MatchError::BadInput(format!(
                "'{}' is not a match message",
                other.kind()
            ))),
        };
        if let Err(error) = &result {
            self.metrics
                .errors
                .with_label_values(&[error.label()])
                .inc();
        }
        result
    }
}

/// A session that ends, on any transport, leaves every match and drops every matchmaker ticket.
impl SessionObserver for Matches {
    fn session_closed(&self, session: &Arc<Session>) {
        for target in self.registry.take_memberships(session.session_id) {
            self.leave_target(session.session_id, target);
        }
        self.matchmaker.session_closed(session.session_id);
    }
}

/// A node that leaves the cluster ends its sessions' part in matches here, and this node's
/// sessions' part in its matches.
impl MembershipObserver for Matches {
    fn node_joined(&self, node: &str) {
        if let Some(link) = &self.link {
            link.node_joined(node);
        }
    }

    fn node_left(&self, node: &str, why: Departure) {
        // A restarted node drops its previous run's tickets itself (and keeps its new ones).
        if let (Some(shared), false) = (self.matchmaker.shared(), why == Departure::Restarted) {
            shared.node_left(node);
        }
        let Some(link) = &self.link else { return };
        let (hosted, joined) = link.node_left(node);
        for ((session, _), target) in hosted {
            self.leave_target(session, target);
        }
        for (session, id) in joined {
            self.registry.remove_membership(session, id);
        }
    }
}
