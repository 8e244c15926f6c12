//! The gateway's configuration: the origins, the object types, and the query fields, each naming
//! the origin that answers it, how its URL is built from its arguments, what part of the JSON
//! answer it returns and how long that is kept. Validated as a whole before anything is served:
//! a mistake is named, with the field it is in.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cache::Policy;
use crate::origin::OriginLimits;
use crate::origin_url::OriginUrl;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// A key servers may send (`Authorization: Bearer <key>`) to query without a player's
    /// session (per-caller fields then refuse); empty: session tokens only.
    pub api_key: String,
    /// Queries one client IP may send per second (token bucket refill; 0 disables).
    pub requests_per_ip_per_sec: u32,
    /// Bucket size: queries one IP may send at once after being quiet.
    pub request_burst: u32,
    /// Deepest selection a query may make (GraphQL depth limit).
    pub max_depth: usize,
    /// Highest complexity a query may have (each selected field counts 1).
    pub max_complexity: usize,
    /// Bytes the cache may hold: each answer weighs what it holds in memory once parsed (not
    /// its text, which can be a sixteenth of that), plus its key.
    pub cache_bytes: u64,
    /// Largest origin answer read, in bytes; a larger one is an error (and not cached). Enforced
    /// while the answer streams in, so a larger one costs no more than this much memory.
    pub max_origin_bytes: usize,
    /// The longest pause a 429 or 503 can impose on an origin, in seconds, whatever its
    /// `Retry-After` says: an origin (or whoever answers in its name) cannot stop the gateway
    /// from asking it for longer than this.
    pub max_retry_after_s: u64,
    pub origins: Vec<OriginConfig>,
    pub types: Vec<TypeConfig>,
    pub fields: Vec<FieldConfig>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            api_key: String::new(),
            requests_per_ip_per_sec: 100,
            request_burst: 200,
            max_depth: 8,
            max_complexity: 256,
            cache_bytes: 64 * 1024 * 1024,
            max_origin_bytes: 1024 * 1024,
            max_retry_after_s: 300,
            origins: Vec::new(),
            types: Vec::new(),
            fields: Vec::new(),
        }
    }
}

/// One origin (a REST API) and its budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OriginConfig {
    pub name: String,
    /// `http://` or `https://`, without a query; fields' paths are appended to it.
    pub base_url: String,
    /// Calls in flight at once.
    pub concurrency: usize,
    /// Calls started per second; 0: no rate limit, else at least 0.001 (one call in 1000 s).
    pub per_second: f64,
    /// Calls that may start at once after a quiet spell.
    pub burst: u32,
    /// Longest wait for one answer.
    pub timeout_ms: u64,
    /// The pause after a 429 or 503 that named no `Retry-After` (or an HTTP-date, which is
    /// not read); at most `gateway.max_retry_after_s`.
    pub default_retry_after_ms: u64,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            name: String::new(),
            base_url: String::new(),
            concurrency: 16,
            per_second: 0.0,
            burst: 1,
            timeout_ms: 2000,
            default_retry_after_ms: 1000,
        }
    }
}

impl OriginConfig {
    /// The origin's budget; `max_retry_after` is `gateway.max_retry_after_s`.
    pub fn limits(&self, max_retry_after: Duration) -> OriginLimits {
        OriginLimits {
            concurrency: self.concurrency,
            per_second: self.per_second,
            burst: self.burst,
            default_retry_after: Duration::from_millis(self.default_retry_after_ms),
            max_retry_after,
        }
    }
}

/// An object type: its fields and their types (`String`, `Int`, `Float`, `Boolean`, `ID`,
/// another type's name, or a list of one: `[Item]`), read from the JSON object's keys of the same
/// name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeConfig {
    pub name: String,
    pub fields: BTreeMap<String, String>,
}

/// A query field answered by an origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldConfig {
    pub name: String,
    pub origin: String,
    /// Appended to the origin's URL; `{argument}` is replaced by the argument's value,
    /// percent-encoded. Every placeholder must be an argument. An argument fills its own place
    /// and nothing else: one that is empty, `.` or `..` (however encoded) or holds such a
    /// segment is refused ([`crate::origin_url`]).
    pub path: String,
    /// The field's arguments (all `String!`); with the field's name they form the cache key.
    pub arguments: Vec<String>,
    /// The returned type: a scalar, a configured type, or a list of one (`[Item]`).
    pub returns: String,
    /// A JSON pointer into the origin's answer (RFC 6901); empty: the whole answer.
    pub select: String,
    /// Cached per caller (the key includes the caller's account) instead of once for everyone.
    pub per_user: bool,
    pub ttl_s: u64,
    pub stale_while_revalidate_s: u64,
    pub stale_if_error_s: u64,
    /// XFetch's β: 0 turns early refresh off, 1 is the usual choice.
    pub early_refresh_beta: f64,
}

impl Default for FieldConfig {
    fn default() -> Self {
        FieldConfig {
            name: String::new(),
            origin: String::new(),
            path: String::new(),
            arguments: Vec::new(),
            returns: String::new(),
            select: String::new(),
            per_user: false,
            ttl_s: 60,
            stale_while_revalidate_s: 30,
            stale_if_error_s: 600,
            early_refresh_beta: 1.0,
        }
    }
}

impl FieldConfig {
    pub fn policy(&self) -> Policy {
        Policy {
            ttl: Duration::from_secs(self.ttl_s),
            stale_while_revalidate: Duration::from_secs(self.stale_while_revalidate_s),
            stale_if_error: Duration::from_secs(self.stale_if_error_s),
            early_refresh_beta: self.early_refresh_beta,
        }
    }

