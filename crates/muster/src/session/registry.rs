//! Who is online: every open socket (a session) and, per user, how many sessions they have.
//! Counts are kept as counters updated on register and unregister, never by walking the maps.
//!
//! A session ends in one place whatever its transport: dropping its [`SessionGuard`] tells every
//! [`SessionObserver`] (chat leaves its channels, matches leave theirs and drop matchmaker
//! tickets), in the order they were registered, and then unregisters it. A transport therefore
//! cannot forget a domain's cleanup, and a task that panics still cleans up.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use muster_proto::realtime::UserPresence;
use uuid::Uuid;

use super::channels::SessionChannels;
use super::outbox::Outbox;
use super::Format;
use crate::base::metrics::Metrics;

/// One open socket as other parts of the server see it.
pub struct Session {
    pub session_id: Uuid,
    pub user_id: Uuid,
    pub username: Box<str>,
    pub format: Format,
    pub outbox: Outbox,
    /// The channels this session is in and its message budget.
    pub channels: SessionChannels,
}

impl Session {
    /// This session as channel and match members see it.
    pub fn presence(&self) -> UserPresence {
        UserPresence {
            user_id: self.user_id.to_string(),
            session_id: self.session_id.to_string(),
            username: self.username.to_string(),
            persistence: false,
            status: None,
        }
    }
}

/// A domain that keeps per-session state and must let go of it when a session ends.
pub trait SessionObserver: Send + Sync {
    /// Called once, when the session is registered (the cluster tells the other nodes). Must
    /// not block.
    fn session_opened(&self, _session: &Arc<Session>) {}

    /// Called once, as the session ends, before it leaves the registry. Must not block: it runs
    /// on the ending socket's task.
    fn session_closed(&self, session: &Arc<Session>);
}

pub struct SessionRegistry {
    sessions: DashMap<Uuid, Arc<Session>>,
    /// Told about every session that ends; set while the server is built.
    observers: parking_lot::RwLock<Vec<Arc<dyn SessionObserver>>>,
    /// Each online user's session ids (what `send_to_user` needs).
    sessions_of_user: DashMap<Uuid, UserSessions>,
    open: AtomicUsize,
    /// Sockets admitted under the socket limit: open ones and those still upgrading.
    admitted: AtomicUsize,
    /// Admitted sockets per client address and per user, where those limits apply.
    places_per_ip: DashMap<IpAddr, usize>,
    places_per_user: DashMap<Uuid, usize>,
    metrics: Arc<Metrics>,
}

/// One user's open sessions. Most users have one, held inline (no allocation: 16 bytes a user
/// more than a bare count, at a million users 16 MB); a second session moves them to a slice,
/// rebuilt on the rare connect or disconnect of another.
enum UserSessions {
    One(Uuid),
    Many(Box<[Uuid]>),
}

impl UserSessions {
    fn as_slice(&self) -> &[Uuid] {
        match self {
            UserSessions::One(id) => std::slice::from_ref(id),
            UserSessions::Many(ids) => ids,
        }
    }

    fn add(&mut self, id: Uuid) {
        let ids: Box<[Uuid]> = self.as_slice().iter().copied().chain([id]).collect();
        *self = UserSessions::Many(ids);
    }

    /// Forgets `id`; true when no session is left.
    fn remove(&mut self, id: Uuid) -> bool {
        let left: Vec<Uuid> = self
            .as_slice()
            .iter()
            .copied()
            .filter(|other| *other != id)
            .collect();
        match left.as_slice() {
            [] => true,
            [only] => {
                *self = UserSessions::One(*only);
                false
            }
            _ => {
                *self = UserSessions::Many(left.into_boxed_slice());
                false
            }
        }
    }
}

/// A place under the socket limit (and, when taken, under the limits per client address and
/// per user). It is taken before an upgrade is answered, so that many upgrades at once cannot
/// all see room for one more; the session holds it once registered, and it is given back when
/// the session ends or the upgrade never completes.
pub struct Admission {
    registry: Arc<SessionRegistry>,
    ip: Option<IpAddr>,
    user: Option<Uuid>,
}

impl Admission {
    /// Counts this admission against client address `ip` too: false (nothing taken) when `ip`
    /// holds `max` already (`max` 0: no limit).
    pub fn count_ip(&mut self, ip: IpAddr, max: usize) -> bool {
        let taken = take(&self.registry.places_per_ip, ip, max);
        if taken {
            self.ip = Some(ip);
        }
        taken
    }

