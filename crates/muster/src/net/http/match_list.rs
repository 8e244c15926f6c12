//! `GET /v2/match?limit=&authoritative=&label=&min_size=&max_size=&query=`: the matches of the
//! cluster ([`crate::matches::listing`]), with Nakama's checks.

use axum::extract::RawQuery;
use axum::Json;
use muster_proto::api::MatchList;

use super::auth::Player;
use super::error::ApiError;
use super::extract::parsed;
use super::response::Answer;
use crate::matches::listing::ListAsk;

/// Longest query text.
const MAX_QUERY_BYTES: usize = 4096;

fn invalid(message: &str) -> ApiError {
    ApiError::InvalidArgument(message.into())
}

fn size(value: &str, message: &str) -> Result<usize, ApiError> {
    usize::try_from(parsed::<i64>(value, message)?).map_err(|_| invalid(message))
}

pub async fn list(Player(_, services, _): Player, RawQuery(raw): RawQuery) -> Answer<MatchList> {
    let mut filter = ListAsk {
        limit: 10,
        ..ListAsk::default()
    };
    let mut query_text = None;
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "limit" => {
                filter.limit = value
                    .parse()
                    .ok()
                    .filter(|l| (1..=100).contains(l))
                    .ok_or_else(|| invalid("Invalid limit - limit must be between 1 and 100."))?;
            }
            "authoritative" => {
                filter.authoritative =
                    Some(parsed(&value, "authoritative must be true or false.")?);
            }
            "label" => filter.label = Some(value.into_owned()),
            "min_size" | "minSize" => {
                filter.min_size = Some(size(&value, "Minimum size must be 0 or above.")?);
            }
            "max_size" | "maxSize" => {
                filter.max_size = Some(size(&value, "Maximum size must be 0 or above.")?);
            }
            "query" => query_text = Some(value.into_owned()),
            _ => {}
        }
    }
    if filter.authoritative == Some(false) {
        if filter.label.is_some() {
            return Err(invalid(
                "Label filtering is not supported for non-authoritative matches.",
            ));
        }
        if query_text.is_some() {
            return Err(invalid(
                "Query filtering is not supported for non-authoritative matches.",
            ));
        }
    }
    if let (Some(min), Some(max)) = (filter.min_size, filter.max_size) {
        if min > max {
            return Err(invalid(
                "Maximum size must be greater than or equal to minimum size when both are specified.",
            ));
        }
    }
    if query_text
        .as_ref()
        .is_some_and(|text| text.len() > MAX_QUERY_BYTES)
    {
        return Err(invalid("Query is too long."));
    }
    filter.query = query_text;
    let matches = services
        .matches
        .list_matches(&filter)
        .await
        .map_err(|e| invalid(&format!("Invalid query: {e}.")))?;
    Ok(Json(MatchList { matches }))
}
