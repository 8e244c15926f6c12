//! A user who stops being a group's member (leaves, is kicked or banned, or the group is
//! deleted) leaves the group's chat at once on every node: their sessions here leave the
//! channel (its other members told, as for any leave), and the bus topic `group_evictions`
//! tells the other nodes to do the same with theirs.

use std::sync::Arc;

use futures_util::StreamExt as _;
use muster_proto::realtime::ChannelId;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cluster::bus::Bus;
use crate::cluster::Router;
use crate::session::SessionRegistry;

const TOPIC: &str = "group_evictions";

#[derive(Debug, Serialize, Deserialize)]
struct Evicted {
    node: String,
    group: Uuid,
    users: Vec<Uuid>,
}

impl crate::cluster::protocol::Message for Evicted {
    const KIND: &'static str = "groups.evicted";
}

pub struct Evictions {
    registry: Arc<SessionRegistry>,
    router: Arc<dyn Router>,
    bus: Option<Bus>,
}

impl Evictions {
    pub fn new(
        registry: Arc<SessionRegistry>,
        router: Arc<dyn Router>,
        bus: Option<Bus>,
    ) -> Arc<Evictions> {
        Arc::new(Evictions {
            registry,
            router,
            bus,
        })
    }

    /// Applies other nodes' evictions here; runs until the bus closes.
    pub async fn follow(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(bus) = self.bus.clone() else {
            return Ok(());
        };
        let mut incoming = bus.subscribe(TOPIC).await?;
        let evictions = self.clone();
        tokio::spawn(async move {
            while let Some(message) = incoming.next().await {
                match crate::cluster::protocol::decode::<Evicted>(&message.payload) {
                    Ok(evicted) if evicted.node != bus.node() => {
                        evictions.here(evicted.group, &evicted.users);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("cluster: unreadable group eviction: {e}"),
                }
            }
        });
        Ok(())
    }

    /// Takes `users` out of `group`'s chat on every node.
    pub fn evict(&self, group: Uuid, users: Vec<Uuid>) {
        if users.is_empty() {
            return;
        }
        self.here(group, &users);
        if let Some(bus) = &self.bus {
            let message = Evicted {
                node: bus.node().to_string(),
                group,
                users,
            };
            bus.send_soon(TOPIC, &message);
        }
    }

    fn here(&self, group: Uuid, users: &[Uuid]) {
        let channel = ChannelId::Group(group.to_string()).to_string();
        for user in users {
            for session in self.registry.sessions_of(*user) {
                // Not in the channel: nothing to do.
                let _ = self.router.leave_channel(&session, &channel);
            }
        }
    }
}
