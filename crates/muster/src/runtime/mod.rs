//! The game's server modules, as Nakama loads them: [`js`], a JavaScript module (its RPCs are
//! server functions, its match handlers match handlers, its hooks wrap API calls and realtime
//! messages), over the services ([`crate::services::Services`]) through `nk`.

pub(crate) mod js;
