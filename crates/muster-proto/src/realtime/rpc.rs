//! Server functions called over the socket (Nakama's `api.Rpc`, also the body of the REST call).

use serde::{Deserialize, Serialize};

use crate::wire::nullable;

/// A call of the server function `id` with a payload (usually JSON), and its answer.
#[derive(Clone, PartialEq, Eq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Rpc {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub payload: String,
    /// The HTTP key, for server-to-server calls over REST; ignored on the socket.
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "httpKey")]
    pub http_key: String,
}
