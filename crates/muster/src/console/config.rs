//! The `[console]` section: the operator's console (`crate::console`, `crate::net::console`) on a
//! listener of its own.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Address of the console (its own listener; loopback by default). Empty disables it. The
    /// console also stays off while `admin_password` is empty.
    pub listen: String,
    /// The console user made from this configuration, with the admin role.
    pub admin_username: String,
    /// That user's password. There is no default: the console is off until one is set. At each
    /// start the user's password becomes this one (change it here, not in the console).
    pub admin_password: String,
    /// How long a console login lasts, in seconds.
    pub session_expiry_sec: u64,
    /// Mark the session cookie `Secure` (sent over HTTPS only): set it when the console is
    /// reached through a TLS proxy.
    pub secure_cookie: bool,
    /// Failed and successful logins one client IP may try per minute.
    pub logins_per_ip_per_min: u32,
    /// Logins that may be tried per minute for one console username, from any IP.
    pub logins_per_user_per_min: u32,
    /// Requests one client IP may make per second (pages and the API); 0: no limit.
    pub requests_per_ip_per_sec: u32,
    /// Burst on top of `requests_per_ip_per_sec`.
    pub request_burst: u32,
    /// Most series the status history keeps (each about 55 KB: an hour at 1 s and 7 days at
    /// 1 min); label values seen after the cap are not charted (counted in
    /// `muster_console_series_dropped_total`).
    pub history_max_series: usize,
    /// The autoscaler's HTTP endpoint (`muster autoscale run --http-listen`), e.g.
    /// `http://muster-autoscaler:7361`: the console shows its latest decisions from
    /// `/decisions`. Empty: the Autoscaler page says none is configured.
    pub autoscaler_url: String,
    /// Most sessions one console user keeps: a login past it ends that user's oldest session.
    pub max_sessions_per_user: u32,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            listen: "127.0.0.1:7353".into(),
            admin_username: "admin".into(),
            admin_password: String::new(),
            session_expiry_sec: 86_400,
            secure_cookie: false,
            logins_per_ip_per_min: 10,
            logins_per_user_per_min: 10,
            requests_per_ip_per_sec: 50,
            request_burst: 200,
            history_max_series: 150,
            autoscaler_url: String::new(),
            max_sessions_per_user: 20,
        }
    }
}

/// Longest console username, in bytes.
pub const MAX_CONSOLE_USERNAME: usize = 64;

/// A console username: 1 to [`MAX_CONSOLE_USERNAME`] ASCII letters, digits, `.`, `-` or `_`.
pub fn is_console_username(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CONSOLE_USERNAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
}

impl ConsoleConfig {
    /// Whether the console is served: a listener and an admin password.
    pub fn enabled(&self) -> bool {
        !self.listen.is_empty() && !self.admin_password.is_empty()
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if !is_console_username(&self.admin_username) {
            return Err(format!(
                "console.admin_username must be 1 to {MAX_CONSOLE_USERNAME} letters, digits, '.', '-' or '_'"
            ));
        }
        if self.admin_password.len() < 8 {
            return Err("console.admin_password must be at least 8 characters".into());
        }
        if self.session_expiry_sec == 0 {
            return Err("console.session_expiry_sec must be at least 1".into());
        }
        if self.logins_per_ip_per_min == 0 || self.logins_per_user_per_min == 0 {
            return Err(
                "console.logins_per_ip_per_min and logins_per_user_per_min must be at least 1"
                    .into(),
            );
        }
        if self.max_sessions_per_user == 0 {
            return Err("console.max_sessions_per_user must be at least 1".into());
        }
        if self.history_max_series == 0 {
            return Err("console.history_max_series must be at least 1".into());
        }
        if !self.autoscaler_url.is_empty()
            && reqwest::Url::parse(&self.autoscaler_url)
                .map(|url| !matches!(url.scheme(), "http" | "https") || !url.has_host())
                .unwrap_or(true)
        {
            return Err(
                "console.autoscaler_url must be an http:// or https:// URL with a host".into(),
            );
        }
        Ok(())
    }
}
