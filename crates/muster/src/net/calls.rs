//! Nakama's client API calls as Muster serves them, one table for every edge that needs to
//! know a call: its name (the method of the gRPC service `nakama.api.Nakama`, the name a
//! module's hooks register under, the `call` label of the API's metrics) and its REST binding,
//! as Nakama's `google.api.http` rule gives it (method and path template per binding, and which
//! of the request's fields the body is; the rest come from the path and the query). The REST
//! routes serve these paths, the gRPC edge transcodes a call onto its first binding, and the
//! hooks read a REST request back into the call's request. A test checks the table against
//! Nakama's `apigrpc.proto`.

use axum::http::{Method, StatusCode};
use tonic::Code;

/// Where a call's request sits in a REST request besides the path and the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body: every field is in the path or the query.
    None,
    /// The body is the whole request (less the path's fields).
    Whole,
    /// The body is this field of the request.
    Field(&'static str),
}

/// Which edge a call came in by (a request extension the gRPC edge sets; absent: REST), for
/// the API's metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Rest,
    Grpc,
}

impl Transport {
    pub fn label(self) -> &'static str {
        match self {
            Transport::Rest => "rest",
            Transport::Grpc => "grpc",
        }
    }
}

/// One call of Nakama's API.
#[derive(Debug)]
pub struct Call {
    pub name: &'static str,
    /// Its REST bindings, the main one first.
    pub bindings: &'static [(Method, &'static str)],
    pub body: Body,
}

