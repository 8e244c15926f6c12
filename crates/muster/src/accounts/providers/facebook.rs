//! Facebook: an access token is checked by asking the Graph API who it belongs to
//! (`/me?fields=id,name,email,picture`, as Nakama); a Limited Login token (an OIDC JWT: three
//! dot-separated parts) is checked offline against Facebook's Limited Login key set, its
//! issuer, its audience (the configured app id) and its expiry. Friends come from
//! `/me/friends`, page by page, up to `max_friend_pages`.

use serde::Deserialize;

use super::http::{url_with, Reply};
use super::jwks::{IdClaims, TokenRules, MAX_TOKEN_BYTES};
use super::{profile, Provider, ProviderError, ProviderProfile, Providers};

const PROVIDER: Provider = Provider::Facebook;

/// Graph API error codes that mean "too many calls", not "bad token".
const RATE_LIMIT_CODES: [i64; 4] = [4, 17, 32, 613];

pub(super) async fn verify(
    providers: &Providers,
    token: &str,
) -> Result<ProviderProfile, ProviderError> {
    if is_limited_login(token) {
        limited_login(providers, token).await
    } else {
        graph_profile(providers, token).await
    }
}

/// A Limited Login token is a JWT; a Graph access token has no dots.
pub fn is_limited_login(token: &str) -> bool {
    token.split('.').count() == 3
}

async fn limited_login(
    providers: &Providers,
    token: &str,
) -> Result<ProviderProfile, ProviderError> {
    let config = &providers.config.facebook;
    if config.app_id.is_empty() {
        return Err(ProviderError::NotConfigured(PROVIDER));
    }
    let claims: IdClaims = providers
        .jwks
        .verify(
            &providers.http,
            &providers.gates.facebook,
            &TokenRules {
                keys_url: &config.limited_login_keys_url,
                issuers: &config.limited_login_issuers,
                audiences: std::slice::from_ref(&config.app_id),
            },
            token,
        )
        .await?;
    let email = claims.verified_email();
    profile(PROVIDER, claims.sub, email, claims.name, claims.picture)
}

fn check_token(token: &str) -> Result<(), ProviderError> {
    if token.is_empty() {
        return Err(ProviderError::Refused(
            PROVIDER,
            "empty access token".into(),
        ));
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(ProviderError::Refused(
            PROVIDER,
            format!("access token longer than {MAX_TOKEN_BYTES} bytes"),
        ));
    }
    Ok(())
}

async fn graph_get(
    providers: &Providers,
    path: &str,
    query: &[(&str, &str)],
) -> Result<Reply, ProviderError> {
    let url = url_with(&providers.config.facebook.graph_url, path, query)
        .map_err(|why| ProviderError::Unavailable(PROVIDER, why))?;
    let reply = providers.http.get(&providers.gates.facebook, url).await?;
    if reply.is_ok() {
        Ok(reply)
    } else {
        Err(graph_error(&reply))
    }
}

/// What a Graph API answer other than 200 means: a token it will not take (400, 401, 403),
/// unless it says too many calls; anything else, the Graph API in trouble.
fn graph_error(reply: &Reply) -> ProviderError {
    #[derive(Deserialize, Default)]
    struct ErrorBody {
        #[serde(default)]
        code: Option<i64>,
        #[serde(default, rename = "type")]
        kind: Option<String>,
    }
    #[derive(Deserialize)]
    struct ErrorAnswer {
        #[serde(default)]
        error: Option<ErrorBody>,
    }
    let error = serde_json::from_slice::<ErrorAnswer>(&reply.body)
        .ok()
        .and_then(|answer| answer.error)
        .unwrap_or_default();
    let code = error.code.unwrap_or(0);
    let kind = error.kind.unwrap_or_default();
    let status = reply.status;
    match status {
        400 | 401 | 403 if !RATE_LIMIT_CODES.contains(&code) => ProviderError::Refused(
            PROVIDER,
            format!("Graph API refused the token ({status}, code {code} {kind})"),
        ),
        _ => ProviderError::Unavailable(
            PROVIDER,
            format!("Graph API answered {status} (code {code} {kind})"),
        ),
    }
}

