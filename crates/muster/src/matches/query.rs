//! Matchmaker and match-listing queries: a documented subset of the query-string syntax Nakama's
//! matchmaker and `GET /v2/match` take. The matchmaker's terms name `properties.KEY`; a listing's
//! name `label.KEY` (a field of the match's JSON label, `label.a.b` a nested one) — written
//! `properties` below.
//!
//! A query is whitespace-separated terms. Each term is
//!
//! | term | meaning |
//! |---|---|
//! | `*` | matches every ticket |
//! | `properties.KEY:VALUE` | the other ticket's property `KEY` equals `VALUE`: a string property exactly (case-sensitive); a numeric property if `VALUE` is a number equal to it. `VALUE` is a bare word or a `"double-quoted string"` (`\"` and `\\` escape) |
//! | `properties.KEY:>=N`, `:>N`, `:<=N`, `:<N` | the other ticket's numeric property `KEY` is in that range |
//!
//! and is prefixed with `+` (must match), `-` (must not match) or nothing (should match). As in
//! Nakama (Bluge's query strings): when a query has at least one `+` term, its plain terms are
//! optional and change nothing; when it has none, at least one plain term must match. `-` terms
//! always exclude. A query of only `-` terms matches every ticket they do not exclude; an empty
//! query is `*`. A property the other ticket lacks matches no term (so `-` of it excludes nothing).
//!
//! Not supported (refused with an error naming the term): boolean words (`AND`, `OR`, `NOT`),
//! parentheses, fuzziness (`~`), boosts (`^`), wildcards and regular expressions in values, and
//! fields other than `properties.*` (or `label.*`).

use std::collections::HashMap;

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    terms: Vec<Term>,
    has_must: bool,
    has_should: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occur {
    Must,
    MustNot,
    Should,
}

#[derive(Debug, Clone, PartialEq)]
struct Term {
    occur: Occur,
    test: Test,
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    All,
    Equals {
        key: String,
        value: String,
    },
    Range {
        key: String,
        op: RangeOp,
        bound: f64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeOp {
    Gt,
    Ge,
    Lt,
    Le,
}

/// Most terms in one query.
pub const MAX_TERMS: usize = 32;

impl Query {
    /// Parses a matchmaker query (`properties.` terms; `text` already checked against the
    /// length limit by the caller).
    pub fn parse(text: &str) -> Result<Query, String> {
        Query::parse_fields(text, "properties")
    }

    /// Parses a query whose terms name `FIELD.KEY` (a match listing's `label.KEY`).
    pub fn parse_fields(text: &str, field: &str) -> Result<Query, String> {
        let mut query = Query::default();
        for raw in split_terms(text)? {
            if query.terms.len() == MAX_TERMS {
                return Err(format!("query has more than {MAX_TERMS} terms"));
            }
            let term = parse_term(&raw, field)?;
            match term.occur {
                Occur::Must => query.has_must = true,
                Occur::Should => query.has_should = true,
                Occur::MustNot => {}
            }
            query.terms.push(term);
        }
        Ok(query)
    }

    /// Whether a ticket with these properties satisfies the query.
    pub fn matches(
        &self,
        strings: &HashMap<String, String>,
        numbers: &HashMap<String, f64>,
    ) -> bool {
        let mut any_should = false;
        for term in &self.terms {
            let hit = term.test.matches(strings, numbers);
            match term.occur {
                Occur::Must if !hit => return false,
                Occur::MustNot if hit => return false,
                Occur::Should if hit => any_should = true,
                _ => {}
            }
        }
        self.has_must || !self.has_should || any_should
    }

    /// The `+properties.k:v` terms: every ticket this query accepts has string property `k` = `v`
    /// (or a numeric `k` equal to `v`). The matchmaker looks candidates up by these.
    pub fn required_strings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.terms.iter().filter_map(|t| match (&t.occur, &t.test) {
            (Occur::Must, Test::Equals { key, value }) => Some((key.as_str(), value.as_str())),
            _ => None,
        })
    }
}

impl Test {
    fn matches(&self, strings: &HashMap<String, String>, numbers: &HashMap<String, f64>) -> bool {
        match self {
            Test::All => true,
            Test::Equals { key, value } => match strings.get(key) {
                Some(s) => s == value,
                None => match (numbers.get(key), value.parse::<f64>()) {
                    (Some(n), Ok(v)) => *n == v,
                    _ => false,
                },
            },
            Test::Range { key, op, bound } => numbers.get(key).is_some_and(|n| match op {
                RangeOp::Gt => n > bound,
                RangeOp::Ge => n >= bound,
                RangeOp::Lt => n < bound,
                RangeOp::Le => n <= bound,
            }),
        }
    }
}

/// Splits on whitespace outside double quotes, keeping quotes (and escapes) in the pieces.
fn split_terms(text: &str) -> Result<Vec<String>, String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            '\\' if quoted => {
                current.push(c);
                match chars.next() {
                    Some(next) => current.push(next),
                    None => return Err("query ends inside an escape".into()),
                }
            }
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    terms.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if quoted {
        return Err("query has an unclosed double quote".into());
    }
    if !current.is_empty() {
        terms.push(current);
    }
    Ok(terms)
}

