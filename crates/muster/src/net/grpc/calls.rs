//! `nakama.api.Nakama` served by transcoding: every call of the service is one line here — its
//! method, its name in [`crate::net::calls`] (which binds it to a REST route), its request and
//! answer types as `proto/nakama/api.proto` declares them.

use muster_proto::grpc::nakama_server::Nakama;
use muster_proto::grpc::*;
use pbjson_types::Empty;
use tonic::{Request, Response, Status};

use super::transcode::Edge;

macro_rules! transcoded {
    ($($method:ident = $name:literal ($request:ty) -> $answer:ty;)*) => {
        #[tonic::async_trait]
        impl Nakama for Edge {
            $(
                async fn $method(&self, request: Request<$request>) -> Result<Response<$answer>, Status> {
                    self.call($name, request).await
                }
            )*
        }

        /// Every call the service serves, by name.
        #[cfg(test)]
        pub(super) const SERVED: &[&str] = &[$($name),*];
    };
}

transcoded! {
    authenticate_custom = "AuthenticateCustom" (AuthenticateCustomRequest) -> Session;
    authenticate_device = "AuthenticateDevice" (AuthenticateDeviceRequest) -> Session;
    authenticate_email = "AuthenticateEmail" (AuthenticateEmailRequest) -> Session;
    authenticate_apple = "AuthenticateApple" (AuthenticateAppleRequest) -> Session;
    authenticate_facebook = "AuthenticateFacebook" (AuthenticateFacebookRequest) -> Session;
    authenticate_facebook_instant_game = "AuthenticateFacebookInstantGame" (AuthenticateFacebookInstantGameRequest) -> Session;
    authenticate_game_center = "AuthenticateGameCenter" (AuthenticateGameCenterRequest) -> Session;
    authenticate_google = "AuthenticateGoogle" (AuthenticateGoogleRequest) -> Session;
    authenticate_steam = "AuthenticateSteam" (AuthenticateSteamRequest) -> Session;
    session_refresh = "SessionRefresh" (SessionRefreshRequest) -> Session;
    session_logout = "SessionLogout" (SessionLogoutRequest) -> Empty;
    get_account = "GetAccount" (Empty) -> Account;
    update_account = "UpdateAccount" (UpdateAccountRequest) -> Empty;
    delete_account = "DeleteAccount" (Empty) -> Empty;
    link_custom = "LinkCustom" (AccountCustom) -> Empty;
    link_device = "LinkDevice" (AccountDevice) -> Empty;
    link_email = "LinkEmail" (AccountEmail) -> Empty;
    unlink_custom = "UnlinkCustom" (AccountCustom) -> Empty;
    unlink_device = "UnlinkDevice" (AccountDevice) -> Empty;
    unlink_email = "UnlinkEmail" (AccountEmail) -> Empty;
    link_apple = "LinkApple" (AccountApple) -> Empty;
    link_facebook = "LinkFacebook" (LinkFacebookRequest) -> Empty;
    link_facebook_instant_game = "LinkFacebookInstantGame" (AccountFacebookInstantGame) -> Empty;
    link_game_center = "LinkGameCenter" (AccountGameCenter) -> Empty;
    link_google = "LinkGoogle" (AccountGoogle) -> Empty;
    link_steam = "LinkSteam" (LinkSteamRequest) -> Empty;
    unlink_apple = "UnlinkApple" (AccountApple) -> Empty;
    unlink_facebook = "UnlinkFacebook" (AccountFacebook) -> Empty;
    unlink_facebook_instant_game = "UnlinkFacebookInstantGame" (AccountFacebookInstantGame) -> Empty;
    unlink_game_center = "UnlinkGameCenter" (AccountGameCenter) -> Empty;
    unlink_google = "UnlinkGoogle" (AccountGoogle) -> Empty;
    unlink_steam = "UnlinkSteam" (AccountSteam) -> Empty;
    get_users = "GetUsers" (GetUsersRequest) -> Users;
    list_friends = "ListFriends" (ListFriendsRequest) -> FriendList;
    add_friends = "AddFriends" (AddFriendsRequest) -> Empty;
    delete_friends = "DeleteFriends" (DeleteFriendsRequest) -> Empty;
    block_friends = "BlockFriends" (BlockFriendsRequest) -> Empty;
    list_friends_of_friends = "ListFriendsOfFriends" (ListFriendsOfFriendsRequest) -> FriendsOfFriendsList;
    import_facebook_friends = "ImportFacebookFriends" (ImportFacebookFriendsRequest) -> Empty;
    import_steam_friends = "ImportSteamFriends" (ImportSteamFriendsRequest) -> Empty;
    list_groups = "ListGroups" (ListGroupsRequest) -> GroupList;
    create_group = "CreateGroup" (CreateGroupRequest) -> Group;
    update_group = "UpdateGroup" (UpdateGroupRequest) -> Empty;
    delete_group = "DeleteGroup" (DeleteGroupRequest) -> Empty;
    join_group = "JoinGroup" (JoinGroupRequest) -> Empty;
    leave_group = "LeaveGroup" (LeaveGroupRequest) -> Empty;
    add_group_users = "AddGroupUsers" (AddGroupUsersRequest) -> Empty;
    kick_group_users = "KickGroupUsers" (KickGroupUsersRequest) -> Empty;
    ban_group_users = "BanGroupUsers" (BanGroupUsersRequest) -> Empty;
    promote_group_users = "PromoteGroupUsers" (PromoteGroupUsersRequest) -> Empty;
    demote_group_users = "DemoteGroupUsers" (DemoteGroupUsersRequest) -> Empty;
    list_group_users = "ListGroupUsers" (ListGroupUsersRequest) -> GroupUserList;
    list_user_groups = "ListUserGroups" (ListUserGroupsRequest) -> UserGroupList;
    list_matches = "ListMatches" (ListMatchesRequest) -> MatchList;
    list_notifications = "ListNotifications" (ListNotificationsRequest) -> NotificationList;
    delete_notifications = "DeleteNotifications" (DeleteNotificationsRequest) -> Empty;
    list_channel_messages = "ListChannelMessages" (ListChannelMessagesRequest) -> ChannelMessageList;
    write_storage_objects = "WriteStorageObjects" (WriteStorageObjectsRequest) -> StorageObjectAcks;
    read_storage_objects = "ReadStorageObjects" (ReadStorageObjectsRequest) -> StorageObjects;
    delete_storage_objects = "DeleteStorageObjects" (DeleteStorageObjectsRequest) -> Empty;
    list_storage_objects = "ListStorageObjects" (ListStorageObjectsRequest) -> StorageObjectList;
    list_leaderboard_records = "ListLeaderboardRecords" (ListLeaderboardRecordsRequest) -> LeaderboardRecordList;
    write_leaderboard_record = "WriteLeaderboardRecord" (WriteLeaderboardRecordRequest) -> LeaderboardRecord;
    delete_leaderboard_record = "DeleteLeaderboardRecord" (DeleteLeaderboardRecordRequest) -> Empty;
    list_leaderboard_records_around_owner = "ListLeaderboardRecordsAroundOwner" (ListLeaderboardRecordsAroundOwnerRequest) -> LeaderboardRecordList;
    list_tournaments = "ListTournaments" (ListTournamentsRequest) -> TournamentList;
    list_tournament_records = "ListTournamentRecords" (ListTournamentRecordsRequest) -> TournamentRecordList;
    write_tournament_record = "WriteTournamentRecord" (WriteTournamentRecordRequest) -> LeaderboardRecord;
    join_tournament = "JoinTournament" (JoinTournamentRequest) -> Empty;
    list_tournament_records_around_owner = "ListTournamentRecordsAroundOwner" (ListTournamentRecordsAroundOwnerRequest) -> TournamentRecordList;
    validate_purchase_apple = "ValidatePurchaseApple" (ValidatePurchaseAppleRequest) -> ValidatePurchaseResponse;
    validate_subscription_apple = "ValidateSubscriptionApple" (ValidateSubscriptionAppleRequest) -> ValidateSubscriptionResponse;
    validate_purchase_google = "ValidatePurchaseGoogle" (ValidatePurchaseGoogleRequest) -> ValidatePurchaseResponse;
    validate_subscription_google = "ValidateSubscriptionGoogle" (ValidateSubscriptionGoogleRequest) -> ValidateSubscriptionResponse;
    validate_purchase_huawei = "ValidatePurchaseHuawei" (ValidatePurchaseHuaweiRequest) -> ValidatePurchaseResponse;
    validate_purchase_facebook_instant = "ValidatePurchaseFacebookInstant" (ValidatePurchaseFacebookInstantRequest) -> ValidatePurchaseResponse;
    get_subscription = "GetSubscription" (GetSubscriptionRequest) -> ValidatedSubscription;
    list_subscriptions = "ListSubscriptions" (ListSubscriptionsRequest) -> SubscriptionList;
    rpc_func = "RpcFunc" (Rpc) -> Rpc;
    healthcheck = "Healthcheck" (Empty) -> Empty;
}

#[cfg(test)]
mod tests {
    use super::SERVED;
    use crate::net::calls::{by_name, CALLS};

    /// The service and the table of calls name the same calls.
    #[test]
    fn every_served_call_is_in_the_table_and_back() {
        for name in SERVED {
            assert!(by_name(name).is_some(), "{name} has no REST binding");
        }
        for call in CALLS {
            assert!(
                SERVED.contains(&call.name),
                "{} is not served over gRPC",
                call.name
            );
        }
    }
}
