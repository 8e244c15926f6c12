//! Authoritative games built into Muster, registered by [`Handlers::builtin`].

pub(crate) mod arena;

use super::handler::Handlers;

impl Handlers {
    /// The handlers built into Muster: `arena` (see `arena`).
    pub fn builtin() -> Handlers {
        let mut handlers = Handlers::default();
        handlers.register("arena", || Box::new(arena::Arena::default()));
        handlers
    }
}
