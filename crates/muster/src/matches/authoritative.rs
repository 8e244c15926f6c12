//! Authoritative matches: each one is an actor. One task owns the match's handler and member
//! list, ticks on `tokio::time::interval` at the handler's rate, and reads two bounded inboxes:
//!
//! - `control` (joins, leaves, terminate), which wakes the task at once, so a join is answered
//!   without waiting for a tick;
//! - `inputs` (`match_data_send` from members), which never wakes the task: it is drained at the
//!   start of each tick with `try_recv`, so a player's input costs a queue push, not a task
//!   wake-up, and the handler gets every input since the previous tick exactly once.
//!
//! Nothing is shared between matches but the registry's sharded maps; a match's state has one
//! owner, so it needs no lock at all. An empty match whose handler does not ask to tick when
//! empty sleeps (no timer) until a player joins or `matches.empty_timeout_ms` passes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use muster_proto::realtime::{Envelope, Match, MatchPresenceEvent, Message, UserPresence};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{interval_at, sleep_until, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::error::MatchError;
use super::handler::{Flow, Input, MatchContext, MatchHandler, MatchParams};
use super::id::MatchId;
use super::member::Member;
use super::metrics::MatchMetrics;
use super::registry::MatchRegistry;
use crate::session::fanout::Encoded;

/// Who created a room (an authoritative match made through the rooms API).
#[derive(Debug, Clone)]
pub struct RoomMeta {
    /// The creating user; `None` when a server created it with the admin key.
    pub owner: Option<Uuid>,
    pub created_at_ms: i64,
}

struct JoinRequest {
    member: Member,
    metadata: HashMap<String, String>,
    reply: oneshot::Sender<Result<Match, MatchError>>,
}

/// What the rest of the server holds of an authoritative match: its inboxes and a few figures
/// the match task keeps current.
pub struct AuthoritativeHandle {
    pub id: MatchId,
    pub id_text: String,
    pub handler: String,
    pub capacity: usize,
    pub room: Option<RoomMeta>,
    /// The label and its fields (read once per change, for listings); the handler may change it.
    label: parking_lot::RwLock<Arc<MatchLabel>>,
    control: mpsc::Sender<Control>,
    inputs: mpsc::Sender<Input>,
    size: AtomicUsize,
    tick_rate_hz: AtomicU32,
    /// Cancelled when the match has ended (connections bound to it close).
    pub ended: CancellationToken,
}

/// A match's label as listings read it.
#[derive(Debug, Default)]
pub struct MatchLabel {
    pub text: Option<String>,
    pub fields: super::listing::LabelFields,
}

impl MatchLabel {
    fn of(text: Option<String>) -> Arc<MatchLabel> {
        Arc::new(MatchLabel {
            fields: super::listing::LabelFields::of(text.as_deref()),
            text,
        })
    }
}

struct SignalRequest {
    data: String,
    reply: oneshot::Sender<Result<String, String>>,
}

/// What an operator sees of a match (the console): who is in it and, when its handler can show
/// it, its state.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Inspection {
    pub match_id: String,
    pub handler: String,
    pub authoritative: bool,
    pub label: Option<String>,
    pub size: usize,
    pub tick_rate_hz: u32,
    /// Ticks run so far (0 for a relayed match).
    pub tick: u64,
    pub presences: Vec<UserPresence>,
    /// The handler's state as text (see [`super::handler::MatchHandler::state`]).
    pub state: Option<String>,
}

/// Messages that wake the match task. Small (a join is boxed): the channel allocates its slots
/// in blocks of 32, so the size of this enum is paid 32 times by every match, even an idle room.
enum Control {
    Join(Box<JoinRequest>),
    Leave {
        session: Uuid,
    },
    Signal(Box<SignalRequest>),
    Inspect(oneshot::Sender<Inspection>),
    /// An operator removes a player: answered whether they were in the match.
    Kick(Box<(Uuid, oneshot::Sender<bool>)>),
    Terminate,
}

