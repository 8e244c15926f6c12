//! Bans enforced at once, on every node: a ban made on one node refuses the players' tokens
//! there ([`crate::accounts::Accounts::ban`]), ends their sockets there, and is published on the
//! bus topic `banned` so that every other node does the same; a session that registers after a
//! ban (its token checked just before) ends at once too, whatever its transport. A message lost
//! while NATS is away
//! is caught by each node's periodic reload of the banned accounts from the store (their tokens);
//! their sockets on that node then end at their next reconnect, which is refused.

use std::sync::Arc;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::tokens::TokenService;
use crate::cluster::bus::Bus;
use crate::session::registry::{Session, SessionObserver, SessionRegistry};

const TOPIC: &str = "banned";
/// Where an operator's "end these players' sessions" travels to the other nodes.
const END_TOPIC: &str = "sessions_end";

/// Told of every ban and unban made on this node, once it is stored, and of every ending of a
/// player's sessions asked for here.
pub trait BanObserver: Send + Sync {
    fn changed(&self, users: &[Uuid], banned: bool);

    /// Ends every socket of `users` on every node (they may connect again).
    fn end_sessions(&self, users: &[Uuid]);
}

/// What travels on [`END_TOPIC`].
#[derive(Debug, Serialize, Deserialize)]
struct EndSessions {
    node: String,
    users: Vec<Uuid>,
}

impl crate::cluster::protocol::Message for EndSessions {
    const KIND: &'static str = "accounts.end_sessions";
}

/// What travels on the bus.
#[derive(Debug, Serialize, Deserialize)]
struct Changed {
    node: String,
    users: Vec<Uuid>,
    banned: bool,
}

impl crate::cluster::protocol::Message for Changed {
    const KIND: &'static str = "accounts.ban_changed";
}

/// Ends the sockets of banned players on this node and tells the other nodes.
pub struct Enforcer {
    registry: Arc<SessionRegistry>,
    tokens: Arc<TokenService>,
    bus: Option<Bus>,
}

impl Enforcer {
    /// The enforcer of this node's sessions; it sees every session that opens from now on.
    pub fn start(
        registry: Arc<SessionRegistry>,
        tokens: Arc<TokenService>,
        bus: Option<Bus>,
    ) -> Arc<Enforcer> {
        let enforcer = Arc::new(Enforcer {
            registry: registry.clone(),
            tokens,
            bus,
        });
        registry.on_session_closed(enforcer.clone());
        enforcer
    }

    /// Applies other nodes' bans here (their tokens and sockets); runs until the bus closes.
    pub async fn follow(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(bus) = self.bus.clone() else {
            return Ok(());
        };
        let mut incoming = bus.subscribe(TOPIC).await?;
        let mut ends = bus.subscribe(END_TOPIC).await?;
        let enforcer = self.clone();
        let node = bus.node().to_owned();
        tokio::spawn(async move {
            while let Some(message) = ends.next().await {
                match crate::cluster::protocol::decode::<EndSessions>(&message.payload) {
                    Ok(end) if end.node != node => enforcer.end_sockets(&end.users),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("cluster: unreadable end of sessions: {e}"),
                }
            }
        });
        let enforcer = self.clone();
        tokio::spawn(async move {
            while let Some(message) = incoming.next().await {
                match crate::cluster::protocol::decode::<Changed>(&message.payload) {
                    Ok(changed) if changed.node != bus.node() => {
                        enforcer.tokens.set_banned(&changed.users, changed.banned);
                        if changed.banned {
                            enforcer.end_sockets(&changed.users);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("cluster: unreadable ban: {e}"),
                }
            }
        });
        Ok(())
    }

    /// Ends every socket of `users` on this node.
    fn end_sockets(&self, users: &[Uuid]) {
        for user in users {
            for session in self.registry.sessions_of(*user) {
                session.outbox.kick();
            }
        }
    }
}

impl BanObserver for Enforcer {
    fn changed(&self, users: &[Uuid], banned: bool) {
        if banned {
            self.end_sockets(users);
        }
        if let Some(bus) = &self.bus {
            let message = Changed {
                node: bus.node().to_string(),
                users: users.to_vec(),
                banned,
            };
            bus.send_soon(TOPIC, &message);
        }
    }

    fn end_sessions(&self, users: &[Uuid]) {
        self.end_sockets(users);
        self.publish_end(users);
    }
}

impl Enforcer {
    fn publish_end(&self, users: &[Uuid]) {
        if let Some(bus) = &self.bus {
            let message = EndSessions {
                node: bus.node().to_string(),
                users: users.to_vec(),
            };
            bus.send_soon(END_TOPIC, &message);
        }
    }
}

impl SessionObserver for Enforcer {
    /// A ban made between the session's token check and its registration found no socket to
    /// end: this one ends at once.
    fn session_opened(&self, session: &Arc<Session>) {
        if self.tokens.is_banned(&session.user_id) {
            session.outbox.kick();
        }
    }

    fn session_closed(&self, _session: &Arc<Session>) {}
}
