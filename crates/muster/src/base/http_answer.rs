//! Reading an answer from a server Muster calls (an identity provider, a store, a module's
//! `nk.httpRequest`) up to a size bound, so that a huge or endless answer costs at most that.

use bytes::{Bytes, BytesMut};

/// The body of `response`, or `None` when it is larger than `max_bytes` (said by its
/// `Content-Length`, or found while reading).
pub async fn read_bounded(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<Option<Bytes>, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > max_bytes as u64)
    {
        return Ok(None);
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max_bytes {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body.freeze()))
}