/// What a match task needs from the server.
#[derive(Clone)]
pub struct ActorEnv {
    pub registry: Arc<MatchRegistry>,
    pub metrics: Arc<MatchMetrics>,
    pub empty_timeout: Duration,
    pub input_queue_size: usize,
    pub control_queue_size: usize,
    /// Cancelled when the server shuts down: every match terminates.
    pub shutdown: CancellationToken,
    /// The book a room leaves when it ends.
    pub rooms: Arc<super::room_book::RoomBook>,
}

/// Why a match ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    HandlerEnded,
    HandlerFailed,
    Terminated,
    Empty,
    Shutdown,
}

impl AuthoritativeHandle {
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    pub fn tick_rate_hz(&self) -> u32 {
        self.tick_rate_hz.load(Ordering::Relaxed)
    }

    /// The label now (the handler may have changed it since the match began).
    pub fn label(&self) -> Option<String> {
        self.label.read().text.clone()
    }

    /// The label and its fields now.
    pub fn label_state(&self) -> Arc<MatchLabel> {
        self.label.read().clone()
    }

    /// Sends the match a signal (Nakama's `matchSignal`): the handler's answer, or its refusal;
    /// waits at most `limit`.
    pub async fn signal(&self, data: String, limit: Duration) -> Result<String, MatchError> {
        let answer = self
            .ask(limit, |reply| {
                Control::Signal(Box::new(SignalRequest { data, reply }))
            })
            .await?;
        answer.map_err(MatchError::Rejected)
    }

    /// Asks the match to take `member`; waits at most `limit` for its answer.
    pub async fn join(
        &self,
        member: Member,
        metadata: HashMap<String, String>,
        limit: Duration,
    ) -> Result<Match, MatchError> {
        self.ask(limit, |reply| {
            Control::Join(Box::new(JoinRequest {
                member,
                metadata,
                reply,
            }))
        })
        .await?
    }

    /// Who is in the match and its state, as the match task answers; waits at most `limit`.
    pub async fn inspect(&self, limit: Duration) -> Result<Inspection, MatchError> {
        self.ask(limit, Control::Inspect).await
    }

    /// Removes the player of `session` as a handler's kick does (the others are told, the
    /// handler's `leave` runs): whether they were in the match; waits at most `limit`.
    pub async fn kick(&self, session: Uuid, limit: Duration) -> Result<bool, MatchError> {
        self.ask(limit, |reply| Control::Kick(Box::new((session, reply))))
            .await
    }

    /// Sends the match task the request `make` builds around a reply channel, and waits at most
    /// `limit` for the answer: refused when the inbox is full or the match has ended.
    async fn ask<T>(
        &self,
        limit: Duration,
        make: impl FnOnce(oneshot::Sender<T>) -> Control,
    ) -> Result<T, MatchError> {
        let (reply, answer) = oneshot::channel();
        self.control
            .try_send(make(reply))
            .map_err(refused_control)?;
        match tokio::time::timeout(limit, answer).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(MatchError::Ended("Match has ended.".into())),
            Err(_) => Err(MatchError::Rejected("Match did not answer in time.".into())),
        }
    }

    /// Tells the match `session` left. Never lost: a full inbox is waited on by a small task.
    pub fn leave(&self, session: Uuid) {
        self.control_reliably(Control::Leave { session });
    }

    /// Ends the match (a room destroyed).
    pub fn terminate(&self) {
        self.control_reliably(Control::Terminate);
    }

    fn control_reliably(&self, message: Control) {
        match self.control.try_send(message) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(message)) => {
                let control = self.control.clone();
                tokio::spawn(async move {
                    let _ = control.send(message).await;
                });
            }
        }
    }

    /// Queues an input for the next tick.
    pub fn input(&self, input: Input) -> Result<(), InputRefused> {
        self.inputs.try_send(input).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => InputRefused::Full,
            mpsc::error::TrySendError::Closed(_) => InputRefused::Ended,
        })
    }
}

/// Why a match did not take an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRefused {
    /// Its queue is full: the match is behind its players.
    Full,
    /// It has ended.
    Ended,
}

