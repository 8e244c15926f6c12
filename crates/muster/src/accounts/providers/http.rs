//! The one HTTP client every provider's call goes through, and each provider's gate: a bound on
//! its calls in flight and its circuit breaker. A call has one deadline for waiting for a slot,
//! the request and reading the answer; the answer is read up to a size bound. Redirects are not
//! followed (a Game Center key URL must not lead off Apple's hosts).
//!
//! URLs carry tokens and keys in their query (as the providers' APIs want), so no error or log
//! line here names a URL.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::breaker::Breaker;
use super::{Provider, ProviderError, SocialConfig};
use crate::base::http_answer::read_bounded;

/// One provider's bound on calls in flight, and its breaker.
pub struct Gate {
    provider: Provider,
    slots: Semaphore,
    pub(crate) breaker: Breaker,
}

impl Gate {
    pub fn provider(&self) -> Provider {
        self.provider
    }

    pub fn new(provider: Provider, config: &SocialConfig) -> Gate {
        Gate {
            provider,
            slots: Semaphore::new(config.max_in_flight.max(1)),
            breaker: Breaker::new(
                config.breaker_failures,
                Duration::from_millis(config.breaker_open_ms),
            ),
        }
    }
}

/// A provider's answer (any status below 500 but 429).
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

impl Reply {
    pub fn is_ok(&self) -> bool {
        self.status == 200
    }
}

pub struct Http {
    /// None when the TLS backend could not start (logged once): every call is unavailable.
    client: Option<reqwest::Client>,
    timeout: Duration,
    max_bytes: usize,
}

impl Http {
    pub fn new(config: &SocialConfig) -> Http {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("muster/", env!("CARGO_PKG_VERSION")))
            .build();
        let client = match client {
            Ok(client) => Some(client),
            Err(error) => {
                tracing::error!(error = %error.without_url(), "sign-in: the HTTP client could not start; every provider's login will fail");
                None
            }
        };
        Http {
            client,
            timeout,
            max_bytes: config.max_response_bytes,
        }
    }

    /// GET `url` through `gate`. An answer that says the provider is in trouble (5xx, 429), no
    /// answer within the deadline, or none at all is `Unavailable` and counts against the
    /// breaker; any other answer is returned, whatever its status.
    pub async fn get(&self, gate: &Gate, url: url::Url) -> Result<Reply, ProviderError> {
        let provider = gate.provider;
        let unavailable = |why: String| ProviderError::Unavailable(provider, why);
        if let Err(wait) = gate.breaker.admit(Instant::now()) {
            return Err(unavailable(format!(
                "circuit breaker open for {} ms more",
                wait.as_millis()
            )));
        }
        let Some(client) = &self.client else {
            return Err(unavailable("the HTTP client could not start".into()));
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let Ok(Ok(_slot)) = tokio::time::timeout_at(deadline, gate.slots.acquire()).await else {
            return Err(unavailable(format!(
                "no free slot within {} ms",
                self.timeout.as_millis()
            )));
        };
        let call = async {
            let response = client.get(url).send().await?;
            let status = response.status().as_u16();
            let body = read_bounded(response, self.max_bytes).await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let outcome = tokio::time::timeout_at(deadline, call).await;
        let failed = |why: String| {
            if gate.breaker.failure(Instant::now()) {
                tracing::warn!(
                    provider = provider.name(),
                    reason = %why,
                    "sign-in: provider unreachable, its circuit breaker opens"
                );
            }
            unavailable(why)
        };
        match outcome {
            Err(_) => Err(failed(format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
            Ok(Err(error)) => Err(failed(error.without_url().to_string())),
            Ok(Ok((status, None))) => {
                gate.breaker.success();
                Err(unavailable(format!(
                    "answer ({status}) larger than {} bytes",
                    self.max_bytes
                )))
            }
            Ok(Ok((status, _))) if status >= 500 || status == 429 => {
                Err(failed(format!("answered {status}")))
            }
            Ok(Ok((status, Some(body)))) => {
                gate.breaker.success();
                Ok(Reply { status, body })
            }
        }
    }
}

/// `base` (a configured URL, trailing slash or not) followed by `path`, with `query`.
pub fn url_with(base: &str, path: &str, query: &[(&str, &str)]) -> Result<url::Url, String> {
    let joined = format!("{}{}", base.trim_end_matches('/'), path);
    let mut url = url::Url::parse(&joined).map_err(|e| format!("bad provider URL setting: {e}"))?;
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Ok(url)
}
