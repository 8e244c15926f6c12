//! The `rpc` step as the scenario file writes it: its functions, their payload templates and
//! the wait between calls, checked when the scenario is loaded; `steps::rpc` runs it.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::Rng as _;
use serde::{Deserialize, Deserializer};

use super::Seconds;

/// How calls travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// An `rpc` envelope on the realtime socket (needs a `connect` step before).
    Socket,
    /// `POST /v2/rpc/{id}` with the session token (needs an `authenticate` step before).
    Http,
    /// `POST /graphql` with the session token: the `graphql` step, whose "functions" are
    /// queries.
    Graphql,
}

/// A wait between two actions: fixed, or drawn uniformly from a range for every call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interval {
    Fixed(Seconds),
    Range(Seconds, Seconds),
}

impl Interval {
    /// The wait before the next call.
    pub fn sample(self, rng: &mut SmallRng) -> Duration {
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

/// One query of a `graphql` step, as written: `{ id, query, weight }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuery {
    id: String,
    query: String,
    #[serde(default = "one")]
    weight: u32,
}

impl RawQuery {
    /// Checked as a function whose payload is the query; its latency metric is `graphql_<id>`.
    pub fn check(self) -> Result<RpcFunction, String> {
        if self.query.trim().is_empty() {
            return Err(format!("query {}: the query is empty", self.id));
        }
        let function = RawFunction {
            id: self.id,
            payload: self.query,
            weight: self.weight,
        }
        .check()
        .map_err(|e| e.replacen("function", "query", 1))?;
        Ok(RpcFunction {
            metric: format!("graphql_{}", function.id),
            ..function
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

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
