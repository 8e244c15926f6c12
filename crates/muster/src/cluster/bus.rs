//! The cluster's message bus: this node's NATS connection and its subjects. What crosses it is
//! the cluster's one protocol ([`super::protocol`]): typed messages, in one envelope and one
//! encoding, sent with [`Bus::send`], [`Bus::ask`] and [`Bus::answer`] and read with
//! [`super::protocol::decode`].
//!
//! Every subject is `<cluster.subject_prefix>.<topic>`, so several clusters can share one NATS
//! server. NATS reconnects by itself and resubscribes what was subscribed; a publish while it is
//! away is lost, which is why everything sent here is either repeated (heartbeats) or also kept
//! in the store (revocations, reloaded periodically).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::protocol::{decode, encode, Message};
use crate::base::names::is_name_char;
use crate::cluster::config::ClusterConfig;

/// How long connecting to NATS at start may take before the node refuses to start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// This node's connection to the others; cheap to clone.
#[derive(Clone)]
pub struct Bus {
    client: async_nats::Client,
    prefix: String,
    node: String,
    /// When this node started (Unix ms): tells its incarnations apart.
    incarnation: u64,
    /// Publications and subscriptions from code that cannot wait, made in order by one task.
    queue: tokio::sync::mpsc::UnboundedSender<Queued>,
}

/// What the queue's task does next.
enum Queued {
    Publish(String, Vec<u8>),
    Subscribe(String, tokio::sync::oneshot::Sender<async_nats::Subscriber>),
}

/// The node name to use: the configured one, or the machine's host name.
pub fn node_name(config: &ClusterConfig) -> String {
    if !config.node_name.is_empty() {
        return config.node_name.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let cleaned: String = host
        .trim()
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    if cleaned.is_empty() {
        "muster".into()
    } else {
        cleaned
    }
}

impl Bus {
    /// Connects to `cluster.nats_url`; an error (and no start) when NATS does not answer within
    /// 5 s.
    pub async fn connect(config: &ClusterConfig) -> anyhow::Result<Bus> {
        let node = node_name(config);
        let urls = config.nats_url.trim().to_string();
        let client = tokio::time::timeout(
            CONNECT_TIMEOUT,
            async_nats::ConnectOptions::new()
                .name(format!("muster {node}"))
                .connect(urls.as_str()),
        )
        .await
        .map_err(|_| anyhow::anyhow!("cluster: no answer from NATS at {urls} within 5 s"))?
        .map_err(|e| anyhow::anyhow!("cluster: cannot connect to NATS at {urls}: {e}"))?;
        let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel::<Queued>();
        let bus = Bus {
            client,
            prefix: config.subject_prefix.clone(),
            node,
            incarnation: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            queue,
        };
        let sender = bus.clone();
        tokio::spawn(async move {
            while let Some(next) = queued.recv().await {
                match next {
                    Queued::Publish(topic, payload) => sender.publish(&topic, payload).await,
                    Queued::Subscribe(topic, answer) => match sender.subscribe(&topic).await {
                        Ok(subscriber) => {
                            let _ = answer.send(subscriber);
                        }
                        Err(e) => tracing::warn!(topic, "cluster: subscribe failed: {e}"),
                    },
                }
            }
        });
        Ok(bus)
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// This run of the node (Unix ms at its start): a restart is a new incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    fn subject(&self, topic: &str) -> String {
        format!("{}.{topic}", self.prefix)
    }

    /// Publishes `message` on `topic`. Lost (and logged at debug) when NATS is unreachable.
    pub async fn send<M: Message + Serialize>(&self, topic: &str, message: &M) {
        self.publish(topic, encode(message)).await;
    }

    /// [`Bus::send`] from code that cannot wait (a synchronous hook): queued, and sent by one
    /// task in the order queued.
    pub fn send_soon<M: Message + Serialize>(&self, topic: &str, message: &M) {
        self.publish_soon(topic, encode(message));
    }

    /// Sends `question` on `topic` and waits (at most `timeout`) for its answer.
    pub async fn ask<Q: Message + Serialize, A: Message + DeserializeOwned>(
        &self,
        topic: &str,
        question: &Q,
        timeout: Duration,
    ) -> anyhow::Result<A> {
        let answer = self.request(topic, encode(question), timeout).await?;
        Ok(decode(&answer)?)
    }

    /// Answers a question received on a subscription.
    pub async fn answer<M: Message + Serialize>(&self, to: async_nats::Subject, message: &M) {
        self.reply(to, encode(message)).await;
    }

    /// Publishes bytes that are a message of the protocol already ([`super::protocol::encode`]
    /// done once, off the async workers: a world shard's batch of views).
    pub async fn publish_encoded(&self, topic: &str, message: Vec<u8>) {
        self.publish(topic, message).await;
    }

    /// [`Bus::publish_encoded`] from code that cannot wait: one message sent to several nodes
    /// is encoded once.
    pub fn publish_encoded_soon(&self, topic: &str, message: Vec<u8>) {
        self.publish_soon(topic, message);
    }

    async fn publish(&self, topic: &str, payload: Vec<u8>) {
        if let Err(e) = self
            .client
            .publish(self.subject(topic), payload.into())
            .await
        {
            tracing::debug!(topic, "cluster: publish failed: {e}");
        }
    }

    fn publish_soon(&self, topic: &str, payload: Vec<u8>) {
        let _ = self.queue.send(Queued::Publish(topic.to_string(), payload));
    }

    /// Subscribes from code that cannot wait, in order with [`Bus::send_soon`]: NATS takes
    /// the subscription before anything published soon after this call, so a node that learns
    /// of such a publication (a presence) and answers it reaches this subscription. The
    /// subscriber arrives on the returned channel (never, if NATS refused it).
    pub fn subscribe_soon(
        &self,
        topic: &str,
    ) -> tokio::sync::oneshot::Receiver<async_nats::Subscriber> {
        let (answer, subscriber) = tokio::sync::oneshot::channel();
        let _ = self
            .queue
            .send(Queued::Subscribe(topic.to_string(), answer));
        subscriber
    }

    async fn request(
        &self,
        topic: &str,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> anyhow::Result<Vec<u8>> {
        let answer = tokio::time::timeout(
            timeout,
            self.client.request(self.subject(topic), payload.into()),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no answer on {topic} within {timeout:?}"))??;
        Ok(answer.payload.to_vec())
    }

    async fn reply(&self, to: async_nats::Subject, payload: Vec<u8>) {
        if let Err(e) = self.client.publish(to, payload.into()).await {
            tracing::debug!("cluster: reply failed: {e}");
        }
    }

    /// Waits until what was published has reached NATS (before a clean shutdown).
    pub async fn flush(&self) {
        let _ = self.client.flush().await;
    }

    /// Every message published on `topic` from now on, by any node (this one included).
    pub async fn subscribe(&self, topic: &str) -> anyhow::Result<async_nats::Subscriber> {
        Ok(self.client.subscribe(self.subject(topic)).await?)
    }
}
