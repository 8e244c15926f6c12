//! JSON bodies of the REST API, named and shaped as Nakama's gRPC gateway renders them
//! (proto field names, unpopulated fields omitted) so Nakama's client SDKs read them unchanged.

mod group;
mod leaderboard;
mod social;
mod storage;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use group::{
    CreateGroupRequest, Group, GroupList, GroupUser, GroupUserList, UpdateGroupRequest, UserGroup,
    UserGroupList,
};
pub use leaderboard::{
    LeaderboardRecord, LeaderboardRecordList, LeaderboardRecordWrite, Tournament, TournamentList,
};
pub use social::{AccountFacebookInstantGame, AccountGameCenter, AccountToken};
pub use storage::{
    DeleteStorageObjectId, DeleteStorageObjectsRequest, ReadStorageObjectId,
    ReadStorageObjectsRequest, StorageObject, StorageObjectAck, StorageObjectAcks,
    StorageObjectList, StorageObjects, WriteStorageObject, WriteStorageObjectsRequest,
};

fn is_false(value: &bool) -> bool {
    !*value
}

/// The answer to every authenticate and refresh call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Session {
    pub token: String,
    #[serde(alias = "refreshToken")]
    pub refresh_token: String,
    /// True only when this call created the account.
    #[serde(default, skip_serializing_if = "is_false")]
    pub created: bool,
}

/// Body of `POST /v2/account/authenticate/device` and `/custom`: an opaque identifier.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthenticateIdRequest {
    pub id: String,
    /// Session variables copied into the token's `vrs` claim.
    pub vars: HashMap<String, String>,
}

/// Body of `POST /v2/account/authenticate/email`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthenticateEmailRequest {
    pub email: String,
    pub password: String,
    pub vars: HashMap<String, String>,
}

/// Body of `POST /v2/account/session/refresh`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionRefreshRequest {
    /// The refresh token.
    pub token: String,
    /// Replaces the session variables when not empty.
    pub vars: HashMap<String, String>,
}

/// Body of `POST /v2/session/logout`: the tokens to revoke.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionLogoutRequest {
    pub token: String,
    #[serde(alias = "refreshToken")]
    pub refresh_token: String,
}

/// A user as others may see it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct User {
    pub id: String,
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "displayName")]
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "avatarUrl")]
    pub avatar_url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "langTag")]
    pub lang_tag: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub location: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub timezone: String,
    /// A JSON object, as a string (Nakama's convention).
    pub metadata: String,
    #[serde(skip_serializing_if = "is_false")]
    pub online: bool,
    /// RFC 3339 time the account was created.
    #[serde(alias = "createTime")]
    pub create_time: String,
    /// RFC 3339 time the account was last changed.
    #[serde(alias = "updateTime")]
    pub update_time: String,
    /// The account's ids at the identity providers (public, as in Nakama).
    #[serde(skip_serializing_if = "String::is_empty", alias = "facebookId")]
    pub facebook_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "googleId")]
    pub google_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "gamecenterId")]
    pub gamecenter_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "steamId")]
    pub steam_id: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        alias = "facebookInstantGameId"
    )]
    pub facebook_instant_game_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "appleId")]
    pub apple_id: String,
}

/// A device identifier linked to an account; also the body of `POST /v2/account/link/device`
/// and `/unlink/device`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountDevice {
    pub id: String,
    /// Session variables: read by authenticate calls, ignored by link and unlink (as Nakama).
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}

/// Body of `POST /v2/account/link/custom` and `/unlink/custom`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountCustom {
    pub id: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}

/// Body of `POST /v2/account/link/email` and `/unlink/email`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountEmail {
    pub email: String,
    pub password: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}

/// `GET /v2/user`: the accounts asked for, as others see them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Users {
    pub users: Vec<User>,
}

/// The caller's own account: `GET /v2/account`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Account {
    pub user: User,
    /// The wallet, a JSON object of currency to amount, as a string (Nakama's convention).
    pub wallet: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<AccountDevice>,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "customId")]
    pub custom_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "disableTime")]
    pub disable_time: Option<String>,
}

/// One of a user's friends, invites or blocks (Nakama's `Friend`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Friend {
    pub user: User,
    /// 0 friend, 1 invite sent, 2 invite received, 3 blocked.
    pub state: i32,
    /// RFC 3339 time the edge last changed.
    #[serde(alias = "updateTime")]
    pub update_time: String,
    /// A JSON object, as a string.
    pub metadata: String,
}

/// `GET /v2/friend`: a page of the caller's friends, invites and blocks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FriendList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub friends: Vec<Friend>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// A match as `GET /v2/match` lists it (Nakama's `api.Match`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Match {
    #[serde(alias = "matchId")]
    pub match_id: String,
    #[serde(skip_serializing_if = "is_false")]
    pub authoritative: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub size: i32,
    #[serde(skip_serializing_if = "is_zero", alias = "tickRate")]
    pub tick_rate: i32,
    #[serde(skip_serializing_if = "String::is_empty", alias = "handlerName")]
    pub handler_name: String,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}

/// `GET /v2/match`: matches that passed the filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MatchList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<Match>,
}

/// A friend of a friend, and which friend they came through.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FriendOfFriend {
    pub referrer: String,
    pub user: User,
}

/// `GET /v2/friend/friends`: a page of the caller's friends of friends.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FriendsOfFriendsList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "friendsOfFriends")]
    pub friends_of_friends: Vec<FriendOfFriend>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// `GET /v2/notification`: the caller's stored notifications, oldest first, and where the next
/// listing starts (keep it: it also finds only notifications newer than these).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NotificationList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<crate::realtime::Notification>,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "cacheableCursor")]
    pub cacheable_cursor: String,
}

/// Body of `PUT /v2/account`: every field optional; an absent field is left unchanged. Nakama's
/// `UpdateAccountRequest` has no `metadata`: only server code writes an account's metadata
/// (games keep roles and entitlements there). Unknown fields, `metadata` included, are ignored,
/// as Nakama's gateway discards them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UpdateAccountRequest {
    pub username: Option<String>,
    #[serde(alias = "displayName")]
    pub display_name: Option<String>,
    #[serde(alias = "avatarUrl")]
    pub avatar_url: Option<String>,
    #[serde(alias = "langTag")]
    pub lang_tag: Option<String>,
    pub location: Option<String>,
    pub timezone: Option<String>,
}

/// A page of a channel's history: `GET /v2/channel/{channel_id}` (Nakama's `ChannelMessageList`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ChannelMessageList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<crate::realtime::ChannelMessage>,
    /// Continues after the page's last message.
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "nextCursor")]
    pub next_cursor: String,
    /// Goes back before the page's first message.
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "prevCursor")]
    pub prev_cursor: String,
    /// Lists messages newer than this page's newest, with `forward=true`; durable, meant to be
    /// stored by the client.
    #[serde(skip_serializing_if = "String::is_empty")]
    #[serde(alias = "cacheableCursor")]
    pub cacheable_cursor: String,
}

/// The error body of every failed REST call: `{"error","message","code"}` where `code` is the
/// gRPC status code Nakama uses (3 invalid argument, 5 not found, 16 unauthenticated, ...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
    pub code: i32,
}

/// gRPC status codes used in [`ErrorBody::code`].
pub mod code {
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const ALREADY_EXISTS: i32 = 6;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const INTERNAL: i32 = 13;
    pub const DATA_LOSS: i32 = 15;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}
