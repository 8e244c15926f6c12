//! What the `storage` and `leaderboard` steps share: calls at random intervals on the player's
//! own schedule ([`Pace`]), each an authenticated REST exchange ([`exchange`]) whose failure is
//! counted under the call's name, and the player's user id, read from the session token.
//!
//! The schedule is the `rpc` step's: each call's *intended* time is the step's start plus the
//! random waits drawn so far, so a slow answer delays the next call without hiding it (the next
//! call's latency, measured from its intended time, carries the delay).

use std::time::Duration;

use base64::Engine as _;
use rand::rngs::SmallRng;
use rand::SeedableRng as _;
use tokio::time::{sleep_until, timeout, Instant};

use crate::measure::stats::Metric;
use crate::net::failure::{http_failure, Failure};
use crate::net::grpc::GrpcCall;
use crate::net::transport::Ws;
use crate::scenario::rpc::Interval;
use crate::scenario::Api;
use crate::steps::ctx::Ctx;
use crate::steps::player::{idle_until, Wake};

/// What a player has written during the run, so that its later reads (in this step or a later
/// one) can check that they find it. Boxed in the player and made on its first write: most
/// scenarios never use it.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// `(collection, key, version)`: the version each object's last write was acknowledged at.
    pub objects: Vec<(Box<str>, Box<str>, Box<str>)>,
    /// Leaderboards on which the player has a record.
    pub boards: Vec<Box<str>>,
}

impl Written {
    /// The version `collection`/`key` was last written at, if the player wrote it.
    pub fn version(&self, collection: &str, key: &str) -> Option<&str> {
        self.objects
            .iter()
            .find(|(c, k, _)| &**c == collection && &**k == key)
            .map(|(_, _, v)| &**v)
    }

    pub fn wrote(&mut self, collection: &str, key: &str, version: Box<str>) {
        match self
            .objects
            .iter_mut()
            .find(|(c, k, _)| &**c == collection && &**k == key)
        {
            Some(entry) => entry.2 = version,
            None => self.objects.push((collection.into(), key.into(), version)),
        }
    }
}

/// A player's schedule of calls: `start + sum of the waits`, until `until` or the end of the run.
pub(crate) struct Pace {
    /// The player's own random numbers (seeded by its index and the step, so runs repeat).
    pub rng: SmallRng,
    intended: Instant,
    interval: Interval,
    until: Option<Instant>,
}

impl Pace {
    pub fn new(seed: u64, start: Instant, interval: Interval, until: Option<Instant>) -> Pace {
        Pace {
            rng: SmallRng::seed_from_u64(seed),
            intended: start,
            interval,
            until,
        }
    }

    /// Waits for the next call's intended time (servicing the socket, if one is open) and
    /// returns it, with the call counted as sent and the client's lateness recorded; `None`
    /// when the step's `duration_s` or the run ends first.
    pub async fn next(
        &mut self,
        ctx: &Ctx,
        ws: Option<&mut Ws>,
    ) -> Result<Option<Instant>, Failure> {
        self.intended += self.interval.sample(&mut self.rng);
        let wait_until = match self.until {
            Some(u) if self.intended >= u => u,
            _ => self.intended,
        };
        let wake = match ws {
            Some(ws) => idle_until(ctx, ws, wait_until).await?,
            None => {
                tokio::select! {
                    _ = sleep_until(wait_until) => Wake::Deadline,
                    _ = ctx.stop.notified() => Wake::Stop,
                }
            }
        };
        if matches!(wake, Wake::Stop) || ctx.is_over() || wait_until < self.intended {
            return Ok(None);
        }
        let mut rec = ctx.rec.borrow_mut();
        rec.latency(
            Metric::ClientLag,
            Instant::now().saturating_duration_since(self.intended),
        );
        rec.count(|c| c.sends += 1);
        Ok(Some(self.intended))
    }
}

/// One authenticated REST call named `call` (its metric's name): sends `body` (JSON) with
/// `method` to `url` and reads the whole answer within `limit`. A status but success fails as
/// `<call>_http_<status>`, the time running out as `<call>_timeout`; a broken connection as the
/// transport's kind (`http_connect`, `http_io`), as every HTTP step.
pub(crate) async fn exchange(
    ctx: &Ctx,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<String>,
    call: &'static str,
    limit: Duration,
) -> Result<bytes::Bytes, Failure> {
    let exchange = async {
        let mut request = ctx.http.request(method, url).bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let resp = request.send().await.map_err(|e| http_failure(&e))?;
        let status = resp.status();
        let answer = resp.bytes().await.map_err(|e| http_failure(&e))?;
        ctx.rec.borrow_mut().count(|c| c.receives += 1);
        if !status.is_success() {
            return Err(Failure::Call {
                call,
                problem: format!("http_{}", status.as_u16()),
            });
        }
        Ok(answer)
    };
    match timeout(limit, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Call {
            call,
            problem: "timeout".into(),
        }),
    }
}

/// One authenticated call of Nakama's API over `api`: the REST call `rest` (method, URL, JSON
/// body) through [`exchange`], or the same call over gRPC (`grpc`: the call and its request in
/// protobuf's JSON mapping) on one of the worker's connections, chosen by `player`. Either way
/// the answer is the same JSON; a gRPC status but OK fails as `<call>_grpc_<code>`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn call_api(
    ctx: &Ctx,
    api: Api,
    player: u64,
    token: &str,
    rest: (reqwest::Method, String, Option<String>),
    grpc: impl FnOnce() -> (GrpcCall, serde_json::Value),
    call: &'static str,
    limit: Duration,
) -> Result<bytes::Bytes, Failure> {
    match api {
        Api::Rest => {
            let (method, url, body) = rest;
            exchange(ctx, method, url, token, body, call, limit).await
        }
        Api::Grpc => {
            let (grpc_call, request) = grpc();
            let authorization = format!("Bearer {token}");
            let answer = ctx.grpc.call(player, grpc_call, &authorization, request);
            match timeout(limit, answer).await {
                Ok(Ok(answer)) => {
                    ctx.rec.borrow_mut().count(|c| c.receives += 1);
                    Ok(answer.into())
                }
                Ok(Err(failure)) => Err(failure.of(call)),
                Err(_) => Err(Failure::Call {
                    call,
                    problem: "timeout".into(),
                }),
            }
        }
    }
}

/// The user id in a session token: Nakama's (and Muster's) tokens are JWTs whose claims carry
/// it as `uid`. Reading it here saves a `GET /v2/account` per player.
pub(crate) fn user_id_of(token: &str) -> Result<String, Failure> {
    let claims = token.split('.').nth(1).ok_or(Failure::BadResponse)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .map_err(|_| Failure::BadResponse)?;
    let claims: serde_json::Value =
        serde_json::from_slice(&claims).map_err(|_| Failure::BadResponse)?;
    claims["uid"]
        .as_str()
        .map(str::to_owned)
        .ok_or(Failure::BadResponse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_id_comes_from_the_token_claims() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"tid":"t","uid":"4c2ae592-b2a7-445e-98ec-697694478b1c","exp":1}"#);
        let token = format!("eyJhbGciOiJIUzI1NiJ9.{claims}.signature");
        assert_eq!(
            user_id_of(&token).expect("a uid"),
            "4c2ae592-b2a7-445e-98ec-697694478b1c"
        );
        assert_eq!(user_id_of("not-a-jwt"), Err(Failure::BadResponse));
        let no_uid = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"tid":"t"}"#);
        assert_eq!(
            user_id_of(&format!("h.{no_uid}.s")),
            Err(Failure::BadResponse)
        );
    }
}
