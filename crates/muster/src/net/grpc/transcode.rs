//! One gRPC call as the REST request it is: the request message written in protobuf's JSON
//! mapping (proto field names, as Nakama's gateway reads them), its path fields into the
//! binding's path, its body field (or the whole rest) as the JSON body, every other field into
//! the query; the metadata as headers (`authorization` among them), the peer as the client's
//! address. The REST answer comes back the same way: a success's JSON read into the answer
//! message, an error's `{code, message}` as the gRPC status of that code.

use std::net::SocketAddr;

use axum::body::{to_bytes, Body};
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, HeaderValue, Request, StatusCode};
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use tonic::{Code, Response, Status};
use tower::ServiceExt as _;

use crate::net::calls::{self, code_of_status, Body as CallBody, Call, Transport};

/// Largest REST answer read back (answers are bounded by the API's own page limits).
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// The gRPC service's state: the REST API it transcodes onto.
#[derive(Clone)]
pub struct Edge {
    api: Router,
    max_body_bytes: usize,
}

impl Edge {
    pub fn new(api: Router, max_body_bytes: usize) -> Self {
        Edge {
            api,
            max_body_bytes,
        }
    }

    /// Serves the call named `name` with `request`.
    pub async fn call<Q, A>(
        &self,
        name: &str,
        request: tonic::Request<Q>,
    ) -> Result<Response<A>, Status>
    where
        Q: Serialize,
        A: DeserializeOwned,
    {
        let call = calls::by_name(name)
            .ok_or_else(|| Status::unimplemented(format!("{name} is not served by Muster")))?;
        let peer = request.remote_addr();
        let (metadata, _, message) = request.into_parts();
        let fields = match serde_json::to_value(&message) {
            Ok(Value::Object(fields)) => fields,
            Ok(_) => Map::new(),
            Err(error) => return Err(Status::internal(format!("request unreadable: {error}"))),
        };
        let rest = rest_request(call, fields, metadata.into_headers(), peer)?;
        let answer = self
            .api
            .clone()
            .oneshot(rest)
            .await
            .unwrap_or_else(|never| match never {});
        let status = answer.status();
        let bytes = to_bytes(
            answer.into_body(),
            MAX_ANSWER_BYTES.max(self.max_body_bytes),
        )
        .await
        .map_err(|error| Status::internal(format!("answer unreadable: {error}")))?;
        if !status.is_success() {
            return Err(status_of(status, &bytes));
        }
        let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
            &b"{}"[..]
        } else {
            &bytes[..]
        };
        serde_json::from_slice(bytes)
            .map(Response::new)
            .map_err(|error| Status::internal(format!("answer unreadable: {error}")))
    }
}

/// The REST request of `call` with the request's `fields`.
fn rest_request(
    call: &Call,
    mut fields: Map<String, Value>,
    mut headers: HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<Request<Body>, Status> {
    let (method, template) = binding(call, &fields);
    let mut path = String::with_capacity(template.len() + 32);
    for segment in template.split('/').skip(1) {
        path.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(field) => {
                let value = fields.remove(field).map(|v| scalar(&v)).unwrap_or_default();
                if value.is_empty() {
                    return Err(Status::invalid_argument(format!("{field} must be set.")));
                }
                path.extend(percent_encoding::utf8_percent_encode(
                    &value,
                    percent_encoding::NON_ALPHANUMERIC,
                ));
            }
            None => path.push_str(segment),
        }
    }
    let body = match call.body {
        CallBody::None => None,
        CallBody::Whole => Some(Value::Object(std::mem::take(&mut fields))),
        CallBody::Field(field) => Some(fields.remove(field).unwrap_or_else(|| empty_body(field))),
    };
    let query = query_string(&fields);
    if !query.is_empty() {
        path.push('?');
        path.push_str(&query);
    }
    // The transport's own headers are not the call's.
    headers.remove(header::CONTENT_TYPE);
    headers.remove(header::TE);
    headers.remove(header::CONTENT_LENGTH);
    let grpc_headers: Vec<_> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("grpc-"))
        .cloned()
        .collect();
    for name in grpc_headers {
        headers.remove(name);
    }
    let body = match body {
        Some(value) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Body::from(serde_json::to_vec(&value).unwrap_or_default())
        }
        None => Body::empty(),
    };
    let mut request = Request::builder()
        .method(method.clone())
        .uri(path)
        .body(body)
        .map_err(|error| Status::invalid_argument(format!("bad request: {error}")))?;
    *request.headers_mut() = headers;
    request.extensions_mut().insert(Transport::Grpc);
    if let Some(peer) = peer {
        request.extensions_mut().insert(ConnectInfo(peer));
    }
    Ok(request)
}