fn unreadable(what: &str, error: serde_json::Error) -> ProviderError {
    ProviderError::Unavailable(PROVIDER, format!("Graph API {what} unreadable: {error}"))
}

async fn graph_profile(
    providers: &Providers,
    token: &str,
) -> Result<ProviderProfile, ProviderError> {
    check_token(token)?;
    #[derive(Deserialize)]
    struct PictureData {
        #[serde(default)]
        url: Option<String>,
    }
    #[derive(Deserialize)]
    struct Picture {
        #[serde(default)]
        data: Option<PictureData>,
    }
    #[derive(Deserialize)]
    struct Me {
        id: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        email: Option<String>,
        #[serde(default)]
        picture: Option<Picture>,
    }
    let reply = graph_get(
        providers,
        "/me",
        &[("access_token", token), ("fields", "id,name,email,picture")],
    )
    .await?;
    let me: Me = serde_json::from_slice(&reply.body).map_err(|e| unreadable("profile", e))?;
    let avatar = me.picture.and_then(|p| p.data).and_then(|d| d.url);
    profile(PROVIDER, me.id, me.email, me.name, avatar)
}

pub(super) async fn friends(
    providers: &Providers,
    token: &str,
) -> Result<Vec<String>, ProviderError> {
    check_token(token)?;
    #[derive(Deserialize)]
    struct Friend {
        #[serde(default)]
        id: Option<String>,
    }
    #[derive(Deserialize, Default)]
    struct Cursors {
        #[serde(default)]
        after: Option<String>,
    }
    #[derive(Deserialize, Default)]
    struct Paging {
        #[serde(default)]
        cursors: Option<Cursors>,
        #[serde(default)]
        next: Option<String>,
    }
    #[derive(Deserialize)]
    struct Page {
        #[serde(default)]
        data: Vec<Friend>,
        #[serde(default)]
        paging: Option<Paging>,
    }
    let max_pages = providers.config.facebook.max_friend_pages.max(1);
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..max_pages {
        let mut query = vec![("access_token", token)];
        if let Some(after) = after.as_deref() {
            query.push(("after", after));
        }
        let reply = graph_get(providers, "/me/friends", &query).await?;
        let page: Page =
            serde_json::from_slice(&reply.body).map_err(|e| unreadable("friends page", e))?;
        ids.extend(
            page.data
                .into_iter()
                .filter_map(|friend| friend.id)
                .filter(|id| !id.is_empty()),
        );
        let paging = page.paging.unwrap_or_default();
        // As Nakama: the last page has no `next`.
        let next_cursor = paging
            .next
            .filter(|next| !next.is_empty())
            .and(paging.cursors.and_then(|c| c.after))
            .filter(|cursor| !cursor.is_empty());
        match next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return Ok(ids),
        }
    }
    tracing::debug!(
        pages = max_pages,
        friends = ids.len(),
        "sign-in: Facebook friends list cut at facebook.max_friend_pages"
    );
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_parts_make_a_limited_login_token() {
        assert!(is_limited_login("aGVhZA.Ym9keQ.c2ln"));
        assert!(!is_limited_login("EAAGm0PX4ZCpsBAKZAZBZBZC"));
        assert!(!is_limited_login("a.b"));
        assert!(!is_limited_login("a.b.c.d"));
    }

    #[test]
    fn graph_errors_are_refusals_unless_rate_limits_or_outages() {
        let reply = |status: u16, body: &str| Reply {
            status,
            body: bytes::Bytes::from(body.to_owned()),
        };
        let expired = r#"{"error":{"message":"Error validating access token","type":"OAuthException","code":190}}"#;
        assert!(matches!(
            graph_error(&reply(400, expired)),
            ProviderError::Refused(..)
        ));
        assert!(matches!(
            graph_error(&reply(401, "")),
            ProviderError::Refused(..)
        ));
        let limited = r#"{"error":{"type":"OAuthException","code":4}}"#;
        assert!(matches!(
            graph_error(&reply(400, limited)),
            ProviderError::Unavailable(..)
        ));
        assert!(matches!(
            graph_error(&reply(404, "")),
            ProviderError::Unavailable(..)
        ));
    }
}
