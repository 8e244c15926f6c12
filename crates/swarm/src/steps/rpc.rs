//! The `rpc` step: call server functions at random intervals, the way Nakama's 2M-CCU economy test
//! does ("every 60-120 s, spend coins or grant an item").
//!
//! ```toml
//! [[steps]]
//! do = "rpc"
//! interval_s = [60, 120]      # a random wait in [60, 120] s before each call (or one number)
//! transport = "socket"        # or "http": POST /v2/rpc/{id} with the session token
//! functions = [
//!   { id = "wallet_spend", payload = '{"amount": ${rand:1:10}}', weight = 1 },
//!   { id = "inventory_grant", payload = '{"item": "gem", "idempotency_key":
//! "${run}-${player}-${seq}"}' }, ]
//! ```
//!
//! Each call picks one function at random in proportion to `weight` (default 1) and renders its
//! payload template: `${player}` (the player's index), `${seq}` (this player's call number, from
//! 1), `${run}` (the run's tag) and `${rand:A:B}` (a random integer in [A, B]) are replaced; all
//! else is sent as written. Latency is recorded per function (`rpc_<id>`) from the call's
//! *intended* time (the schedule `start + sum of the random waits`), so a slow server cannot
//! hide its stalls. A failed call fails the player, counted under the kind
//! `rpc_<id>_error_<code>` (an `error` envelope with Nakama's code), `rpc_<id>_http_<status>`
//! or `rpc_<id>_timeout`.
//!
//! The `graphql` step runs here too: its queries are functions whose payload is a GraphQL query,
//! sent as `POST /graphql` with the session token (metric `graphql_<id>`; an answer with
//! `errors` fails the player as `rpc_<id>_graphql_errors`).

use std::time::Duration;

use futures_util::SinkExt as _;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::measure::stats::Metric;
use crate::net::failure::{http_failure, ws_failure, Failure};
use crate::net::transport::Ws;
use crate::scenario::rpc::{Interval, RpcFunction, Transport};
use crate::steps::ctx::Ctx;
use crate::steps::player::{await_reply, idle_until, Expect, Wake};

/// Picks a function in proportion to its weight.
fn choose<'a>(functions: &'a [RpcFunction], rng: &mut SmallRng) -> &'a RpcFunction {
    let total: u64 = functions.iter().map(|f| u64::from(f.weight)).sum();
    let mut pick = rng.random_range(0..total.max(1));
    for f in functions {
        if pick < u64::from(f.weight) {
            return f;
        }
        pick -= u64::from(f.weight);
    }
    &functions[functions.len() - 1]
}

/// What the `rpc` step of one player needs.
pub struct Plan<'a> {
    pub functions: &'a [RpcFunction],
    pub interval: Interval,
    pub transport: Transport,
    /// When the step ends; `None` for the end of the run.
    pub until: Option<Instant>,
    pub limit: Duration,
}

/// Runs the step from `start`: waits, calls, records, until `plan.until` or the end of the run.
pub async fn run(
    ctx: &Ctx,
    mut ws: Option<&mut Ws>,
    token: &str,
    index: u64,
    start: Instant,
    plan: Plan<'_>,
) -> Result<(), Failure> {
    let mut rng = SmallRng::seed_from_u64(index ^ 0x9e37_79b9_7f4a_7c15);
    let mut intended = start;
    let mut seq: u64 = 0;
    loop {
        intended += plan.interval.sample(&mut rng);
        let wait_until = match plan.until {
            Some(u) if intended >= u => u,
            _ => intended,
        };
        let wake = match ws.as_deref_mut() {
            Some(ws) => idle_until(ctx, ws, wait_until).await?,
            None => {
                tokio::select! {
                    _ = sleep_until(wait_until) => Wake::Deadline,
                    _ = ctx.stop.notified() => Wake::Stop,
                }
            }
        };
        if matches!(wake, Wake::Stop) || ctx.is_over() || wait_until < intended {
            return Ok(());
        }
        seq += 1;
        let function = choose(plan.functions, &mut rng);
        let payload = function.payload.render(index, seq, &ctx.run_tag, &mut rng);
        let sent = Instant::now();
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.latency(Metric::ClientLag, sent.saturating_duration_since(intended));
            rec.count(|c| c.sends += 1);
        }
        let result = match (plan.transport, ws.as_deref_mut()) {
            (Transport::Socket, Some(ws)) => {
                Box::pin(call_socket(
                    ctx,
                    ws,
                    function,
                    &payload,
                    seq,
                    sent + plan.limit,
                ))
                .await
            }
            (Transport::Socket, None) => Err(Failure::WsEof),
            (Transport::Http, _) => {
                Box::pin(call_http(ctx, token, function, &payload, plan.limit)).await
            }
            (Transport::Graphql, _) => {
                Box::pin(call_graphql(ctx, token, function, &payload, plan.limit)).await
            }
        };
        result?;
        ctx.rec
            .borrow_mut()
            .latency_named(&function.metric, Instant::now() - intended);
    }
}