/// The binding with the most path fields, all of which the request sets
/// (`/v2/storage/{collection}/{user_id}` when it names a user), else the call's main one.
fn binding<'a>(
    call: &'a Call,
    fields: &Map<String, Value>,
) -> &'a (axum::http::Method, &'static str) {
    let path_fields = |template: &str| -> Option<usize> {
        let mut count = 0;
        for segment in template.split('/') {
            if let Some(field) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                if fields.get(field).is_none_or(|v| scalar(v).is_empty()) {
                    return None;
                }
                count += 1;
            }
        }
        Some(count)
    };
    let mut best = &call.bindings[0];
    let mut most = None;
    for binding in call.bindings {
        if let Some(count) = path_fields(binding.1) {
            if most.is_none_or(|most| count > most) {
                (best, most) = (binding, Some(count));
            }
        }
    }
    best
}

/// What an absent body field is in JSON: a string payload is `""`, a message `{}`.
fn empty_body(field: &str) -> Value {
    match field {
        "payload" => Value::String(String::new()),
        _ => Value::Object(Map::new()),
    }
}

/// A path or query value as text.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The remaining fields as a query: a repeated field as the key repeated (as Nakama's gateway
/// reads it).
fn query_string(fields: &Map<String, Value>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        match value {
            Value::Array(values) => {
                for value in values {
                    query.append_pair(name, &scalar(value));
                }
            }
            value => {
                query.append_pair(name, &scalar(value));
            }
        }
    }
    query.finish()
}

/// A REST error as a gRPC status: Nakama's body carries the gRPC code; a body without one (a
/// limit's or the router's own answer) is read from the HTTP status.
fn status_of(status: StatusCode, body: &[u8]) -> Status {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message").or_else(|| v.get("error")))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let code = parsed
        .as_ref()
        .and_then(|v| v.get("code"))
        .and_then(Value::as_i64)
        .and_then(|code| i32::try_from(code).ok())
        .map(Code::from_i32)
        .filter(|code| *code != Code::Ok)
        .unwrap_or_else(|| code_of_status(status));
    Status::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn an_authenticate_call_puts_its_account_in_the_body_and_the_rest_in_the_query() {
        let call = calls::by_name("AuthenticateDevice").expect("served");
        let request = rest_request(
            call,
            fields(
                serde_json::json!({"account": {"id": "abc"}, "create": true, "username": "a b"}),
            ),
            HeaderMap::new(),
            None,
        )
        .expect("a request");
        assert_eq!(request.method(), axum::http::Method::POST);
        assert_eq!(
            request.uri().to_string(),
            "/v2/account/authenticate/device?create=true&username=a+b"
        );
    }

    #[test]
    fn a_path_field_picks_the_binding_and_is_escaped() {
        let call = calls::by_name("ListStorageObjects").expect("served");
        let with_user = rest_request(
            call,
            fields(serde_json::json!({"collection": "a/b", "user_id": "u", "limit": 3})),
            HeaderMap::new(),
            None,
        )
        .expect("a request");
        assert_eq!(with_user.uri().to_string(), "/v2/storage/a%2Fb/u?limit=3");
        let without = rest_request(
            call,
            fields(serde_json::json!({"collection": "c"})),
            HeaderMap::new(),
            None,
        )
        .expect("a request");
        assert_eq!(without.uri().to_string(), "/v2/storage/c");
        let missing = rest_request(call, Map::new(), HeaderMap::new(), None);
        assert_eq!(missing.err().map(|s| s.code()), Some(Code::InvalidArgument));
    }

    #[test]
    fn an_error_keeps_nakamas_code_and_message() {
        let status = status_of(
            StatusCode::NOT_FOUND,
            br#"{"error":"x","message":"Leaderboard not found.","code":5}"#,
        );
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "Leaderboard not found.");
        let limited = status_of(StatusCode::TOO_MANY_REQUESTS, b"slow down");
        assert_eq!(limited.code(), Code::ResourceExhausted);
    }
}
