//! The `rpc` step: call server functions at random intervals, the way seed 001's scenario 3
//! does ("every 60-120 s, spend coins or grant an item").
//!
//! ```toml
//! [[steps]]
//! do = "rpc"
//! interval_s = [60, 120]      # a random wait in [60, 120] s before each call (or one number)
//! transport = "socket"        # or "http": POST /v2/rpc/{id} with the session token
//! functions = [
//!   { id = "wallet_spend", payload = '{"amount": ${rand:1:10}}', weight = 1 },
//!   { id = "inventory_grant", payload = '{"item": "gem", "idempotency_key": "${run}-${player}-${seq}"}' },
//! ]
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

use std::time::Duration;

use futures_util::SinkExt as _;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use serde::{Deserialize, Deserializer};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::measure::stats::Metric;
use crate::run::worker::Ctx;
use crate::scenario::Seconds;
use crate::steps::player::{
    await_reply, http_failure, idle_until, ws_failure, Expect, Failure, Wake, Ws,
};

/// How calls travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// An `rpc` envelope on the realtime socket (needs a `connect` step before).
    Socket,
    /// `POST /v2/rpc/{id}` with the session token (needs an `authenticate` step before).
    Http,
}

/// A wait between two actions: fixed, or drawn uniformly from a range for every call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interval {
    Fixed(Seconds),
    Range(Seconds, Seconds),
}

impl Interval {
    fn sample(self, rng: &mut SmallRng) -> Duration {
        match self {
            Interval::Fixed(s) => s.as_duration(),
            Interval::Range(a, b) if b.0 > a.0 => {
                Duration::from_secs_f64(rng.random_range(a.0..=b.0))
            }
            Interval::Range(a, _) => a.as_duration(),
        }
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(f64),
            Two(Vec<f64>),
        }
        let seconds = |v: f64| {
            if v.is_finite() && v > 0.0 && v <= 31_536_000.0 {
                Ok(Seconds(v))
            } else {
                Err(serde::de::Error::custom(format!(
                    "{v} is not a positive number of seconds (at most one year)"
                )))
            }
        };
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a number of seconds or [min, max]"))?
        {
            Raw::One(v) => Ok(Interval::Fixed(seconds(v)?)),
            Raw::Two(v) if v.len() == 2 => {
                let (a, b) = (seconds(v[0])?, seconds(v[1])?);
                if a.0 > b.0 {
                    return Err(serde::de::Error::custom(format!(
                        "[{}, {}]: the minimum is above the maximum",
                        a.0, b.0
                    )));
                }
                Ok(Interval::Range(a, b))
            }
            Raw::Two(_) => Err(serde::de::Error::custom(
                "an interval range is [min, max]: two numbers",
            )),
        }
    }
}

/// One function of an `rpc` step, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFunction {
    id: String,
    #[serde(default)]
    payload: String,
    #[serde(default = "one")]
    weight: u32,
}

fn one() -> u32 {
    1
}

/// One function of an `rpc` step, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcFunction {
    pub id: String,
    pub payload: Template,
    pub weight: u32,
    /// The latency metric's name, `rpc_<id>`.
    pub metric: String,
}

impl RawFunction {
    pub fn check(self) -> Result<RpcFunction, String> {
        let id_ok = !self.id.is_empty()
            && self.id.len() <= 128
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !id_ok {
            return Err(format!(
                "function id {:?}: use 1-128 ASCII letters, digits, '_', '-' or '.'",
                self.id
            ));
        }
        if self.weight == 0 {
            return Err(format!("function {}: weight must be at least 1", self.id));
        }
        let payload =
            Template::parse(&self.payload).map_err(|e| format!("function {}: {e}", self.id))?;
        Ok(RpcFunction {
            metric: format!("rpc_{}", self.id),
            id: self.id,
            payload,
            weight: self.weight,
        })
    }
}

