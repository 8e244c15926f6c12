//! The socket's `rpc` envelope: calls a server function as the socket's user and answers with an
//! `rpc` envelope carrying the result (`{"cid":"4","rpc":{"id":"wallet_spend","payload":"..."}}`)
//! or an `error` envelope with Nakama's codes: 3 bad input (no function id, or a payload the
//! function refuses as invalid), 6 function not found, 7 function failed (the message says why,
//! and `context.grpc_code` gives the function's gRPC code, e.g. 9 for an overdraw).

use std::collections::HashMap;

use muster_proto::realtime::{error_code, Envelope, Message, Rpc};

use crate::functions::CallError;
use crate::functions::{Caller, RpcCode};
use crate::session::Session;
use crate::state::AppState;

/// Runs `rpc` for `session` and returns the answer envelope.
pub async fn handle(cid: String, rpc: Rpc, session: &Session, state: &AppState) -> Envelope {
    let caller = Caller {
        user_id: session.user_id,
        username: session.username.to_string(),
    };
    match state.rpc.call(&rpc.id, Some(&caller), &rpc.payload).await {
        Ok(payload) => Envelope::new(
            cid,
            Message::Rpc(Rpc {
                id: rpc.id,
                payload,
                http_key: String::new(),
            }),
        ),
        Err(CallError::MissingId) => {
            Envelope::error(cid, error_code::BAD_INPUT, "RPC ID must be set.")
        }
        Err(CallError::NotFound) => Envelope::error(
            cid,
            error_code::RUNTIME_FUNCTION_NOT_FOUND,
            "RPC function not found.",
        ),
        Err(CallError::Failed(error)) => {
            let code = if error.code == RpcCode::InvalidArgument {
                error_code::BAD_INPUT
            } else {
                error_code::RUNTIME_FUNCTION_EXCEPTION
            };
            let mut envelope = Envelope::error(cid, code, error.message);
            if let Some(Message::Error(e)) = envelope.message.as_mut() {
                e.context =
                    HashMap::from([("grpc_code".to_string(), error.code.grpc().to_string())]);
            }
            envelope
        }
    }
}
