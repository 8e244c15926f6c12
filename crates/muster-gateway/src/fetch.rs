//! One GET to an origin, and what may come back: a JSON answer no larger than `max_bytes`
//! (counted while it streams in, so a larger one is cut off, never read whole), its `select` part
//! checked against the field's type, weighed for the cache; or an error that says what went
//! wrong, including the pause a 429 or 503 asked for.

use std::time::Duration;

use reqwest::Url;
use serde_json::Value as Json;

use crate::cache::Fetched;
use crate::config::{element_type, SCALARS};
use crate::origin::OriginError;
use crate::weigh::json_bytes;

/// How one field reads its origin's answer.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The longest wait for the whole answer, body included.
    pub timeout: Duration,
    /// The largest body read, in bytes.
    pub max_bytes: usize,
    /// A JSON pointer into the answer; empty for all of it.
    pub select: &'a str,
    /// The field's type: the selected part must have its shape.
    pub returns: &'a str,
}

/// One GET of `url`: its JSON answer's `select` part, checked against the field's type (a list
/// where a list goes, an object where an object type goes), so a malformed answer is an error
/// and never cached. The value weighs what it holds in memory once parsed, not its text.
pub async fn fetch_json(
    http: &reqwest::Client,
    url: Url,
    read: Read<'_>,
) -> Result<Fetched<Json>, OriginError> {
    let call = async {
        let response = http
            .get(url)
            .send()
            .await
            .map_err(|e| OriginError::Unreachable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        if status == 429 || status == 503 {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(retry_after);
            return Err(OriginError::RateLimited { retry_after });
        }
        if !response.status().is_success() {
            return Err(OriginError::Status(status));
        }
        let body = read_limited(response, read.max_bytes).await?;
        let answer: Json = serde_json::from_slice(&body)
            .map_err(|e| OriginError::Malformed(format!("not JSON: {e}")))?;
        drop(body);
        let value = match read.select {
            "" => answer,
            pointer => answer
                .pointer(pointer)
                .cloned()
                .ok_or_else(|| OriginError::Malformed(format!("no {pointer} in the answer")))?,
        };
        let fits = match element_type(read.returns) {
            (_, true) => value.is_array(),
            (inner, false) if SCALARS.contains(&inner) => !value.is_array() && !value.is_object(),
            (_, false) => value.is_object(),
        };
        if !fits {
            return Err(OriginError::Malformed(format!(
                "the answer is not a {}",
                read.returns
            )));
        }
        Ok(Fetched {
            bytes: json_bytes(&value),
            value,
        })
    };
    tokio::time::timeout(read.timeout, call)
        .await
        .map_err(|_| OriginError::Timeout(read.timeout))?
}

/// The body, read chunk by chunk and refused as soon as it passes `max_bytes`, whether the
/// origin announced its length or not (chunked): a larger answer costs at most `max_bytes` plus
/// one chunk. Dropping the response mid-body closes the connection, so the origin stops too.
async fn read_limited(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<Vec<u8>, OriginError> {
    let too_large = || OriginError::Malformed(format!("answer larger than {max_bytes} bytes"));
    let announced = response.content_length();
    if announced.is_some_and(|n| n > max_bytes as u64) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(announced.map_or(0, |n| n as usize));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| OriginError::Unreachable(e.without_url().to_string()))?
    {
        if chunk.len() > max_bytes - body.len() {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A `Retry-After` value in delta-seconds (RFC 9110, section 10.2.3). A number too large for a
/// u64 saturates: however large, the origin's `max_retry_after` caps the pause. The HTTP-date
/// form (and anything else) gives None: the origin's default pause applies.
pub fn retry_after(value: &str) -> Option<Duration> {
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Only digits: parsing fails only on overflow.
    Some(Duration::from_secs(digits.parse().unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_delta_seconds_and_saturates() {
        assert_eq!(retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            retry_after("18446744073709551615"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            retry_after("99999999999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        for unread in [
            "",
            "-1",
            "1.5",
            "+3",
            "ten",
            "Wed, 21 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(retry_after(unread), None, "{unread:?}");
        }
    }
}
