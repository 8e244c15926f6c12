//! Who is online: every open socket (a session) and, per user, how many sessions they have.
//! Counts are kept as counters updated on register and unregister, never by walking the maps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use muster_proto::realtime::UserPresence;
use uuid::Uuid;

use super::channels::session::ChatSession;
use super::outbox::Outbox;
use super::Format;
use crate::metrics::Metrics;

/// One open socket as other parts of the server see it.
pub struct SessionEntry {
    pub session_id: Uuid,
    pub user_id: Uuid,
    pub username: Box<str>,
    pub format: Format,
    pub outbox: Outbox,
    /// The chat channels this socket is in and its message budget.
    pub chat: ChatSession,
}

impl SessionEntry {
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

pub struct SessionRegistry {
    sessions: DashMap<Uuid, Arc<SessionEntry>>,
    sessions_per_user: DashMap<Uuid, u32>,
    open: AtomicUsize,
    metrics: Arc<Metrics>,
}

/// Keeps a session registered while alive; dropping it unregisters the session.
pub struct SessionGuard {
    registry: Arc<SessionRegistry>,
    pub entry: Arc<SessionEntry>,
}

impl SessionRegistry {
    pub fn new(metrics: Arc<Metrics>) -> SessionRegistry {
        SessionRegistry {
            sessions: DashMap::new(),
            sessions_per_user: DashMap::new(),
            open: AtomicUsize::new(0),
            metrics,
        }
    }

    pub fn register(
        self: &Arc<Self>,
        user_id: Uuid,
        username: &str,
        format: Format,
        outbox_capacity: usize,
    ) -> SessionGuard {
        let entry = Arc::new(SessionEntry {
            session_id: Uuid::new_v4(),
            user_id,
            username: username.into(),
            format,
            outbox: Outbox::new(outbox_capacity),
            chat: ChatSession::default(),
        });
        self.sessions.insert(entry.session_id, entry.clone());
        let mut count = self.sessions_per_user.entry(user_id).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.metrics.users_online.inc();
        }
        drop(count);
        self.open.fetch_add(1, Ordering::Relaxed);
        self.metrics.sockets_open.inc();
        SessionGuard {
            registry: self.clone(),
            entry,
        }
    }

    fn unregister(&self, entry: &SessionEntry) {
        if self.sessions.remove(&entry.session_id).is_none() {
            return;
        }
        let last = self
            .sessions_per_user
            .remove_if_mut(&entry.user_id, |_, count| {
                *count -= 1;
                *count == 0
            })
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
        self.sessions_per_user.contains_key(&user_id)
    }

    pub fn session(&self, session_id: Uuid) -> Option<Arc<SessionEntry>> {
        self.sessions.get(&session_id).map(|e| e.clone())
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.registry.unregister(&self.entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sessions_and_users() {
        let registry = Arc::new(SessionRegistry::new(Arc::new(Metrics::new())));
        let alice = Uuid::new_v4();
        let first = registry.register(alice, "alice", Format::Json, 4);
        let second = registry.register(alice, "alice", Format::Protobuf, 4);
        assert_eq!(registry.sockets(), 2);
        assert!(registry.is_online(alice));
        assert!(registry.session(first.entry.session_id).is_some());
        drop(first);
        assert!(registry.is_online(alice), "one session left");
        drop(second);
        assert!(!registry.is_online(alice));
        assert_eq!(registry.sockets(), 0);
        assert_eq!(registry.metrics.users_online.get(), 0);
    }
}