    /// The placeholders of `path`, in order.
    pub fn placeholders(&self) -> Result<Vec<&str>, String> {
        let mut names = Vec::new();
        let mut rest = self.path.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let close = after
                .find('}')
                .ok_or_else(|| format!("path {:?} has an unclosed '{{'", self.path))?;
            names.push(&after[..close]);
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("path {:?} has an unopened '}}'", self.path));
        }
        Ok(names)
    }
}

/// The highest `gateway.max_retry_after_s` accepted: a day. Past that a pause is an outage.
pub const MAX_RETRY_AFTER_LIMIT_S: u64 = 86_400;

/// The lowest non-zero `per_second`: one call in 1000 s. Slower is a typo, and its interval would
/// not fit a timer.
pub const MIN_PER_SECOND: f64 = 0.001;

pub const SCALARS: [&str; 5] = ["String", "Int", "Float", "Boolean", "ID"];

/// `[Item]` → (`Item`, true); `Item` → (`Item`, false).
pub fn element_type(type_name: &str) -> (&str, bool) {
    match type_name
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
    {
        Some(inner) => (inner, true),
        None => (type_name, false),
    }
}

fn is_graphql_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

impl GatewayConfig {
    /// Every mistake that would make the schema wrong, named; Ok when it can be served.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_depth == 0 || self.max_complexity == 0 || self.cache_bytes == 0 {
            return Err(
                "gateway.max_depth, max_complexity and cache_bytes must be at least 1".into(),
            );
        }
        if !(1..=MAX_RETRY_AFTER_LIMIT_S).contains(&self.max_retry_after_s) {
            return Err(format!(
                "gateway.max_retry_after_s must be between 1 and {MAX_RETRY_AFTER_LIMIT_S} (a day)"
            ));
        }
        let mut origins = HashSet::new();
        for origin in &self.origins {
            let at = format!("gateway origin {:?}", origin.name);
            if !is_graphql_name(&origin.name) || !origins.insert(origin.name.as_str()) {
                return Err(format!(
                    "{at}: a unique name of letters, digits and '_' is required"
                ));
            }
            let url = origin.base_url.as_str();
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains('?') {
                return Err(format!(
                    "{at}: base_url must be an http:// or https:// URL without a query"
                ));
            }
            if origin.concurrency == 0 || origin.burst == 0 || origin.timeout_ms == 0 {
                return Err(format!(
                    "{at}: concurrency, burst and timeout_ms must be at least 1"
                ));
            }
            if !(origin.per_second == 0.0
                || (origin.per_second.is_finite() && origin.per_second >= MIN_PER_SECOND))
            {
                return Err(format!(
                    "{at}: per_second must be 0 (no limit) or at least {MIN_PER_SECOND}"
                ));
            }
            if origin.default_retry_after_ms > self.max_retry_after_s.saturating_mul(1000) {
                return Err(format!(
                    "{at}: default_retry_after_ms must not exceed gateway.max_retry_after_s"
                ));
            }
        }
        let mut types = HashSet::new();
        for t in &self.types {
            if !is_graphql_name(&t.name)
                || SCALARS.contains(&t.name.as_str())
                || t.name == "Query"
                || !types.insert(t.name.as_str())
            {
                return Err(format!(
                    "gateway type {:?}: a unique name, not a scalar's nor Query",
                    t.name
                ));
            }
        }
        let known = |type_name: &str| {
            let (inner, _) = element_type(type_name);
            SCALARS.contains(&inner) || types.contains(inner)
        };
        for t in &self.types {
            if t.fields.is_empty() {
                return Err(format!("gateway type {:?}: it has no fields", t.name));
            }
            for (field, type_name) in &t.fields {
                if !is_graphql_name(field) || !known(type_name) {
                    return Err(format!(
                        "gateway type {:?}, field {field:?}: unknown type {type_name:?}",
                        t.name
                    ));
                }
            }
        }
        let mut fields = HashSet::new();
        for field in &self.fields {
            let at = format!("gateway field {:?}", field.name);
            if !is_graphql_name(&field.name) || !fields.insert(field.name.as_str()) {
                return Err(format!(
                    "{at}: a unique name of letters, digits and '_' is required"
                ));
            }
            if !origins.contains(field.origin.as_str()) {
                return Err(format!("{at}: no origin is named {:?}", field.origin));
            }
            if !field.path.starts_with('/') {
                return Err(format!("{at}: path must start with '/'"));
            }
            for placeholder in field.placeholders().map_err(|e| format!("{at}: {e}"))? {
                if !field.arguments.iter().any(|a| a == placeholder) {
                    return Err(format!(
                        "{at}: path placeholder {{{placeholder}}} is not an argument"
                    ));
                }
            }
            let mut arguments = HashSet::new();
            for argument in &field.arguments {
                if !is_graphql_name(argument) || !arguments.insert(argument) {
                    return Err(format!("{at}: argument {argument:?} must be a unique name"));
                }
            }
            // The URL it makes, as the url crate normalises it (no '.' or '..' segments).
            if let Some(origin) = self.origins.iter().find(|o| o.name == field.origin) {
                OriginUrl::new(&origin.base_url, &field.path, &field.arguments)
                    .map_err(|e| format!("{at}: {e}"))?;
            }
            if !known(&field.returns) {
                return Err(format!("{at}: unknown return type {:?}", field.returns));
            }
            if !field.select.is_empty() && !field.select.starts_with('/') {
                return Err(format!(
                    "{at}: select must be a JSON pointer (\"/items\") or empty"
                ));
            }
            if field.ttl_s == 0 {
                return Err(format!("{at}: ttl_s must be at least 1"));
            }
            if !(field.early_refresh_beta.is_finite() && field.early_refresh_beta >= 0.0) {
                return Err(format!("{at}: early_refresh_beta must be 0 or more"));
            }
        }
        Ok(())
    }
}
