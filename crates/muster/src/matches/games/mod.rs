//! Authoritative games built into Muster, registered by [`super::handler::Handlers::builtin`].

pub mod arena;