    /// Counts this admission against `user` too: false (nothing taken) when the user holds
    /// `max` sockets already (`max` 0: no limit).
    pub fn count_user(&mut self, user: Uuid, max: usize) -> bool {
        let taken = take(&self.registry.places_per_user, user, max);
        if taken {
            self.user = Some(user);
        }
        taken
    }
}

/// One more place for `key` in `places`, unless it holds `max` (0: no limit).
fn take<K: std::hash::Hash + Eq>(places: &DashMap<K, usize>, key: K, max: usize) -> bool {
    // An entry at `max` (at least 1) is never empty, so a refusal leaves no empty entry.
    let mut held = places.entry(key).or_insert(0);
    if max > 0 && *held >= max {
        return false;
    }
    *held += 1;
    true
}

/// Gives a place back, forgetting the key with its last place.
fn give_back<K: std::hash::Hash + Eq>(places: &DashMap<K, usize>, key: &K) {
    places.remove_if_mut(key, |_, n| {
        *n -= 1;
        *n == 0
    });
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            give_back(&self.registry.places_per_ip, &ip);
        }
        if let Some(user) = self.user {
            give_back(&self.registry.places_per_user, &user);
        }
        self.registry.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Keeps a session registered while alive; dropping it unregisters the session.
pub struct SessionGuard {
    admission: Admission,
    pub entry: Arc<Session>,
}

impl SessionRegistry {
    pub fn new(metrics: Arc<Metrics>) -> SessionRegistry {
        SessionRegistry {
            sessions: DashMap::new(),
            observers: parking_lot::RwLock::new(Vec::new()),
            sessions_of_user: DashMap::new(),
            open: AtomicUsize::new(0),
            admitted: AtomicUsize::new(0),
            places_per_ip: DashMap::new(),
            places_per_user: DashMap::new(),
            metrics,
        }
    }

    /// Adds `observer` to those told when a session starts and ends (after the ones added
    /// before it).
    pub fn on_session_closed(&self, observer: Arc<dyn SessionObserver>) {
        self.observers.write().push(observer);
    }

    /// Takes a place if fewer than `max` sockets hold one (`max` 0: no limit).
    pub fn admit(self: &Arc<Self>, max: usize) -> Option<Admission> {
        self.admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (max == 0 || n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Admission {
            registry: self.clone(),
            ip: None,
            user: None,
        })
    }

    pub fn register(
        &self,
        admission: Admission,
        user_id: Uuid,
        username: &str,
        format: Format,
        outbox_capacity: usize,
    ) -> SessionGuard {
        self.register_with_outbox(
            admission,
            user_id,
            username,
            format,
            Outbox::new(outbox_capacity),
        )
    }