/// A control message the match's inbox did not take: busy (full) or over (closed).
fn refused_control(error: mpsc::error::TrySendError<Control>) -> MatchError {
    match error {
        mpsc::error::TrySendError::Full(_) => {
            MatchError::Rejected("Match is busy; try again.".into())
        }
        mpsc::error::TrySendError::Closed(_) => MatchError::Ended("Match has ended.".into()),
    }
}

/// The handler's view of the match, borrowing only the fields it needs (so the handler itself,
/// another field, can be borrowed mutably beside it).
macro_rules! context {
    ($actor:ident) => {
        MatchContext {
            match_id: &$actor.handle.id_text,
            members: &$actor.members,
            tick_rate_hz: $actor.handle.tick_rate_hz(),
            sent: 0,
            kicked: Vec::new(),
            label: None,
        }
    };
}

/// A match task, before it runs.
pub struct Actor {
    handle: Arc<AuthoritativeHandle>,
    handler: Box<dyn MatchHandler>,
    env: ActorEnv,
    control: mpsc::Receiver<Control>,
    inputs: mpsc::Receiver<Input>,
    members: Vec<Member>,
    period: Duration,
    tick_when_empty: bool,
}

/// Makes a match: runs the handler's `init` and returns the handle and the task to spawn.
pub fn create(
    env: ActorEnv,
    id: MatchId,
    id_text: String,
    handler_name: &str,
    mut handler: Box<dyn MatchHandler>,
    params: &MatchParams,
    room: Option<RoomMeta>,
) -> (Arc<AuthoritativeHandle>, Actor) {
    let settings = handler.init(params);
    let rate = settings
        .tick_rate_hz
        .unwrap_or(params.default_tick_rate_hz)
        .clamp(1, 1000);
    let (control_tx, control_rx) = mpsc::channel(env.control_queue_size.max(1));
    let (input_tx, input_rx) = mpsc::channel(env.input_queue_size.max(1));
    let handle = Arc::new(AuthoritativeHandle {
        id,
        id_text,
        handler: handler_name.to_owned(),
        capacity: params.capacity,
        room,
        label: parking_lot::RwLock::new(MatchLabel::of(settings.label)),
        control: control_tx,
        inputs: input_tx,
        size: AtomicUsize::new(0),
        tick_rate_hz: AtomicU32::new(rate),
        ended: CancellationToken::new(),
    });
    let actor = Actor {
        handle: handle.clone(),
        handler,
        env,
        control: control_rx,
        inputs: input_rx,
        members: Vec::with_capacity(params.capacity.min(16)),
        period: Duration::from_secs_f64(1.0 / f64::from(rate)),
        tick_when_empty: settings.tick_when_empty,
    };
    (handle, actor)
}

