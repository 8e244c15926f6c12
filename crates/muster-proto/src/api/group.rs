//! Groups' REST bodies (Nakama's `Group`, `GroupList`, `GroupUserList`, `UserGroupList` and the
//! create and update requests).

use serde::{Deserialize, Serialize};

use super::User;

/// A group as members and searchers see it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Group {
    pub id: String,
    #[serde(alias = "creatorId")]
    pub creator_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "langTag")]
    pub lang_tag: String,
    /// A JSON object, as a string; written by server code only.
    pub metadata: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "avatarUrl")]
    pub avatar_url: String,
    /// Anyone may join an open group; a closed one takes join requests.
    pub open: bool,
    /// Members (superadmins, admins and members; not join requests or bans).
    #[serde(alias = "edgeCount")]
    pub edge_count: i32,
    #[serde(alias = "maxCount")]
    pub max_count: i32,
    #[serde(alias = "createTime")]
    pub create_time: String,
    #[serde(alias = "updateTime")]
    pub update_time: String,
}

/// `GET /v2/group`: groups that passed the filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GroupList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Group>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// A user of a group and their state in it: 0 superadmin, 1 admin, 2 member, 3 join request,
/// 4 banned.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GroupUser {
    pub user: User,
    pub state: i32,
}

/// `GET /v2/group/{group_id}/user`: a page of a group's users.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GroupUserList {
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "groupUsers")]
    pub group_users: Vec<GroupUser>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// A group a user is in, and their state in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UserGroup {
    pub group: Group,
    pub state: i32,
}

/// `GET /v2/user/{user_id}/group`: a page of a user's groups.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UserGroupList {
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "userGroups")]
    pub user_groups: Vec<UserGroup>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// Body of `POST /v2/group`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CreateGroupRequest {
    pub name: String,
    pub description: String,
    #[serde(alias = "langTag")]
    pub lang_tag: String,
    #[serde(alias = "avatarUrl")]
    pub avatar_url: String,
    pub open: bool,
    /// 0 for the server's default.
    #[serde(alias = "maxCount")]
    pub max_count: i32,
}

/// Body of `PUT /v2/group/{group_id}`: an absent field is left unchanged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UpdateGroupRequest {
    /// Also in the path, which wins.
    #[serde(skip_serializing_if = "String::is_empty", alias = "groupId")]
    pub group_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "langTag")]
    pub lang_tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "avatarUrl")]
    pub avatar_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open: Option<bool>,
}