/// One `rpc` envelope and its answer.
async fn call_socket(
    ctx: &Ctx,
    ws: &mut Ws,
    function: &RpcFunction,
    payload: &str,
    seq: u64,
    deadline: Instant,
) -> Result<(), Failure> {
    let cid = seq.to_string();
    let envelope = serde_json::json!({
        "cid": cid,
        "rpc": { "id": function.id, "payload": payload },
    })
    .to_string();
    ws.send(Message::text(envelope)).await.map_err(ws_failure)?;
    match await_reply(ctx, ws, &cid, deadline, "rpc", Expect::Rpc).await {
        Ok(()) => Ok(()),
        Err(Failure::ServerError(code)) => Err(Failure::Rpc {
            function: function.id.clone(),
            problem: format!("error_{code}"),
        }),
        Err(Failure::Timeout(_)) => Err(Failure::Rpc {
            function: function.id.clone(),
            problem: "timeout".into(),
        }),
        Err(other) => Err(other),
    }
}

/// `POST /v2/rpc/{id}` with the payload as a JSON string, as Nakama's clients send it.
async fn call_http(
    ctx: &Ctx,
    token: &str,
    function: &RpcFunction,
    payload: &str,
    limit: Duration,
) -> Result<(), Failure> {
    let url = format!("{}/v2/rpc/{}", ctx.base_url, function.id);
    let body = serde_json::Value::String(payload.to_string()).to_string();
    post(ctx, url, token, body, function, limit).await.map(drop)
}

/// `POST /graphql` with the rendered query; an answer with `errors` is a failure
/// (`rpc_<id>_graphql_errors`), as is any status but 200.
async fn call_graphql(
    ctx: &Ctx,
    token: &str,
    query: &RpcFunction,
    text: &str,
    limit: Duration,
) -> Result<(), Failure> {
    let url = format!("{}/graphql", ctx.base_url);
    let body = serde_json::json!({ "query": text }).to_string();
    let answer = post(ctx, url, token, body, query, limit).await?;
    let failure = |problem: &str| Failure::Rpc {
        function: query.id.clone(),
        problem: problem.into(),
    };
    let answer: serde_json::Value =
        serde_json::from_slice(&answer).map_err(|_| failure("graphql_not_json"))?;
    if answer.get("errors").is_some_and(|e| !e.is_null()) {
        return Err(failure("graphql_errors"));
    }
    Ok(())
}

/// POSTs a JSON `body` with the session token and reads the whole answer within `limit`; any
/// status but success is a failure of `function` (`http_<status>`), as is the time running out.
async fn post(
    ctx: &Ctx,
    url: String,
    token: &str,
    body: String,
    function: &RpcFunction,
    limit: Duration,
) -> Result<bytes::Bytes, Failure> {
    let failure = |problem: String| Failure::Rpc {
        function: function.id.clone(),
        problem,
    };
    let exchange = async {
        let resp = ctx
            .http
            .post(url)
            .bearer_auth(token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| http_failure(&e))?;
        let status = resp.status();
        let answer = resp.bytes().await.map_err(|e| http_failure(&e))?;
        ctx.rec.borrow_mut().count(|c| c.receives += 1);
        if !status.is_success() {
            return Err(failure(format!("http_{}", status.as_u16())));
        }
        Ok(answer)
    };
    match timeout(limit, exchange).await {
        Ok(result) => result,
        Err(_) => Err(failure("timeout".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::rpc::Template;

    #[test]
    fn choice_follows_weights() {
        let f = |id: &str, weight| RpcFunction {
            id: id.into(),
            payload: Template::parse("").expect("empty"),
            weight,
            metric: String::new(),
        };
        let functions = [f("a", 1), f("b", 3)];
        let mut rng = SmallRng::seed_from_u64(42);
        let b = (0..10_000)
            .filter(|_| choose(&functions, &mut rng).id == "b")
            .count();
        assert!((7_000..8_000).contains(&b), "{b}");
    }
}
