//! Muster's REST bodies against Nakama's own definitions: nakama-common's `api/api.proto`, as
//! published on the Go module proxy (the test command fetches it and sets `NAKAMA_COMMON_DIR`).
//! For each body, an instance with every field set is serialized, and its JSON keys must be
//! exactly the proto message's field names (protojson's proto names, which Nakama's gateway
//! writes); a body that covers only part of its message says which fields it leaves out.
//!
//! It needs `NAKAMA_COMMON_DIR`: ignored unless asked for (`--include-ignored`, as `scripts/test`
//! runs it), and failing when run without it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use muster_proto::api;
use prost_types::{DescriptorProto, FileDescriptorSet};
use serde::Serialize;

fn nakama_common() -> PathBuf {
    std::env::var_os("NAKAMA_COMMON_DIR")
        .map(PathBuf::from)
        .expect(
        "this test needs nakama-common's protos: set NAKAMA_COMMON_DIR (scripts/test fetches them)",
    )
}

fn api_proto(dir: &std::path::Path) -> FileDescriptorSet {
    protox::compile(["api/api.proto"], [dir]).expect("nakama-common's api.proto compiles")
}

/// A message of `nakama.api` by name; `Outer.Inner` names a nested one.
fn message<'a>(set: &'a FileDescriptorSet, name: &str) -> &'a DescriptorProto {
    let mut parts = name.split('.');
    let outer = parts.next().unwrap_or_default();
    let mut found = set
        .file
        .iter()
        .filter(|f| f.package() == "nakama.api")
        .flat_map(|f| f.message_type.iter())
        .find(|m| m.name() == outer)
        .unwrap_or_else(|| panic!("no message {name} in api.proto"));
    for inner in parts {
        found = found
            .nested_type
            .iter()
            .find(|m| m.name() == inner)
            .unwrap_or_else(|| panic!("no message {name} in api.proto"));
    }
    found
}

fn proto_fields(message: &DescriptorProto) -> BTreeSet<String> {
    message.field.iter().map(|f| f.name().to_owned()).collect()
}

