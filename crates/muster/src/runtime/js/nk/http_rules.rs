//! What `nk.httpRequest` may reach and how (`runtime.js_http_allow`, its timeout and body bound).

use std::time::Duration;

use crate::config::RuntimeConfig;

/// What `httpRequest` may reach and how.
pub struct HttpRules {
    /// `host`, `host:port`, or `*` for any host.
    allow: Vec<String>,
    pub(super) timeout: Duration,
    pub(super) max_bytes: usize,
    pub(super) client: reqwest::Client,
}

impl HttpRules {
    pub fn new(config: &RuntimeConfig) -> HttpRules {
        HttpRules {
            allow: config
                .js_http_allow
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            timeout: Duration::from_millis(config.js_http_timeout_ms),
            max_bytes: config.js_http_max_bytes,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
        }
    }

    pub(super) fn allows(&self, url: &reqwest::Url) -> bool {
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let with_port = url.port().map(|p| format!("{host}:{p}"));
        self.allow
            .iter()
            .any(|a| a == "*" || *a == host || Some(a) == with_port.as_ref())
    }
}
