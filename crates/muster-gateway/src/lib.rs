//! The read gateway's engine: a cache in front of slow, fragile origins (third-party REST APIs,
//! store catalogues, live-event feeds) that never stampedes them.
//!
//! - [`cache::Cache`]: bounded in bytes, a time to live per entry, and every stampede remedy at
//!   once: single-flight per key, stale-while-revalidate, probabilistic early refresh (XFetch),
//!   stale-if-error.
//! - [`origin::Origin`]: what may reach one origin — a concurrency limit, a rate budget, and
//!   the pause an origin asks for with `Retry-After`.
//!
//! - [`origin_url::OriginUrl`]: the URL an origin receives, each argument filling its own place
//!   and never changing the path.
//! - [`fetch`]: one GET to an origin, its answer read within a size limit as it streams in, and
//!   [`weigh`]: what that answer, parsed, holds in memory (what the cache is bounded by).
//!
//! - [`config::GatewayConfig`]: origins, object types and query fields, validated as a whole.
//! - [`schema::Gateway`]: the GraphQL schema built from it, every field resolved through the
//!   cache and its origin's budget.
//! - [`page`]: the self-contained query page served on `GET`, loading nothing from anywhere.
//! - [`mock::MockOrigin`]: a mock origin for tests and benches (delay, error rate, counts).

pub mod cache;
pub mod config;
pub mod fetch;
pub mod mock;
pub mod origin;
pub mod origin_url;
pub mod page;
pub mod schema;
pub mod weigh;

/// The HTTP client for origins: pooled connections, and no redirects followed (an origin is a
/// configured URL; a redirect elsewhere is an error, not a new destination).
pub fn origin_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(64)
        .build()
        .unwrap_or_default()
}
