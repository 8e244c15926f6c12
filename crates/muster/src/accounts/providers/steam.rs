//! Steam: the session ticket (hex, from `GetAuthSessionTicket`) is checked by Steam's partner
//! Web API, `ISteamUserAuth/AuthenticateUserTicket/v1` with the publisher key and the app id,
//! which answers the player's Steam id (`response.params.steamid`) or an error. Friends come
//! from `ISteamUser/GetFriendList/v1`.

use serde::Deserialize;

use super::http::{url_with, Reply};
use super::{profile, Provider, ProviderError, ProviderProfile, Providers};

const PROVIDER: Provider = Provider::Steam;

/// Longest ticket sent to Steam, in hex digits (Steam's are a few hundred).
const MAX_TICKET_CHARS: usize = 8192;
/// Friends read from one friend list at most.
const MAX_FRIENDS: usize = 10_000;

fn configured(providers: &Providers) -> Result<(), ProviderError> {
    let config = &providers.config.steam;
    if config.publisher_key.is_empty() || config.app_id == 0 {
        Err(ProviderError::NotConfigured(PROVIDER))
    } else {
        Ok(())
    }
}

/// A Steam id as Steam writes it: a 64-bit number in decimal.
fn steam_id(text: &str) -> Option<String> {
    text.parse::<u64>().ok().map(|id| id.to_string())
}

async fn get(
    providers: &Providers,
    path: &str,
    query: &[(&str, &str)],
) -> Result<Reply, ProviderError> {
    let url = url_with(&providers.config.steam.api_url, path, query)
        .map_err(|why| ProviderError::Unavailable(PROVIDER, why))?;
    providers.http.get(&providers.gates.steam, url).await
}

pub(super) async fn verify(
    providers: &Providers,
    ticket: &str,
) -> Result<ProviderProfile, ProviderError> {
    configured(providers)?;
    let refused = |why: String| ProviderError::Refused(PROVIDER, why);
    if ticket.is_empty() || ticket.len() > MAX_TICKET_CHARS {
        return Err(refused(format!(
            "ticket empty or longer than {MAX_TICKET_CHARS} characters"
        )));
    }
    if !ticket.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(refused("ticket is not hex".into()));
    }
    let config = &providers.config.steam;
    let app_id = config.app_id.to_string();
    let reply = get(
        providers,
        "/ISteamUserAuth/AuthenticateUserTicket/v1/",
        &[
            ("format", "json"),
            ("key", &config.publisher_key),
            ("appid", &app_id),
            ("ticket", ticket),
        ],
    )
    .await?;
    match reply.status {
        200 => {}
        400 => return Err(refused("Steam refused the ticket (400)".into())),
        401 | 403 => {
            return Err(ProviderError::Unavailable(
                PROVIDER,
                format!("Steam refused the publisher key ({})", reply.status),
            ))
        }
        status => {
            return Err(ProviderError::Unavailable(
                PROVIDER,
                format!("Steam answered {status}"),
            ))
        }
    }

    #[derive(Deserialize)]
    struct Params {
        #[serde(default)]
        result: Option<String>,
        #[serde(default)]
        steamid: Option<String>,
    }
    #[derive(Deserialize)]
    struct SteamError {
        #[serde(default)]
        errorcode: Option<i64>,
        #[serde(default)]
        errordesc: Option<String>,
    }
    #[derive(Deserialize)]
    struct Response {
        #[serde(default)]
        params: Option<Params>,
        #[serde(default)]
        error: Option<SteamError>,
    }
    #[derive(Deserialize)]
    struct Answer {
        response: Response,
    }
    let answer: Answer = serde_json::from_slice(&reply.body).map_err(|e| {
        ProviderError::Unavailable(PROVIDER, format!("Steam's answer unreadable: {e}"))
    })?;
    if let Some(error) = answer.response.error {
        return Err(refused(format!(
            "Steam refused the ticket: {} ({})",
            error.errordesc.unwrap_or_default(),
            error.errorcode.unwrap_or(0)
        )));
    }
    let params = answer
        .response
        .params
        .ok_or_else(|| refused("Steam answered no player".into()))?;
    if let Some(result) = params.result.filter(|result| result != "OK") {
        return Err(refused(format!("Steam answered result {result:?}")));
    }
    let id = params
        .steamid
        .as_deref()
        .and_then(steam_id)
        .ok_or_else(|| refused("Steam answered no valid steamid".into()))?;
    profile(PROVIDER, id, None, None, None)
}

pub(super) async fn friends(providers: &Providers, id: &str) -> Result<Vec<String>, ProviderError> {
    configured(providers)?;
    let Some(id) = steam_id(id) else {
        return Err(ProviderError::Refused(PROVIDER, "not a Steam id".into()));
    };
    let reply = get(
        providers,
        "/ISteamUser/GetFriendList/v1/",
        &[
            ("key", &providers.config.steam.publisher_key),
            ("steamid", &id),
            ("relationship", "friend"),
        ],
    )
    .await?;
    match reply.status {
        200 => {}
        // Steam's answer for a profile whose friends are private.
        401 => {
            return Err(ProviderError::Refused(
                PROVIDER,
                "Steam keeps this friend list private (401)".into(),
            ))
        }
        status => {
            return Err(ProviderError::Unavailable(
                PROVIDER,
                format!("Steam answered {status}"),
            ))
        }
    }

    #[derive(Deserialize)]
    struct Friend {
        #[serde(default)]
        steamid: Option<String>,
    }
    #[derive(Deserialize, Default)]
    struct FriendsList {
        #[serde(default)]
        friends: Vec<Friend>,
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default, alias = "friendsList")]
        friendslist: FriendsList,
    }
    let answer: Answer = serde_json::from_slice(&reply.body).map_err(|e| {
        ProviderError::Unavailable(PROVIDER, format!("Steam's friend list unreadable: {e}"))
    })?;
    Ok(answer
        .friendslist
        .friends
        .into_iter()
        .filter_map(|friend| friend.steamid.as_deref().and_then(steam_id))
        .take(MAX_FRIENDS)
        .collect())
}