impl Actor {
    /// Runs the match until it ends; returns why.
    pub async fn run(mut self) -> Ending {
        let start = Instant::now();
        let mut ticks = interval_at(start + self.period, self.period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut tick: u64 = 0;
        let mut was_ticking = self.tick_when_empty;
        let mut empty_since = Some(start);
        let mut batch: Vec<Input> = Vec::new();
        let late_after = self.period / 2;
        let metrics = self.env.metrics.clone();
        let ending = loop {
            let ticking = self.tick_when_empty || !self.members.is_empty();
            if ticking && !was_ticking {
                // Waking from an empty sleep: tick one period from now, not in a burst.
                ticks.reset();
            }
            was_ticking = ticking;
            let empty_deadline = empty_since.map(|t| t + self.env.empty_timeout);
            tokio::select! {
                biased;
                () = self.env.shutdown.cancelled() => break Ending::Shutdown,
                message = self.control.recv() => match message {
                    None | Some(Control::Terminate) => break Ending::Terminated,
                    Some(Control::Join(request)) => {
                        let JoinRequest { member, metadata, reply } = *request;
                        if self.join(member, &metadata, reply) {
                            empty_since = None;
                        }
                    }
                    Some(Control::Leave { session }) => {
                        if self.leave(session) && self.members.is_empty() {
                            empty_since = Some(Instant::now());
                        }
                    }
                    Some(Control::Signal(request)) => {
                        let mut ctx = context!(self);
                        let answer = self.handler.signal(&mut ctx, &request.data);
                        let (kicked, label) = (std::mem::take(&mut ctx.kicked), ctx.label.take());
                        let _ = request.reply.send(answer);
                        self.carry_out(kicked, label);
                        if self.members.is_empty() && empty_since.is_none() {
                            empty_since = Some(Instant::now());
                        }
                    }
                    Some(Control::Inspect(reply)) => {
                        let _ = reply.send(self.inspection(tick));
                    }
                    Some(Control::Kick(kick)) => {
                        let (session, reply) = *kick;
                        let member = self
                            .members
                            .iter()
                            .any(|m| m.recipient.session_id() == session);
                        self.carry_out(vec![session], None);
                        let _ = reply.send(member);
                        if self.members.is_empty() && empty_since.is_none() {
                            empty_since = Some(Instant::now());
                        }
                    }
                },
                scheduled = ticks.tick(), if ticking => {
                    let began = Instant::now();
                    let lateness = began.saturating_duration_since(scheduled);
                    metrics.tick_lateness.observe(lateness.as_secs_f64());
                    if lateness > late_after {
                        metrics.late_ticks.inc();
                    }
                    tick += 1;
                    let flow = self.tick(tick, &mut batch);
                    if self.members.is_empty() && empty_since.is_none() {
                        // The handler kicked everyone.
                        empty_since = Some(Instant::now());
                    }
                    metrics.ticks.inc();
                    metrics.tick_duration.observe(began.elapsed().as_secs_f64());
                    match flow {
                        Flow::Continue => {}
                        Flow::End => break Ending::HandlerEnded,
                        Flow::Failed => break Ending::HandlerFailed,
                    }
                }
                () = sleep_until(empty_deadline.unwrap_or(start)), if empty_deadline.is_some() => {
                    break Ending::Empty;
                }
            }
        };
        self.finish(ending);
        ending
    }

    fn tick(&mut self, tick: u64, batch: &mut Vec<Input>) -> Flow {
        // Every input queued before this tick began, each once; inputs of players who have
        // left since are dropped.
        let limit = self.env.input_queue_size;
        while batch.len() < limit {
            match self.inputs.try_recv() {
                Ok(input) => {
                    if self
                        .members
                        .iter()
                        .any(|m| m.recipient.session_id() == input.from)
                    {
                        batch.push(input);
                    }
                }
                Err(_) => break,
            }
        }
        let mut ctx = context!(self);
        let flow = self.handler.tick(&mut ctx, tick, batch);
        let (kicked, label) = (std::mem::take(&mut ctx.kicked), ctx.label.take());
        batch.clear();
        self.carry_out(kicked, label);
        flow
    }

    fn inspection(&mut self, tick: u64) -> Inspection {
        Inspection {
            match_id: self.handle.id_text.clone(),
            handler: self.handle.handler.clone(),
            authoritative: true,
            label: self.handle.label(),
            size: self.members.len(),
            tick_rate_hz: self.handle.tick_rate_hz(),
            tick,
            presences: self.members.iter().map(|m| m.presence.clone()).collect(),
            state: self.handler.state(),
        }
    }

    /// What a handler asked for besides messages: players removed, a new label.
    fn carry_out(&mut self, kicked: Vec<Uuid>, label: Option<String>) {
        if let Some(text) = label {
            *self.handle.label.write() = MatchLabel::of(Some(text));
        }
        for session in kicked {
            if self.leave(session) {
                self.env.registry.remove_membership(session, self.handle.id);
            }
        }
    }

    /// Handles a join; true when the member was added.
    fn join(
        &mut self,
        member: Member,
        metadata: &HashMap<String, String>,
        reply: oneshot::Sender<Result<Match, MatchError>>,
    ) -> bool {
        let session = member.recipient.session_id();
        if self
            .members
            .iter()
            .any(|m| m.recipient.session_id() == session)
        {
            let _ = reply.send(Ok(self.reply_for(&member.presence)));
            return false;
        }
        if self.members.len() >= self.handle.capacity {
            let _ = reply.send(Err(MatchError::Rejected("Match is full.".into())));
            return false;
        }
        if let Err(reason) = self
            .handler
            .join_attempt(&context!(self), &member.presence, metadata)
        {
            let _ = reply.send(Err(MatchError::Rejected(format!(
                "Join refused by the match: {reason}"
            ))));
            return false;
        }
        let answer = self.reply_for_new(&member.presence);
        if reply.send(Ok(answer)).is_err() {
            // The joiner gave up waiting: it never learns it joined, so it did not.
            return false;
        }
        // Every member, the joiner too, is told of the join (Nakama's tracker does so; the
        // joiner's copy follows its `match` answer).
        let event = self.presence_event(vec![member.presence.clone()], Vec::new());
        let presence = member.presence.clone();
        self.members.push(member);
        for each in &self.members {
            each.recipient.deliver(&event);
        }
        self.handle
            .size
            .store(self.members.len(), Ordering::Relaxed);
        self.env.metrics.players.inc();
        let mut ctx = context!(self);
        self.handler.join(&mut ctx, &presence);
        let (kicked, label) = (std::mem::take(&mut ctx.kicked), ctx.label.take());
        self.carry_out(kicked, label);
        true
    }

    /// Handles a leave; true when `session` was a member.
    fn leave(&mut self, session: Uuid) -> bool {
        let Some(index) = self
            .members
            .iter()
            .position(|m| m.recipient.session_id() == session)
        else {
            return false;
        };
        let gone = self.members.remove(index);
        self.handle
            .size
            .store(self.members.len(), Ordering::Relaxed);
        self.env.metrics.players.dec();
        let event = self.presence_event(Vec::new(), vec![gone.presence.clone()]);
        for other in &self.members {
            other.recipient.deliver(&event);
        }
        let mut ctx = context!(self);
        self.handler.leave(&mut ctx, &gone.presence);
        let (kicked, label) = (std::mem::take(&mut ctx.kicked), ctx.label.take());
        self.carry_out(kicked, label);
        true
    }

    /// The `match` answer for a member already in the match: as Nakama, everyone in it,
    /// `me` included; `size` counts the presences listed.
    fn reply_for(&self, me: &UserPresence) -> Match {
        let presences: Vec<UserPresence> =
            self.members.iter().map(|m| m.presence.clone()).collect();
        Match {
            match_id: self.handle.id_text.clone(),
            authoritative: true,
            label: self.handle.label(),
            size: presences.len() as i32,
            presences,
            self_presence: Some(me.clone()),
        }
    }

    /// The `match` answer for a member about to be added: the others (Nakama leaves the joiner
    /// out of a new join's list, and its `size` counts those listed).
    fn reply_for_new(&self, me: &UserPresence) -> Match {
        let mut reply = self.reply_for(me);
        reply.presences.retain(|p| p.session_id != me.session_id);
        reply.size = reply.presences.len() as i32;
        reply
    }

    fn presence_event(&self, joins: Vec<UserPresence>, leaves: Vec<UserPresence>) -> Encoded {
        Encoded::new(Envelope::new(
            "",
            Message::MatchPresenceEvent(MatchPresenceEvent {
                match_id: self.handle.id_text.clone(),
                joins,
                leaves,
            }),
        ))
    }

    /// Ends the match: the handler's `terminate` (not after it failed: its players' sockets
    /// are closed instead, as Nakama does), then nobody is in it any more.
    fn finish(mut self, ending: Ending) {
        let failed = ending == Ending::HandlerFailed;
        if !failed {
            let mut ctx = context!(self);
            self.handler.terminate(&mut ctx);
        }
        let id = self.handle.id;
        for member in self.members.drain(..) {
            if failed {
                member.recipient.disconnect();
            }
            self.env
                .registry
                .remove_membership(member.recipient.session_id(), id);
            self.env.metrics.players.dec();
        }
        self.handle.size.store(0, Ordering::Relaxed);
        if self.env.registry.remove(id, None) {
            self.env
                .metrics
                .matches
                .with_label_values(&["authoritative"])
                .dec();
            if let Some(meta) = self.handle.room.as_ref() {
                self.env.metrics.rooms.dec();
                self.env.rooms.remove(&self.handle.id_text, meta.owner);
            }
        }
        self.handle.ended.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matches::handler::MatchSettings;
    use crate::session::registry::SessionRegistry;
    use crate::session::Format;
    use std::sync::Mutex;

    /// Records what the match task calls, for the assertions.
    #[derive(Default)]
    struct Log {
        ticks: Vec<(u64, Instant, Vec<i64>)>,
        joins: usize,
        leaves: usize,
        terminated: bool,
    }

    struct Recorder(Arc<Mutex<Log>>, bool);

    impl MatchHandler for Recorder {
        fn init(&mut self, _: &MatchParams) -> MatchSettings {
            MatchSettings {
                tick_rate_hz: Some(10),
                label: None,
                tick_when_empty: self.1,
            }
        }
        fn join_attempt(
            &mut self,
            _: &MatchContext<'_>,
            p: &UserPresence,
            metadata: &HashMap<String, String>,
        ) -> Result<(), String> {
            match metadata.get("deny") {
                Some(_) => Err(format!("{} may not", p.username)),
                None => Ok(()),
            }
        }
        fn join(&mut self, _: &mut MatchContext<'_>, _: &UserPresence) {
            self.0.lock().unwrap().joins += 1;
        }
        fn leave(&mut self, _: &mut MatchContext<'_>, _: &UserPresence) {
            self.0.lock().unwrap().leaves += 1;
        }
        fn tick(&mut self, ctx: &mut MatchContext<'_>, tick: u64, inputs: &[Input]) -> Flow {
            let ops = inputs.iter().map(|i| i.op_code).collect();
            self.0
                .lock()
                .unwrap()
                .ticks
                .push((tick, Instant::now(), ops));
            ctx.broadcast(9, vec![tick as u8]);
            if tick >= 50 {
                Flow::End
            } else {
                Flow::Continue
            }
        }
        fn terminate(&mut self, _: &mut MatchContext<'_>) {
            self.0.lock().unwrap().terminated = true;
        }
    }

    fn env() -> ActorEnv {
        let metrics = Arc::new(MatchMetrics::register(&prometheus::Registry::new()));
        ActorEnv {
            registry: Arc::new(MatchRegistry::default()),
            metrics,
            empty_timeout: Duration::from_secs(5),
            input_queue_size: 64,
            control_queue_size: 8,
            shutdown: CancellationToken::new(),
            rooms: Arc::new(crate::matches::room_book::RoomBook::new(0, 0)),
        }
    }

    fn start(
        tick_when_empty: bool,
        capacity: usize,
    ) -> (
        Arc<AuthoritativeHandle>,
        Arc<Mutex<Log>>,
        tokio::task::JoinHandle<Ending>,
        ActorEnv,
    ) {
        let log = Arc::new(Mutex::new(Log::default()));
        let env = env();
        let id = MatchId::new_authoritative("t");
        let params = MatchParams {
            capacity,
            default_tick_rate_hz: 15,
            ..Default::default()
        };
        let (handle, actor) = create(
            env.clone(),
            id,
            id.display("t"),
            "recorder",
            Box::new(Recorder(log.clone(), tick_when_empty)),
            &params,
            None,
        );
        let task = tokio::spawn(actor.run());
        (handle, log, task, env)
    }

    fn members(
        n: usize,
    ) -> (
        Arc<SessionRegistry>,
        Vec<crate::session::registry::SessionGuard>,
    ) {
        let metrics = Arc::new(crate::base::metrics::Metrics::new());
        let sessions = Arc::new(SessionRegistry::new(metrics));
        let guards = (0..n)
            .map(|i| {
                sessions.register(
                    sessions.admit(0).expect("no limit"),
                    Uuid::new_v4(),
                    &format!("p{i}"),
                    Format::Protobuf,
                    1024,
                )
            })
            .collect();
        (sessions, guards)
    }

    #[tokio::test(start_paused = true)]
    async fn ticks_at_its_rate_and_sees_every_input_once() {
        let (handle, log, task, _env) = start(true, 4);
        let (_sessions, guards) = members(1);
        let me = Member::of(&guards[0].entry);
        let reply = handle
            .join(me.clone(), HashMap::new(), Duration::from_secs(1))
            .await
            .expect("joined");
        // As Nakama: the first to join sees nobody else.
        assert_eq!((reply.size, reply.authoritative), (0, true));
        assert!(reply.presences.is_empty());
        // 100 inputs spread over time, interleaved with ticks.
        for op in 0..100 {
            handle
                .input(Input {
                    from: me.recipient.session_id(),
                    op_code: op,
                    data: vec![],
                    reliable: true,
                })
                .expect("queued");
            if op % 7 == 0 {
                tokio::time::sleep(Duration::from_millis(37)).await;
            }
        }
        assert_eq!(task.await.expect("task"), Ending::HandlerEnded);
        let log = log.lock().unwrap();
        assert_eq!(log.ticks.len(), 50, "ran until the handler ended it");
        // 10 Hz exactly: each tick 100 ms after the previous one (virtual time).
        for pair in log.ticks.windows(2) {
            assert_eq!(pair[1].0, pair[0].0 + 1);
            assert_eq!(pair[1].1 - pair[0].1, Duration::from_millis(100));
        }
        let seen: Vec<i64> = log.ticks.iter().flat_map(|t| t.2.clone()).collect();
        assert_eq!(
            seen,
            (0..100).collect::<Vec<_>>(),
            "every input once, in order"
        );
        assert!(log.terminated);
        assert_eq!(log.joins, 1);
        // The member got its own join's presence event, then one broadcast per tick.
        let drained = guards[0].entry.outbox.drain();
        assert_eq!(drained.messages.len(), 1 + 50);
        assert!(handle.ended.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn capacity_refusals_and_leaves() {
        let (handle, log, task, env) = start(false, 2);
        let (_sessions, guards) = members(3);
        let m: Vec<Member> = guards.iter().map(|g| Member::of(&g.entry)).collect();
        let limit = Duration::from_secs(1);
        let mut deny = HashMap::new();
        deny.insert("deny".to_string(), "1".to_string());
        let refused = handle.join(m[0].clone(), deny, limit).await;
        assert!(matches!(refused, Err(MatchError::Rejected(ref r)) if r.contains("p0 may not")));
        handle
            .join(m[0].clone(), HashMap::new(), limit)
            .await
            .expect("a");
        let second = handle
            .join(m[1].clone(), HashMap::new(), limit)
            .await
            .expect("b");
        assert_eq!(second.presences.len(), 1, "sees the first member");
        assert_eq!(
            handle.join(m[2].clone(), HashMap::new(), limit).await,
            Err(MatchError::Rejected("Match is full.".into()))
        );
        // Joining twice changes nothing.
        assert_eq!(
            handle
                .join(m[1].clone(), HashMap::new(), limit)
                .await
                .expect("again")
                .size,
            2
        );
        assert_eq!(handle.size(), 2);
        assert_eq!(env.metrics.players.get(), 2);
        handle.leave(m[0].recipient.session_id());
        handle.leave(m[1].recipient.session_id());
        // Empty and not ticking: it ends after the empty timeout.
        assert_eq!(task.await.expect("task"), Ending::Empty);
        {
            let log = log.lock().unwrap();
            assert_eq!((log.joins, log.leaves), (2, 2));
            let ticks_while_full = log.ticks.len();
            assert!(
                ticks_while_full <= 1,
                "ticks only while someone is in: {ticks_while_full}"
            );
        }
        assert_eq!(env.metrics.players.get(), 0);
        assert_eq!(
            handle.join(m[2].clone(), HashMap::new(), limit).await,
            Err(MatchError::Ended("Match has ended.".into()))
        );
        assert!(handle
            .input(Input {
                from: Uuid::nil(),
                op_code: 1,
                data: vec![],
                reliable: false
            })
            .is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_and_terminate_end_the_match() {
        let (handle, log, task, env) = start(true, 2);
        env.shutdown.cancel();
        assert_eq!(task.await.expect("task"), Ending::Shutdown);
        assert!(log.lock().unwrap().terminated);
        let (handle2, _log, task2, _env) = start(true, 2);
        handle2.terminate();
        assert_eq!(task2.await.expect("task"), Ending::Terminated);
        drop(handle);
    }
}