/// A payload with `${...}` placeholders, parsed once when the scenario is loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Player,
    Seq,
    Run,
    Rand(i64, i64),
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("unclosed placeholder at {:?}", &rest[start..]))?;
            let name = &after[..end];
            parts.push(match name {
                "player" => Part::Player,
                "seq" => Part::Seq,
                "run" => Part::Run,
                _ => match name.strip_prefix("rand:").and_then(|r| r.split_once(':')) {
                    Some((a, b)) => {
                        let (a, b) = (a.trim().parse::<i64>(), b.trim().parse::<i64>());
                        match (a, b) {
                            (Ok(a), Ok(b)) if a <= b => Part::Rand(a, b),
                            _ => {
                                return Err(format!(
                                    "${{{name}}}: write ${{rand:MIN:MAX}} with integers MIN <= MAX"
                                ))
                            }
                        }
                    }
                    None => {
                        return Err(format!(
                            "unknown placeholder ${{{name}}} (known: ${{player}}, ${{seq}}, ${{run}}, ${{rand:MIN:MAX}})"
                        ))
                    }
                },
            });
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template { parts })
    }

    /// The payload for one call.
    pub fn render(&self, player: u64, seq: u64, run: &str, rng: &mut SmallRng) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Player => out.push_str(&player.to_string()),
                Part::Seq => out.push_str(&seq.to_string()),
                Part::Run => out.push_str(run),
                Part::Rand(a, b) => out.push_str(&rng.random_range(*a..=*b).to_string()),
            }
        }
        out
    }
}

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
        let _ = resp.bytes().await.map_err(|e| http_failure(&e))?;
        ctx.rec.borrow_mut().count(|c| c.receives += 1);
        if !status.is_success() {
            return Err(Failure::Rpc {
                function: function.id.clone(),
                problem: format!("http_{}", status.as_u16()),
            });
        }
        Ok(())
    };
    match timeout(limit, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Rpc {
            function: function.id.clone(),
            problem: "timeout".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_placeholders() {
        let t = Template::parse(r#"{"amount": ${rand:3:3}, "key": "${run}-${player}-${seq}"}"#)
            .expect("valid");
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(
            t.render(7, 2, "ab12", &mut rng),
            r#"{"amount": 3, "key": "ab12-7-2"}"#
        );
        let r = Template::parse("${rand:1:10}").expect("valid");
        for _ in 0..100 {
            let v: i64 = r.render(0, 0, "", &mut rng).parse().expect("int");
            assert!((1..=10).contains(&v));
        }
        assert_eq!(
            Template::parse("{}")
                .expect("plain JSON braces")
                .render(0, 0, "", &mut rng),
            "{}"
        );
        for bad in ["${nope}", "${rand:5:1}", "${rand:x:2}", "${player"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }

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

    const SCENARIO: &str = r#"
name = "t"

[[phases]]
duration_s = 5
players = 10

[[steps]]
do = "authenticate"

[[steps]]
do = "connect"

[[steps]]
do = "rpc"
interval_s = [0.5, 1.5]
duration_s = 3
functions = [
  { id = "wallet_spend", payload = '{"amount": ${rand:1:10}}', weight = 3 },
  { id = "inventory_grant", payload = '{"item": "gem"}' },
]
"#;

    fn error_of(text: &str) -> String {
        match crate::scenario::Scenario::parse(text, "t.toml") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("expected an error"),
        }
    }

    #[test]
    fn rpc_steps_parse_and_are_checked() {
        use crate::scenario::{Scenario, Step};
        let s = Scenario::parse(SCENARIO, "t.toml").expect("valid");
        let Step::Rpc {
            functions,
            interval_s,
            transport,
            ..
        } = &s.steps[2]
        else {
            panic!("not an rpc step")
        };
        assert_eq!(functions.len(), 2);
        assert_eq!(functions[0].weight, 3);
        assert_eq!(functions[1].metric, "rpc_inventory_grant");
        assert_eq!(*interval_s, Interval::Range(Seconds(0.5), Seconds(1.5)));
        assert_eq!(*transport, Transport::Socket);

        let e = error_of(&SCENARIO.replace("${rand:1:10}", "${rnd}"));
        assert!(e.contains("functions") && e.contains("rnd"), "{e}");
        let e = error_of(&SCENARIO.replace("[0.5, 1.5]", "[2, 1]"));
        assert!(e.contains("interval_s") && e.contains("minimum"), "{e}");
        let e = error_of(&SCENARIO.replace("weight = 3", "weight = 0"));
        assert!(e.contains("weight"), "{e}");
        let e = error_of(&SCENARIO.replace("weight = 3", "wieght = 3"));
        assert!(e.contains("wieght"), "{e}");
        let e = error_of(&SCENARIO.replace("do = \"connect\"", "do = \"wait\"\nduration_s = 1"));
        assert!(e.contains("open socket"), "{e}");
        // Over HTTP, a session is enough.
        let http = SCENARIO
            .replace("do = \"connect\"", "do = \"wait\"\nduration_s = 1")
            .replace("duration_s = 3", "duration_s = 3\ntransport = \"http\"");
        assert!(Scenario::parse(&http, "t.toml").is_ok());
        let e = error_of(&SCENARIO.replace("functions = [", "functionz = ["));
        assert!(e.contains("functionz"), "{e}");
        // A heartbeat's interval is a fixed schedule.
        let e = error_of(&SCENARIO.replace(
            "do = \"rpc\"",
            "do = \"heartbeat\"\ninterval_s = [1, 2]\n\n[[steps]]\ndo = \"rpc\"",
        ));
        assert!(e.contains("heartbeat"), "{e}");
    }

    #[test]
    fn intervals_stay_in_range() {
        let mut rng = SmallRng::seed_from_u64(3);
        let range = Interval::Range(Seconds(1.0), Seconds(2.0));
        for _ in 0..1000 {
            let d = range.sample(&mut rng).as_secs_f64();
            assert!((1.0..=2.0).contains(&d));
        }
        assert_eq!(
            Interval::Fixed(Seconds(0.5)).sample(&mut rng),
            Duration::from_millis(500)
        );
    }
}