fn json_keys(value: &impl Serialize) -> BTreeSet<String> {
    match serde_json::to_value(value).expect("serializes") {
        serde_json::Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

/// `body`, with every field set, has exactly `proto`'s fields, but for `left_out`.
fn check(set: &FileDescriptorSet, proto: &str, body: &impl Serialize, left_out: &[&str]) {
    let mut expected = proto_fields(message(set, proto));
    for name in left_out {
        assert!(
            expected.remove(*name),
            "{proto} has no field {name} to leave out"
        );
    }
    assert_eq!(json_keys(body), expected, "{proto}");
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn storage_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let object = api::StorageObject {
        collection: "c".into(),
        key: "k".into(),
        user_id: "u".into(),
        value: "{}".into(),
        version: "v".into(),
        permission_read: 2,
        permission_write: 1,
        create_time: "t".into(),
        update_time: "t".into(),
    };
    check(&set, "StorageObject", &object, &[]);
    let ack = api::StorageObjectAck {
        collection: "c".into(),
        key: "k".into(),
        version: "v".into(),
        user_id: "u".into(),
        create_time: "t".into(),
        update_time: "t".into(),
    };
    check(&set, "StorageObjectAck", &ack, &[]);
    let write = api::WriteStorageObject {
        collection: "c".into(),
        key: "k".into(),
        value: "{}".into(),
        version: "*".into(),
        permission_read: Some(1),
        permission_write: Some(1),
    };
    check(&set, "WriteStorageObject", &write, &[]);
    let writes = api::WriteStorageObjectsRequest {
        objects: vec![write],
    };
    check(&set, "WriteStorageObjectsRequest", &writes, &[]);
    let acks = api::StorageObjectAcks { acks: vec![ack] };
    check(&set, "StorageObjectAcks", &acks, &[]);
    let read = api::ReadStorageObjectId {
        collection: "c".into(),
        key: "k".into(),
        user_id: "u".into(),
    };
    check(&set, "ReadStorageObjectId", &read, &[]);
    let reads = api::ReadStorageObjectsRequest {
        object_ids: vec![read],
    };
    check(&set, "ReadStorageObjectsRequest", &reads, &[]);
    let objects = api::StorageObjects {
        objects: vec![object.clone()],
    };
    check(&set, "StorageObjects", &objects, &[]);
    let list = api::StorageObjectList {
        objects: vec![object],
        cursor: "c".into(),
    };
    check(&set, "StorageObjectList", &list, &[]);
    let delete = api::DeleteStorageObjectId {
        collection: "c".into(),
        key: "k".into(),
        version: "v".into(),
    };
    check(&set, "DeleteStorageObjectId", &delete, &[]);
    let deletes = api::DeleteStorageObjectsRequest {
        object_ids: vec![delete],
    };
    check(&set, "DeleteStorageObjectsRequest", &deletes, &[]);
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn account_and_session_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let session = api::Session {
        token: "t".into(),
        refresh_token: "r".into(),
        created: true,
    };
    check(&set, "Session", &session, &[]);
    let user = api::User {
        id: "i".into(),
        username: "u".into(),
        display_name: "d".into(),
        avatar_url: "a".into(),
        lang_tag: "l".into(),
        location: "l".into(),
        timezone: "t".into(),
        metadata: "{}".into(),
        online: true,
        create_time: "t".into(),
        update_time: "t".into(),
        facebook_id: "f".into(),
        google_id: "g".into(),
        gamecenter_id: "gc".into(),
        steam_id: "s".into(),
        facebook_instant_game_id: "fi".into(),
        apple_id: "a".into(),
    };
    // Muster keeps no friend counts.
    check(&set, "User", &user, &["edge_count"]);
    check(
        &set,
        "Users",
        &api::Users {
            users: vec![user.clone()],
        },
        &[],
    );
    let vars: std::collections::HashMap<String, String> = [("k".into(), "v".into())].into();
    let device = api::AccountDevice {
        id: "d".into(),
        vars: vars.clone(),
    };
    check(&set, "AccountDevice", &device, &[]);
    let custom = api::AccountCustom {
        id: "c".into(),
        vars: vars.clone(),
    };
    check(&set, "AccountCustom", &custom, &[]);
    let email = api::AccountEmail {
        email: "e".into(),
        password: "p".into(),
        vars,
    };
    check(&set, "AccountEmail", &email, &[]);
    let update = api::UpdateAccountRequest {
        username: Some("u".into()),
        display_name: Some("d".into()),
        avatar_url: Some("a".into()),
        lang_tag: Some("l".into()),
        location: Some("l".into()),
        timezone: Some("t".into()),
    };
    check(&set, "UpdateAccountRequest", &update, &[]);
    let token = api::AccountToken {
        token: "t".into(),
        vars: [("k".into(), "v".into())].into(),
    };
    for proto in [
        "AccountApple",
        "AccountGoogle",
        "AccountFacebook",
        "AccountSteam",
    ] {
        check(&set, proto, &token, &[]);
    }
    let instant = api::AccountFacebookInstantGame {
        signed_player_info: "s".into(),
        vars: [("k".into(), "v".into())].into(),
    };
    check(&set, "AccountFacebookInstantGame", &instant, &[]);
    let gamecenter = api::AccountGameCenter {
        player_id: "p".into(),
        bundle_id: "b".into(),
        timestamp_seconds: 1,
        salt: "s".into(),
        signature: "s".into(),
        public_key_url: "u".into(),
        vars: [("k".into(), "v".into())].into(),
    };
    check(&set, "AccountGameCenter", &gamecenter, &[]);
    let numbered: api::AccountGameCenter =
        serde_json::from_str(r#"{"player_id":"p","timestamp_seconds":"12"}"#).expect("parses");
    assert_eq!(numbered.timestamp_seconds, 12);
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn leaderboard_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let write = api::LeaderboardRecordWrite {
        score: 1,
        subscore: 2,
        metadata: "{}".into(),
        operator: 1,
    };
    check(
        &set,
        "WriteLeaderboardRecordRequest.LeaderboardRecordWrite",
        &write,
        &[],
    );
    let record = api::LeaderboardRecord {
        leaderboard_id: "l".into(),
        owner_id: "o".into(),
        username: "u".into(),
        score: 1,
        subscore: 2,
        num_score: 3,
        metadata: "{}".into(),
        create_time: "t".into(),
        update_time: "t".into(),
        expiry_time: Some("t".into()),
        rank: 4,
        max_num_score: 5,
    };
    check(&set, "LeaderboardRecord", &record, &[]);
    let list = api::LeaderboardRecordList {
        records: vec![record.clone()],
        owner_records: vec![record],
        next_cursor: "n".into(),
        prev_cursor: "p".into(),
        rank_count: 9,
    };
    check(&set, "LeaderboardRecordList", &list, &[]);
    // A tournament's records list has the same fields, and its write body the same as a
    // leaderboard's.
    check(&set, "TournamentRecordList", &list, &[]);
    check(
        &set,
        "WriteTournamentRecordRequest.TournamentRecordWrite",
        &write,
        &[],
    );
    let tournament = api::Tournament {
        id: "t".into(),
        title: "t".into(),
        description: "d".into(),
        category: 1,
        sort_order: 1,
        size: 1,
        max_size: 1,
        max_num_score: 1,
        can_enter: true,
        end_active: 1,
        next_reset: 1,
        metadata: "{}".into(),
        create_time: "t".into(),
        start_time: "t".into(),
        end_time: Some("t".into()),
        duration: 1,
        start_active: 1,
        prev_reset: 1,
        operator: 1,
        authoritative: true,
        join_required: true,
    };
    check(&set, "Tournament", &tournament, &[]);
    let tournaments = api::TournamentList {
        tournaments: vec![tournament],
        cursor: "c".into(),
    };
    check(&set, "TournamentList", &tournaments, &[]);
    // 64-bit integers are strings, as protojson writes them; requests take either.
    let json = serde_json::to_value(&list).expect("serializes");
    assert_eq!(json["records"][0]["score"], "1");
    assert_eq!(json["rank_count"], "9");
    let read: api::LeaderboardRecordWrite =
        serde_json::from_str(r#"{"score":"7","subscore":3,"operator":"INCREMENT"}"#)
            .expect("parses");
    assert_eq!((read.score, read.subscore, read.operator), (7, 3, 3));
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn notification_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let notification = muster_proto::realtime::Notification {
        id: "i".into(),
        subject: "s".into(),
        content: "{}".into(),
        code: -2,
        sender_id: "u".into(),
        create_time: Some(muster_proto::wire::Timestamp::from_unix_ms(1)),
        persistent: true,
    };
    check(&set, "Notification", &notification, &[]);
    let list = api::NotificationList {
        notifications: vec![notification],
        cacheable_cursor: "c".into(),
    };
    check(&set, "NotificationList", &list, &[]);
}

/// Every message kind Muster speaks in the realtime envelope carries Nakama's `Envelope` field
/// number for its name (rtapi/realtime.proto), in the protobuf encoding Muster writes.
#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn realtime_envelope_numbers_are_nakamas() {
    let dir = nakama_common();
    let set = protox::compile(["rtapi/realtime.proto"], [&dir]).expect("realtime.proto compiles");
    let envelope = set
        .file
        .iter()
        .filter(|f| f.package() == "nakama.realtime")
        .flat_map(|f| f.message_type.iter())
        .find(|m| m.name() == "Envelope")
        .expect("rtapi Envelope");
    let mut checked = 0;
    for field in &envelope.field {
        if field.oneof_index.is_none() {
            continue;
        }
        let frame = format!(r#"{{"cid":"1","{}":{{}}}}"#, field.name());
        // A kind Muster does not speak is refused by name; one it speaks is encoded.
        let Ok(decoded) = muster_proto::realtime::decode_json(frame.as_bytes()) else {
            continue;
        };
        let bytes = muster_proto::realtime::encode_protobuf(&decoded);
        // cid (field 1, "1") first: 0x0a 0x01 '1'; then the message's key, a varint.
        let mut key = 0u64;
        for (i, byte) in bytes[3..].iter().take(5).enumerate() {
            key |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                break;
            }
        }
        assert_eq!(
            i32::try_from(key >> 3).expect("a field number"),
            field.number(),
            "{}: Muster's number differs from Nakama's",
            field.name()
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} kinds checked");
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn friend_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let friend = api::Friend {
        user: api::User::default(),
        state: 2,
        update_time: "t".into(),
        metadata: "{}".into(),
    };
    check(&set, "Friend", &friend, &[]);
    let list = api::FriendList {
        friends: vec![friend],
        cursor: "c".into(),
    };
    check(&set, "FriendList", &list, &[]);
    let of_friend = api::FriendOfFriend {
        referrer: "r".into(),
        user: api::User::default(),
    };
    check(&set, "FriendsOfFriendsList.FriendOfFriend", &of_friend, &[]);
    let list = api::FriendsOfFriendsList {
        friends_of_friends: vec![of_friend],
        cursor: "c".into(),
    };
    check(&set, "FriendsOfFriendsList", &list, &[]);
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn match_list_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let listed = api::Match {
        match_id: "m.".into(),
        authoritative: true,
        label: Some("{}".into()),
        size: 2,
        tick_rate: 10,
        handler_name: "arena".into(),
    };
    check(&set, "Match", &listed, &[]);
    check(
        &set,
        "MatchList",
        &api::MatchList {
            matches: vec![listed],
        },
        &[],
    );
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn group_bodies_are_nakamas() {
    let dir = nakama_common();
    let set = api_proto(&dir);
    let group = api::Group {
        id: "g".into(),
        creator_id: "u".into(),
        name: "n".into(),
        description: "d".into(),
        lang_tag: "en".into(),
        metadata: "{}".into(),
        avatar_url: "a".into(),
        open: true,
        edge_count: 1,
        max_count: 100,
        create_time: "t".into(),
        update_time: "t".into(),
    };
    check(&set, "Group", &group, &[]);
    check(
        &set,
        "GroupList",
        &api::GroupList {
            groups: vec![group.clone()],
            cursor: "c".into(),
        },
        &[],
    );
    let member = api::GroupUser {
        user: api::User::default(),
        state: 2,
    };
    check(&set, "GroupUserList.GroupUser", &member, &[]);
    check(
        &set,
        "GroupUserList",
        &api::GroupUserList {
            group_users: vec![member],
            cursor: "c".into(),
        },
        &[],
    );
    let membership = api::UserGroup { group, state: 0 };
    check(&set, "UserGroupList.UserGroup", &membership, &[]);
    check(
        &set,
        "UserGroupList",
        &api::UserGroupList {
            user_groups: vec![membership],
            cursor: "c".into(),
        },
        &[],
    );
    let create = api::CreateGroupRequest {
        name: "n".into(),
        description: "d".into(),
        lang_tag: "en".into(),
        avatar_url: "a".into(),
        open: true,
        max_count: 10,
    };
    check(&set, "CreateGroupRequest", &create, &[]);
    let update = api::UpdateGroupRequest {
        group_id: "g".into(),
        name: Some("n".into()),
        description: Some("d".into()),
        lang_tag: Some("en".into()),
        avatar_url: Some("a".into()),
        open: Some(false),
    };
    check(&set, "UpdateGroupRequest", &update, &[]);
}

/// The number of the first field in a protobuf encoding.
fn first_field_number(bytes: &[u8]) -> i32 {
    let mut key = 0u64;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        key |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    i32::try_from(key >> 3).expect("a field number")
}

#[test]
#[ignore = "needs nakama-common's protos (NAKAMA_COMMON_DIR)"]
fn status_party_and_stream_message_fields_are_nakamas() {
    use muster_proto::realtime::{
        Party, PartyCreate, PartyData, PartyDataSend, PartyJoinRequest, PartyLeader,
        PartyMatchmakerAdd, PartyMatchmakerRemove, PartyMatchmakerTicket, PartyPresenceEvent,
        PartyUpdate, Status, StatusFollow, StatusPresenceEvent, StatusUnfollow, StatusUpdate,
        UserPresence,
    };
    use prost::Message as _;
    let dir = nakama_common();
    let set = protox::compile(["rtapi/realtime.proto"], [&dir]).expect("realtime.proto compiles");
    let number = |message: &str, field: &str| {
        set.file
            .iter()
            .filter(|f| f.package() == "nakama.realtime")
            .flat_map(|f| f.message_type.iter())
            .find(|m| m.name() == message)
            .and_then(|m| m.field.iter().find(|f| f.name() == field))
            .unwrap_or_else(|| panic!("{message}.{field} in realtime.proto"))
            .number()
    };
    let presence = UserPresence {
        user_id: "u".into(),
        ..UserPresence::default()
    };
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "Status",
            "presences",
            Status {
                presences: vec![presence.clone()],
            }
            .encode_to_vec(),
        ),
        (
            "StatusFollow",
            "user_ids",
            StatusFollow {
                user_ids: vec!["u".into()],
                usernames: vec![],
            }
            .encode_to_vec(),
        ),
        (
            "StatusFollow",
            "usernames",
            StatusFollow {
                user_ids: vec![],
                usernames: vec!["n".into()],
            }
            .encode_to_vec(),
        ),
        (
            "StatusPresenceEvent",
            "joins",
            StatusPresenceEvent {
                joins: vec![presence.clone()],
                leaves: vec![],
            }
            .encode_to_vec(),
        ),
        (
            "StatusPresenceEvent",
            "leaves",
            StatusPresenceEvent {
                joins: vec![],
                leaves: vec![presence],
            }
            .encode_to_vec(),
        ),
        (
            "StatusUnfollow",
            "user_ids",
            StatusUnfollow {
                user_ids: vec!["u".into()],
            }
            .encode_to_vec(),
        ),
        (
            "StatusUpdate",
            "status",
            StatusUpdate {
                status: Some("s".into()),
            }
            .encode_to_vec(),
        ),
    ];
    let mut cases = cases;
    let party = Party::default;
    let p = || Some(presence_of("u"));
    cases.extend([
        (
            "Party",
            "party_id",
            Party {
                party_id: "p".into(),
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "open",
            Party {
                open: true,
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "hidden",
            Party {
                hidden: true,
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "max_size",
            Party {
                max_size: 3,
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "self",
            Party {
                self_presence: p(),
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "leader",
            Party {
                leader: p(),
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "presences",
            Party {
                presences: vec![presence_of("u")],
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "Party",
            "label",
            Party {
                label: "l".into(),
                ..party()
            }
            .encode_to_vec(),
        ),
        (
            "PartyCreate",
            "open",
            PartyCreate {
                open: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyCreate",
            "max_size",
            PartyCreate {
                max_size: 2,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyCreate",
            "label",
            PartyCreate {
                label: "l".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyCreate",
            "hidden",
            PartyCreate {
                hidden: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyLeader",
            "presence",
            PartyLeader {
                presence: p(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyJoinRequest",
            "presences",
            PartyJoinRequest {
                presences: vec![presence_of("u")],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyData",
            "presence",
            PartyData {
                presence: p(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyData",
            "op_code",
            PartyData {
                op_code: 1,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyData",
            "data",
            PartyData {
                data: vec![1],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyDataSend",
            "op_code",
            PartyDataSend {
                op_code: 1,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyDataSend",
            "data",
            PartyDataSend {
                data: vec![1],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyPresenceEvent",
            "joins",
            PartyPresenceEvent {
                joins: vec![presence_of("u")],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyPresenceEvent",
            "leaves",
            PartyPresenceEvent {
                leaves: vec![presence_of("u")],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyUpdate",
            "label",
            PartyUpdate {
                label: "l".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyUpdate",
            "open",
            PartyUpdate {
                open: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyUpdate",
            "hidden",
            PartyUpdate {
                hidden: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ]);
    let add = PartyMatchmakerAdd::default;
    cases.extend([
        (
            "PartyMatchmakerAdd",
            "party_id",
            PartyMatchmakerAdd {
                party_id: "p".into(),
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerAdd",
            "min_count",
            PartyMatchmakerAdd {
                min_count: 2,
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerAdd",
            "max_count",
            PartyMatchmakerAdd {
                max_count: 2,
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerAdd",
            "query",
            PartyMatchmakerAdd {
                query: "*".into(),
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerAdd",
            "string_properties",
            PartyMatchmakerAdd {
                string_properties: [("k".into(), "v".into())].into(),
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerAdd",
            "numeric_properties",
            PartyMatchmakerAdd {
                numeric_properties: [("k".into(), 1.0)].into(),
                ..add()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerRemove",
            "ticket",
            PartyMatchmakerRemove {
                ticket: "t".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "PartyMatchmakerTicket",
            "ticket",
            PartyMatchmakerTicket {
                ticket: "t".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ]);
    use muster_proto::realtime::{Stream, StreamData, StreamPresenceEvent};
    let stream = || Some(Stream::default());
    cases.extend([
        (
            "Stream",
            "mode",
            Stream {
                mode: 9,
                ..Stream::default()
            }
            .encode_to_vec(),
        ),
        (
            "Stream",
            "subject",
            Stream {
                subject: "s".into(),
                ..Stream::default()
            }
            .encode_to_vec(),
        ),
        (
            "Stream",
            "subcontext",
            Stream {
                subcontext: "c".into(),
                ..Stream::default()
            }
            .encode_to_vec(),
        ),
        (
            "Stream",
            "label",
            Stream {
                label: "l".into(),
                ..Stream::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamData",
            "stream",
            StreamData {
                stream: stream(),
                ..StreamData::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamData",
            "sender",
            StreamData {
                sender: p(),
                ..StreamData::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamData",
            "data",
            StreamData {
                data: "d".into(),
                ..StreamData::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamData",
            "reliable",
            StreamData {
                reliable: true,
                ..StreamData::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamPresenceEvent",
            "stream",
            StreamPresenceEvent {
                stream: stream(),
                ..StreamPresenceEvent::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamPresenceEvent",
            "joins",
            StreamPresenceEvent {
                joins: vec![presence_of("u")],
                ..StreamPresenceEvent::default()
            }
            .encode_to_vec(),
        ),
        (
            "StreamPresenceEvent",
            "leaves",
            StreamPresenceEvent {
                leaves: vec![presence_of("u")],
                ..StreamPresenceEvent::default()
            }
            .encode_to_vec(),
        ),
    ]);
    for (message, field, bytes) in cases {
        assert_eq!(
            first_field_number(&bytes),
            number(message, field),
            "{message}.{field}: Muster's number differs from Nakama's"
        );
    }
}

fn presence_of(user: &str) -> muster_proto::realtime::UserPresence {
    muster_proto::realtime::UserPresence {
        user_id: user.into(),
        ..Default::default()
    }
}
