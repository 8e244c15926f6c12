//! The read gateway's engine: a cache in front of slow, fragile origins (third-party REST APIs,
//! store catalogues, live-event feeds) that never stampedes them.
//!
//! - [`cache::Cache`]: bounded in bytes, a time to live per entry, and every stampede remedy at
//!   once: single-flight per key, stale-while-revalidate, probabilistic early refresh (XFetch),
//!   stale-if-error.
//! - [`origin::Origin`]: what may reach one origin — a concurrency limit, a rate budget, and
//!   the pause an origin asks for with `Retry-After`.
//!
//! The GraphQL front (`/graphql`), its configuration and the mock origin build on these.

pub mod cache;
pub mod origin;