    /// [`SessionRegistry::register`] with an outbox the transport made (one that wakes it its
    /// own way, [`Outbox::with_consumer`]).
    pub fn register_with_outbox(
        &self,
        admission: Admission,
        user_id: Uuid,
        username: &str,
        format: Format,
        outbox: Outbox,
    ) -> SessionGuard {
        let entry = Arc::new(Session {
            session_id: Uuid::new_v4(),
            user_id,
            username: username.into(),
            format,
            outbox,
            channels: SessionChannels::default(),
        });
        self.sessions.insert(entry.session_id, entry.clone());
        let first = match self.sessions_of_user.entry(user_id) {
            dashmap::mapref::entry::Entry::Vacant(vacant) => {
                vacant.insert(UserSessions::One(entry.session_id));
                true
            }
            dashmap::mapref::entry::Entry::Occupied(mut occupied) => {
                occupied.get_mut().add(entry.session_id);
                false
            }
        };
        if first {
            self.metrics.users_online.inc();
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        self.metrics.sockets_open.inc();
        for observer in self.observers.read().iter() {
            observer.session_opened(&entry);
        }
        SessionGuard { admission, entry }
    }

    fn unregister(&self, entry: &Session) {
        if self.sessions.remove(&entry.session_id).is_none() {
            return;
        }
        let last = self
            .sessions_of_user
            .remove_if_mut(&entry.user_id, |_, ids| ids.remove(entry.session_id))
            .is_some();
        if last {
            self.metrics.users_online.dec();
        }
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.metrics.sockets_open.dec();
    }

    /// Sockets open now.
    pub fn sockets(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn is_online(&self, user_id: Uuid) -> bool {
        self.sessions_of_user.contains_key(&user_id)
    }

    /// Every open session of `user_id`.
    pub fn sessions_of(&self, user_id: Uuid) -> Vec<Arc<Session>> {
        let ids: Vec<Uuid> = match self.sessions_of_user.get(&user_id) {
            Some(ids) => ids.as_slice().to_vec(),
            None => return Vec::new(),
        };
        ids.iter().filter_map(|id| self.session(*id)).collect()
    }

    /// Every open session now: (session id, user id).
    pub fn all_sessions(&self) -> Vec<(Uuid, Uuid)> {
        self.sessions
            .iter()
            .map(|e| (e.value().session_id, e.value().user_id))
            .collect()
    }

    pub fn session(&self, session_id: Uuid) -> Option<Arc<Session>> {
        self.sessions.get(&session_id).map(|e| e.clone())
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let registry = &self.admission.registry;
        for observer in registry.observers.read().iter() {
            observer.session_closed(&self.entry);
        }
        registry.unregister(&self.entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sessions_and_users() {
        let registry = Arc::new(SessionRegistry::new(Arc::new(Metrics::new())));
        let alice = Uuid::new_v4();
        let admit = || registry.admit(0).expect("no limit");
        let first = registry.register(admit(), alice, "alice", Format::Json, 4);
        let second = registry.register(admit(), alice, "alice", Format::Protobuf, 4);
        assert_eq!(registry.sockets(), 2);
        assert!(registry.is_online(alice));
        assert!(registry.session(first.entry.session_id).is_some());
        assert_eq!(registry.sessions_of(alice).len(), 2);
        drop(first);
        let left = registry.sessions_of(alice);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].session_id, second.entry.session_id);
        assert!(registry.is_online(alice), "one session left");
        drop(second);
        assert!(!registry.is_online(alice));
        assert_eq!(registry.sockets(), 0);
        assert_eq!(registry.metrics.users_online.get(), 0);
    }

    #[test]
    fn observers_hear_of_every_ending_before_it_leaves_the_registry() {
        struct Seen(Arc<SessionRegistry>, parking_lot::Mutex<Vec<(Uuid, bool)>>);
        impl SessionObserver for Seen {
            fn session_closed(&self, session: &Arc<Session>) {
                let still_registered = self.0.session(session.session_id).is_some();
                self.1.lock().push((session.session_id, still_registered));
            }
        }
        let registry = Arc::new(SessionRegistry::new(Arc::new(Metrics::new())));
        let seen = Arc::new(Seen(registry.clone(), Default::default()));
        registry.on_session_closed(seen.clone());
        let guard = registry.register(
            registry.admit(0).expect("no limit"),
            Uuid::new_v4(),
            "carol",
            Format::Json,
            4,
        );
        let id = guard.entry.session_id;
        assert!(seen.1.lock().is_empty());
        drop(guard);
        assert_eq!(*seen.1.lock(), vec![(id, true)]);
        assert_eq!(registry.sockets(), 0);
    }

    #[test]
    fn a_user_s_sessions_are_listed_as_they_come_and_go() {
        let registry = Arc::new(SessionRegistry::new(Arc::new(Metrics::new())));
        let user = Uuid::new_v4();
        let open = || {
            registry.register(
                registry.admit(0).expect("no limit"),
                user,
                "u",
                Format::Json,
                4,
            )
        };
        let (a, b, c) = (open(), open(), open());
        let ids = |r: &SessionRegistry| {
            let mut ids: Vec<Uuid> = r.sessions_of(user).iter().map(|s| s.session_id).collect();
            ids.sort();
            ids
        };
        let mut all = vec![a.entry.session_id, b.entry.session_id, c.entry.session_id];
        all.sort();
        assert_eq!(ids(&registry), all);
        let (kept_a, kept_c) = (a.entry.session_id, c.entry.session_id);
        drop(b);
        let mut left = vec![kept_a, kept_c];
        left.sort();
        assert_eq!(ids(&registry), left);
        drop(a);
        assert_eq!(ids(&registry), vec![kept_c]);
        drop(c);
        assert!(ids(&registry).is_empty());
        assert!(!registry.is_online(user));
    }

    #[test]
    fn admissions_hold_the_limit_until_released() {
        let registry = Arc::new(SessionRegistry::new(Arc::new(Metrics::new())));
        let upgrading = registry.admit(2).expect("room");
        let session = registry.register(
            registry.admit(2).expect("room"),
            Uuid::new_v4(),
            "bob",
            Format::Json,
            4,
        );
        assert!(
            registry.admit(2).is_none(),
            "an upgrade in flight holds its place"
        );
        drop(upgrading);
        let third = registry
            .admit(2)
            .expect("an abandoned upgrade gives its place back");
        assert!(registry.admit(2).is_none());
        drop(session);
        assert!(
            registry.admit(2).is_some(),
            "a closed session gives its place back"
        );
        drop(third);
        assert_eq!(registry.admitted.load(Ordering::Acquire), 0);
    }
}