const fn call(name: &'static str, bindings: &'static [(Method, &'static str)], body: Body) -> Call {
    Call {
        name,
        bindings,
        body,
    }
}

/// Every call Muster serves, in the order of `muster-proto`'s `proto/nakama/api.proto`.
pub const CALLS: &[Call] = &[
    call(
        "AuthenticateCustom",
        &[(Method::POST, "/v2/account/authenticate/custom")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateDevice",
        &[(Method::POST, "/v2/account/authenticate/device")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateEmail",
        &[(Method::POST, "/v2/account/authenticate/email")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateApple",
        &[(Method::POST, "/v2/account/authenticate/apple")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateFacebook",
        &[(Method::POST, "/v2/account/authenticate/facebook")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateFacebookInstantGame",
        &[(Method::POST, "/v2/account/authenticate/facebookinstantgame")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateGameCenter",
        &[(Method::POST, "/v2/account/authenticate/gamecenter")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateGoogle",
        &[(Method::POST, "/v2/account/authenticate/google")],
        Body::Field("account"),
    ),
    call(
        "AuthenticateSteam",
        &[(Method::POST, "/v2/account/authenticate/steam")],
        Body::Field("account"),
    ),
    call(
        "SessionRefresh",
        &[(Method::POST, "/v2/account/session/refresh")],
        Body::Whole,
    ),
    call(
        "SessionLogout",
        &[(Method::POST, "/v2/session/logout")],
        Body::Whole,
    ),
    call("GetAccount", &[(Method::GET, "/v2/account")], Body::None),
    call(
        "UpdateAccount",
        &[(Method::PUT, "/v2/account")],
        Body::Whole,
    ),
    call(
        "DeleteAccount",
        &[(Method::DELETE, "/v2/account")],
        Body::None,
    ),
    call(
        "LinkCustom",
        &[(Method::POST, "/v2/account/link/custom")],
        Body::Whole,
    ),
    call(
        "LinkDevice",
        &[(Method::POST, "/v2/account/link/device")],
        Body::Whole,
    ),
    call(
        "LinkEmail",
        &[(Method::POST, "/v2/account/link/email")],
        Body::Whole,
    ),
    call(
        "UnlinkCustom",
        &[(Method::POST, "/v2/account/unlink/custom")],
        Body::Whole,
    ),
    call(
        "UnlinkDevice",
        &[(Method::POST, "/v2/account/unlink/device")],
        Body::Whole,
    ),
    call(
        "UnlinkEmail",
        &[(Method::POST, "/v2/account/unlink/email")],
        Body::Whole,
    ),
    call(
        "LinkApple",
        &[(Method::POST, "/v2/account/link/apple")],
        Body::Whole,
    ),
    call(
        "LinkFacebook",
        &[(Method::POST, "/v2/account/link/facebook")],
        Body::Field("account"),
    ),
    call(
        "LinkFacebookInstantGame",
        &[(Method::POST, "/v2/account/link/facebookinstantgame")],
        Body::Whole,
    ),
    call(
        "LinkGameCenter",
        &[(Method::POST, "/v2/account/link/gamecenter")],
        Body::Whole,
    ),
    call(
        "LinkGoogle",
        &[(Method::POST, "/v2/account/link/google")],
        Body::Whole,
    ),
    call(
        "LinkSteam",
        &[(Method::POST, "/v2/account/link/steam")],
        Body::Whole,
    ),
    call(
        "UnlinkApple",
        &[(Method::POST, "/v2/account/unlink/apple")],
        Body::Whole,
    ),
    call(
        "UnlinkFacebook",
        &[(Method::POST, "/v2/account/unlink/facebook")],
        Body::Whole,
    ),
    call(
        "UnlinkFacebookInstantGame",
        &[(Method::POST, "/v2/account/unlink/facebookinstantgame")],
        Body::Whole,
    ),
    call(
        "UnlinkGameCenter",
        &[(Method::POST, "/v2/account/unlink/gamecenter")],
        Body::Whole,
    ),
    call(
        "UnlinkGoogle",
        &[(Method::POST, "/v2/account/unlink/google")],
        Body::Whole,
    ),
    call(
        "UnlinkSteam",
        &[(Method::POST, "/v2/account/unlink/steam")],
        Body::Whole,
    ),
    call("GetUsers", &[(Method::GET, "/v2/user")], Body::None),
    call("ListFriends", &[(Method::GET, "/v2/friend")], Body::None),
    call("AddFriends", &[(Method::POST, "/v2/friend")], Body::None),
    call(
        "DeleteFriends",
        &[(Method::DELETE, "/v2/friend")],
        Body::None,
    ),
    call(
        "BlockFriends",
        &[(Method::POST, "/v2/friend/block")],
        Body::None,
    ),
    call(
        "ListFriendsOfFriends",
        &[(Method::GET, "/v2/friend/friends")],
        Body::None,
    ),
    call(
        "ImportFacebookFriends",
        &[(Method::POST, "/v2/friend/facebook")],
        Body::Field("account"),
    ),
    call(
        "ImportSteamFriends",
        &[(Method::POST, "/v2/friend/steam")],
        Body::Field("account"),
    ),
    call("ListGroups", &[(Method::GET, "/v2/group")], Body::None),
    call("CreateGroup", &[(Method::POST, "/v2/group")], Body::Whole),
    call(
        "UpdateGroup",
        &[(Method::PUT, "/v2/group/{group_id}")],
        Body::Whole,
    ),
    call(
        "DeleteGroup",
        &[(Method::DELETE, "/v2/group/{group_id}")],
        Body::None,
    ),
    call(
        "JoinGroup",
        &[(Method::POST, "/v2/group/{group_id}/join")],
        Body::None,
    ),
    call(
        "LeaveGroup",
        &[(Method::POST, "/v2/group/{group_id}/leave")],
        Body::None,
    ),
    call(
        "AddGroupUsers",
        &[(Method::POST, "/v2/group/{group_id}/add")],
        Body::None,
    ),
    call(
        "KickGroupUsers",
        &[(Method::POST, "/v2/group/{group_id}/kick")],
        Body::None,
    ),
    call(
        "BanGroupUsers",
        &[(Method::POST, "/v2/group/{group_id}/ban")],
        Body::None,
    ),
    call(
        "PromoteGroupUsers",
        &[(Method::POST, "/v2/group/{group_id}/promote")],
        Body::None,
    ),
    call(
        "DemoteGroupUsers",
        &[(Method::POST, "/v2/group/{group_id}/demote")],
        Body::None,
    ),
    call(
        "ListGroupUsers",
        &[(Method::GET, "/v2/group/{group_id}/user")],
        Body::None,
    ),
    call(
        "ListUserGroups",
        &[(Method::GET, "/v2/user/{user_id}/group")],
        Body::None,
    ),
    call("ListMatches", &[(Method::GET, "/v2/match")], Body::None),
    call(
        "ListNotifications",
        &[(Method::GET, "/v2/notification")],
        Body::None,
    ),
    call(
        "DeleteNotifications",
        &[(Method::DELETE, "/v2/notification")],
        Body::None,
    ),
    call(
        "ListChannelMessages",
        &[(Method::GET, "/v2/channel/{channel_id}")],
        Body::None,
    ),
    call(
        "WriteStorageObjects",
        &[(Method::PUT, "/v2/storage")],
        Body::Whole,
    ),
    call(
        "ReadStorageObjects",
        &[(Method::POST, "/v2/storage")],
        Body::Whole,
    ),
    call(
        "DeleteStorageObjects",
        &[(Method::PUT, "/v2/storage/delete")],
        Body::Whole,
    ),
    call(
        "ListStorageObjects",
        &[
            (Method::GET, "/v2/storage/{collection}"),
            (Method::GET, "/v2/storage/{collection}/{user_id}"),
        ],
        Body::None,
    ),
    call(
        "ListLeaderboardRecords",
        &[(Method::GET, "/v2/leaderboard/{leaderboard_id}")],
        Body::None,
    ),
    call(
        "WriteLeaderboardRecord",
        &[(Method::POST, "/v2/leaderboard/{leaderboard_id}")],
        Body::Field("record"),
    ),
    call(
        "DeleteLeaderboardRecord",
        &[(Method::DELETE, "/v2/leaderboard/{leaderboard_id}")],
        Body::None,
    ),
    call(
        "ListLeaderboardRecordsAroundOwner",
        &[(
            Method::GET,
            "/v2/leaderboard/{leaderboard_id}/owner/{owner_id}",
        )],
        Body::None,
    ),
    call(
        "ListTournaments",
        &[(Method::GET, "/v2/tournament")],
        Body::None,
    ),
    call(
        "ListTournamentRecords",
        &[(Method::GET, "/v2/tournament/{tournament_id}")],
        Body::None,
    ),
    call(
        "WriteTournamentRecord",
        &[
            (Method::PUT, "/v2/tournament/{tournament_id}"),
            (Method::POST, "/v2/tournament/{tournament_id}"),
        ],
        Body::Field("record"),
    ),
    call(
        "JoinTournament",
        &[(Method::POST, "/v2/tournament/{tournament_id}/join")],
        Body::None,
    ),
    call(
        "ListTournamentRecordsAroundOwner",
        &[(
            Method::GET,
            "/v2/tournament/{tournament_id}/owner/{owner_id}",
        )],
        Body::None,
    ),
    call(
        "ValidatePurchaseApple",
        &[(Method::POST, "/v2/iap/purchase/apple")],
        Body::Whole,
    ),
    call(
        "ValidateSubscriptionApple",
        &[(Method::POST, "/v2/iap/subscription/apple")],
        Body::Whole,
    ),
    call(
        "ValidatePurchaseGoogle",
        &[(Method::POST, "/v2/iap/purchase/google")],
        Body::Whole,
    ),
    call(
        "ValidateSubscriptionGoogle",
        &[(Method::POST, "/v2/iap/subscription/google")],
        Body::Whole,
    ),
    call(
        "ValidatePurchaseHuawei",
        &[(Method::POST, "/v2/iap/purchase/huawei")],
        Body::Whole,
    ),
    call(
        "ValidatePurchaseFacebookInstant",
        &[(Method::POST, "/v2/iap/purchase/facebookinstant")],
        Body::Whole,
    ),
    call(
        "GetSubscription",
        &[(Method::GET, "/v2/iap/subscription/{product_id}")],
        Body::None,
    ),
    call(
        "ListSubscriptions",
        &[(Method::POST, "/v2/iap/subscription")],
        Body::Whole,
    ),
    call(
        "RpcFunc",
        &[
            (Method::POST, "/v2/rpc/{id}"),
            (Method::GET, "/v2/rpc/{id}"),
        ],
        Body::Field("payload"),
    ),
    call("Healthcheck", &[(Method::GET, "/healthcheck")], Body::None),
];

/// The call a REST route (its template, as the router matched it) and method serve.
pub fn by_route(method: &Method, route: &str) -> Option<&'static Call> {
    CALLS.iter().find(|call| {
        call.bindings
            .iter()
            .any(|(m, path)| m == method && *path == route)
    })
}

/// A call by its name.
pub fn by_name(name: &str) -> Option<&'static Call> {
    CALLS.iter().find(|call| call.name == name)
}

/// The gRPC code of an HTTP status, as Nakama's gateway maps them back.
pub fn code_of_status(status: StatusCode) -> Code {
    match status.as_u16() {
        200..=299 => Code::Ok,
        400 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        408 => Code::DeadlineExceeded,
        409 => Code::AlreadyExists,
        412 => Code::FailedPrecondition,
        413 | 429 => Code::ResourceExhausted,
        499 => Code::Cancelled,
        501 => Code::Unimplemented,
        503 => Code::Unavailable,
        504 => Code::DeadlineExceeded,
        _ => Code::Internal,
    }
}

/// A gRPC code's canonical name (the metrics' `code` label).
pub fn code_name(code: tonic::Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bindings_are_unique() {
        for (i, a) in CALLS.iter().enumerate() {
            for b in &CALLS[i + 1..] {
                assert_ne!(a.name, b.name);
                for binding in a.bindings {
                    assert!(
                        !b.bindings.contains(binding),
                        "{} and {} share {binding:?}",
                        a.name,
                        b.name
                    );
                }
            }
        }
    }

    /// Each call's bindings as Nakama's `apigrpc.proto` declares them (its `google.api.http`
    /// options, read from the text: the method, the path, any `additional_bindings`, `body`).
    fn nakamas_bindings(text: &str, name: &str) -> (Vec<(String, String)>, String) {
        // Nakama writes both `rpc Name (` and `rpc Name(`.
        let start = text
            .find(&format!("rpc {name} ("))
            .or_else(|| text.find(&format!("rpc {name}(")))
            .unwrap_or_else(|| panic!("Nakama has no call {name}"));
        let rest = &text[start..];
        let end = rest[1..].find("\n  rpc ").map_or(rest.len(), |e| e + 1);
        let block = &rest[..end];
        let mut bindings = Vec::new();
        let mut body = String::new();
        for line in block.lines().map(str::trim) {
            let line = line
                .trim_start_matches("option (google.api.http)")
                .trim_start_matches('.')
                .trim_start_matches("= {")
                .trim();
            for verb in ["get", "post", "put", "delete", "patch"] {
                for prefix in [format!("{verb}:"), format!("{verb} =")] {
                    if let Some(path) = line.strip_prefix(prefix.as_str()) {
                        let path = path.trim().trim_end_matches([',', ';']).trim_matches('"');
                        bindings.push((verb.to_uppercase(), path.to_owned()));
                    }
                }
            }
            if let Some(field) = line.strip_prefix("body:") {
                body = field
                    .trim()
                    .trim_end_matches([',', ';'])
                    .trim_matches('"')
                    .to_owned();
            }
        }
        (bindings, body)
    }

    #[test]
    #[ignore = "needs Nakama's protos (NAKAMA_DIR)"]
    fn the_table_is_nakamas_http_rules() {
        let dir = std::env::var("NAKAMA_DIR")
            .expect("this test needs Nakama's protos: set NAKAMA_DIR (scripts/test fetches them)");
        let text = std::fs::read_to_string(format!("{dir}/apigrpc/apigrpc.proto"))
            .expect("apigrpc.proto reads");
        for call in CALLS {
            let (bindings, body) = nakamas_bindings(&text, call.name);
            let ours: Vec<(String, String)> = call
                .bindings
                .iter()
                .map(|(m, p)| (m.as_str().to_owned(), (*p).to_owned()))
                .collect();
            assert_eq!(ours, bindings, "{}'s bindings", call.name);
            let ours = match call.body {
                Body::None => "",
                Body::Whole => "*",
                Body::Field(field) => field,
            };
            assert_eq!(ours, body, "{}'s body", call.name);
        }
    }

    #[test]
    fn a_route_finds_its_call() {
        let call = by_route(&Method::GET, "/v2/storage/{collection}/{user_id}").expect("listed");
        assert_eq!(call.name, "ListStorageObjects");
        assert_eq!(
            by_name("RpcFunc").map(|c| c.body),
            Some(Body::Field("payload"))
        );
        assert!(by_route(&Method::PATCH, "/v2/account").is_none());
    }
}
