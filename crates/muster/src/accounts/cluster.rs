//! Revocations across the cluster: a logout or a refresh rotation on one node is refused by
//! every node at once, not only after each reloads revocations from the shared store.
//!
//! The node that revokes stores the revocation first (so it survives anything), then publishes
//! it on the bus topic `revoked`; every node adds what others publish to its own set. A
//! publication lost while NATS is away is still caught by the periodic reload from the store.

use std::sync::Arc;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::tokens::{RevocationObserver, TokenService};
use crate::accounts::store::Revocation;
use crate::cluster::bus::Bus;

const TOPIC: &str = "revoked";

/// What travels on the bus.
#[derive(Debug, Serialize, Deserialize)]
struct Revoked {
    node: String,
    revocations: Vec<(Uuid, i64)>,
}

impl crate::cluster::protocol::Message for Revoked {
    const KIND: &'static str = "accounts.revoked";
}

struct Publisher {
    bus: Bus,
}

impl RevocationObserver for Publisher {
    fn revoked(&self, revocations: &[Revocation]) {
        let message = Revoked {
            node: self.bus.node().to_string(),
            revocations: revocations
                .iter()
                .map(|r| (r.token_id, r.expires_at))
                .collect(),
        };
        self.bus.send_soon(TOPIC, &message);
    }
}

/// Publishes this node's revocations and applies the other nodes'.
pub async fn relay_revocations(tokens: Arc<TokenService>, bus: Bus) -> anyhow::Result<()> {
    let mut incoming = bus.subscribe(TOPIC).await?;
    tokens.observe_revocations(Arc::new(Publisher { bus: bus.clone() }));
    tokio::spawn(async move {
        while let Some(message) = incoming.next().await {
            match crate::cluster::protocol::decode::<Revoked>(&message.payload) {
                Ok(revoked) if revoked.node != bus.node() => {
                    let revocations: Vec<Revocation> = revoked
                        .revocations
                        .into_iter()
                        .map(|(token_id, expires_at)| Revocation {
                            token_id,
                            expires_at,
                        })
                        .collect();
                    tokens.revoked_elsewhere(&revocations);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cluster: unreadable revocation: {e}"),
            }
        }
    });
    Ok(())
}
