//! Calls to a store's servers: each store has its own bound on calls in flight, every call a
//! deadline (waiting for a place included) and a bound on the answer's size, so a store that is
//! slow or down fails that store's validations — quickly, with a clear error — and nothing
//! else.

use std::time::Duration;

use prometheus::{IntCounterVec, Opts, Registry};
use tokio::sync::Semaphore;

use super::PurchaseError;
use crate::base::http_answer::read_bounded;

/// Largest answer read from a store (verifyReceipt answers carry the whole receipt again).
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// Calls to stores, by store and outcome (`ok`, `refused`: a 4xx, `failed`: a 5xx, an
/// unreadable answer or no connection, `timeout`).
#[derive(Clone)]
pub struct StoreCalls(IntCounterVec);

impl StoreCalls {
    pub fn register(registry: &Registry) -> StoreCalls {
        StoreCalls(crate::base::metrics::register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "iap_store_calls_total",
                    "Calls to the stores' servers (purchase validation), by store and outcome.",
                ),
                &["store", "outcome"],
            ),
        ))
    }
}

/// One store's servers as this node calls them.
pub struct Remote {
    /// The store's name in errors ("Apple", "Google", "Huawei").
    pub store: &'static str,
    http: reqwest::Client,
    gate: Semaphore,
    timeout: Duration,
    calls: StoreCalls,
}

/// A store's answer: its status and body.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Remote {
    pub fn new(
        store: &'static str,
        http: reqwest::Client,
        max_in_flight: usize,
        timeout: Duration,
        calls: StoreCalls,
    ) -> Remote {
        Remote {
            store,
            http,
            gate: Semaphore::new(max_in_flight),
            timeout,
            calls,
        }
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The error every failure to reach the store becomes.
    pub fn unavailable(&self, why: &str) -> PurchaseError {
        PurchaseError::Unavailable(format!(
            "{} IAP verification is currently unavailable ({why}). Try again later.",
            self.store
        ))
    }

    /// Sends `request` within the deadline and reads its answer (any status).
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, PurchaseError> {
        let call = async {
            let _place = self
                .gate
                .acquire()
                .await
                .map_err(|_| self.unavailable("shutting down"))?;
            let response = request.send().await.map_err(|error| {
                tracing::warn!(store = self.store, %error, "store call failed");
                self.count("failed");
                self.unavailable("cannot be reached")
            })?;
            let status = response.status().as_u16();
            let body = match read_bounded(response, MAX_ANSWER_BYTES).await {
                Ok(Some(body)) => body.to_vec(),
                Ok(None) => {
                    self.count("failed");
                    return Err(self.unavailable("answer too large"));
                }
                Err(error) => {
                    tracing::warn!(store = self.store, %error, "store answer broken off");
                    self.count("failed");
                    return Err(self.unavailable("answer broken off"));
                }
            };
            self.count(match status {
                200..=299 => "ok",
                400..=499 => "refused",
                _ => "failed",
            });
            Ok(Answer { status, body })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => {
                self.count("timeout");
                Err(self.unavailable(&format!("no answer within {} ms", self.timeout.as_millis())))
            }
        }
    }

    fn count(&self, outcome: &str) {
        self.calls.0.with_label_values(&[self.store, outcome]).inc();
    }
}

/// The HTTP client every store's calls share: TLS through rustls, no redirects (a store never
/// sends one; following one could take a receipt elsewhere), connections kept alive. Calls are
/// bounded by [`Remote::send`]'s deadline, not by the client.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent("muster")
        .build()
}