fn parse_term(raw: &str, field: &str) -> Result<Term, String> {
    let shown: String = raw.chars().take(40).collect();
    let (occur, body) = match raw.as_bytes().first() {
        Some(b'+') => (Occur::Must, &raw[1..]),
        Some(b'-') => (Occur::MustNot, &raw[1..]),
        _ => (Occur::Should, raw),
    };
    if body == "*" {
        return Ok(Term {
            occur,
            test: Test::All,
        });
    }
    if matches!(body, "AND" | "OR" | "NOT" | "&&" | "||") || body.starts_with('(') {
        return Err(format!(
            "unsupported query syntax in term '{shown}': use + and - terms"
        ));
    }
    let Some(rest) = body
        .strip_prefix(field)
        .and_then(|rest| rest.strip_prefix('.'))
    else {
        return Err(format!(
            "unsupported query term '{shown}': terms are *, or {field}.KEY:VALUE with an optional + or -"
        ));
    };
    let Some((key, value)) = rest.split_once(':') else {
        return Err(format!("query term '{shown}' has no ':VALUE'"));
    };
    // Dots name nested fields of a label (`label.team.size`).
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Err(format!("query term '{shown}' has a bad property name"));
    }
    let key = key.to_owned();
    for (prefix, op) in [
        (">=", RangeOp::Ge),
        ("<=", RangeOp::Le),
        (">", RangeOp::Gt),
        ("<", RangeOp::Lt),
    ] {
        if let Some(number) = value.strip_prefix(prefix) {
            let bound: f64 = number
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite())
                .ok_or_else(|| format!("query term '{shown}': '{number}' is not a number"))?;
            return Ok(Term {
                occur,
                test: Test::Range { key, op, bound },
            });
        }
    }
    let value = if let Some(inner) = value.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or_else(|| format!("query term '{shown}' has a badly quoted value"))?;
        let mut unescaped = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                unescaped.extend(chars.next());
            } else {
                unescaped.push(c);
            }
        }
        unescaped
    } else {
        if value.is_empty() {
            return Err(format!("query term '{shown}' has an empty value"));
        }
        if value.contains(['*', '?', '~', '^', '/', '(', ')', '"']) {
            return Err(format!(
                "unsupported query syntax in term '{shown}': wildcards, fuzziness, boosts and regular expressions are not supported"
            ));
        }
        value.to_owned()
    };
    Ok(Term {
        occur,
        test: Test::Equals { key, value },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(
        s: &[(&str, &str)],
        n: &[(&str, f64)],
    ) -> (HashMap<String, String>, HashMap<String, f64>) {
        (
            s.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            n.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        )
    }

    #[test]
    fn must_must_not_and_ranges() {
        let q = Query::parse("+properties.region:eu -properties.mode:ranked +properties.skill:>=10 properties.skill:<20").expect("parses");
        let (s, n) = props(&[("region", "eu"), ("mode", "casual")], &[("skill", 15.0)]);
        assert!(q.matches(&s, &n));
        let (s2, _) = props(&[("region", "us"), ("mode", "casual")], &[]);
        assert!(!q.matches(&s2, &n), "region must be eu");
        let (s3, _) = props(&[("region", "eu"), ("mode", "ranked")], &[]);
        assert!(!q.matches(&s3, &n), "mode must not be ranked");
        let (_, low) = props(&[], &[("skill", 9.0)]);
        assert!(!q.matches(&s, &low), "skill >= 10");
        let (_, high) = props(&[], &[("skill", 25.0)]);
        assert!(
            q.matches(&s, &high),
            "plain terms are optional beside + terms"
        );
        assert_eq!(
            q.required_strings().collect::<Vec<_>>(),
            vec![("region", "eu")]
        );
    }

    #[test]
    fn should_only_queries_need_one_hit_and_star_matches_all() {
        let q = Query::parse("properties.region:eu properties.region:us").expect("parses");
        let (eu, n) = props(&[("region", "eu")], &[]);
        let (asia, _) = props(&[("region", "asia")], &[]);
        assert!(q.matches(&eu, &n));
        assert!(!q.matches(&asia, &n));
        for all in ["*", "", "  "] {
            assert!(
                Query::parse(all).expect("parses").matches(&asia, &n),
                "{all:?}"
            );
        }
        let not_ranked = Query::parse("-properties.mode:ranked").expect("parses");
        assert!(not_ranked.matches(&asia, &n));
        let quoted = Query::parse(r#"+properties.name:"big \"bad\" wolf""#).expect("parses");
        let (wolf, _) = props(&[("name", "big \"bad\" wolf")], &[]);
        assert!(quoted.matches(&wolf, &n));
        let numeric_eq = Query::parse("+properties.level:3").expect("parses");
        let (_, three) = props(&[], &[("level", 3.0)]);
        assert!(numeric_eq.matches(&asia, &three));
    }

    #[test]
    fn unsupported_syntax_is_refused_by_name() {
        for bad in [
            "region:eu",
            "+properties.region:eu AND +properties.mode:x",
            "(properties.a:b)",
            "properties.a:b*",
            "properties.a:b~2",
            "properties.skill:>=abc",
            "properties.a:\"open",
            "properties.:x",
            "properties.a:",
        ] {
            assert!(Query::parse(bad).is_err(), "{bad}");
        }
        let many = "properties.a:b ".repeat(MAX_TERMS + 1);
        assert!(Query::parse(&many).is_err());
    }
}
