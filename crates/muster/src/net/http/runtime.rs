//! `POST /v2/runtime/reload` (the HTTP key only): loads the JavaScript module's bundle again on
//! this node (what SIGHUP does), answering what the new bundle registered, or why it was
//! refused (the old bundle then stays). `muster runtime reload` calls it.

use axum::extract::State;
use axum::Json;
use serde_json::json;

use super::auth::RpcCaller;
use super::error::ApiError;
use super::response::Done;
use crate::net::state::AppState;

pub async fn reload(State(state): State<AppState>, caller: RpcCaller) -> Done {
    if !matches!(caller, RpcCaller::Server) {
        return Err(ApiError::PermissionDenied(
            "Reloading the runtime needs the HTTP key.".into(),
        ));
    }
    let Some(module) = state.module.clone() else {
        return Err(ApiError::FailedPrecondition(
            "No JavaScript module is loaded (runtime.path is empty).".into(),
        ));
    };
    let reloaded = tokio::task::spawn_blocking(move || module.reload().map(|()| module))
        .await
        .map_err(|_| ApiError::Internal)?;
    match reloaded {
        Ok(module) => {
            let registered = module.registered();
            Ok(Json(json!({
                "rpcs": registered.rpcs,
                "matches": registered.matches,
                "before": registered.before,
                "after": registered.after,
                "rt_before": registered.rt_before,
                "rt_after": registered.rt_after,
            })))
        }
        Err(error) => Err(ApiError::InvalidArgument(format!(
            "{error}; the module in force is unchanged."
        ))),
    }
}
