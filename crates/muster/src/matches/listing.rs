//! Match listings, as Nakama's `GET /v2/match`: matches filtered by kind, label, size and a
//! query over the label's JSON fields. A label is read once, when its match starts
//! ([`LabelFields::of`]), so a listing only compares. In a cluster the node asked lists its own
//! and asks every other node for theirs ([`ListAsk`], over the rooms subject).

use std::collections::HashMap;

use muster_proto::api::Match;
use serde::{Deserialize, Serialize};

use super::query::Query;
use super::registry::{MatchRef, MatchRegistry};

/// A label's fields as a query reads them: strings (and booleans, as `true`/`false`) and
/// numbers, by their path (`mode`, `team.size`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LabelFields {
    strings: HashMap<String, String>,
    numbers: HashMap<String, f64>,
}

/// Deepest nesting of a label's objects that is indexed.
const MAX_DEPTH: usize = 8;

impl LabelFields {
    /// The fields of `label` when it is a JSON object; none otherwise.
    pub fn of(label: Option<&str>) -> LabelFields {
        let mut fields = LabelFields::default();
        if let Some(serde_json::Value::Object(object)) =
            label.and_then(|l| serde_json::from_str(l).ok())
        {
            fields.add("", &object, 0);
        }
        fields
    }

    /// Whether these fields satisfy `query` (its terms naming `label.KEY`).
    pub fn satisfy(&self, query: &Query) -> bool {
        query.matches(&self.strings, &self.numbers)
    }

    fn add(
        &mut self,
        path: &str,
        object: &serde_json::Map<String, serde_json::Value>,
        depth: usize,
    ) {
        for (key, value) in object {
            let name = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match value {
                serde_json::Value::String(s) => {
                    self.strings.insert(name, s.clone());
                }
                serde_json::Value::Bool(b) => {
                    self.strings.insert(name, b.to_string());
                }
                serde_json::Value::Number(n) => {
                    if let Some(n) = n.as_f64() {
                        self.numbers.insert(name, n);
                    }
                }
                serde_json::Value::Object(inner) if depth < MAX_DEPTH => {
                    self.add(&name, inner, depth + 1)
                }
                _ => {}
            }
        }
    }
}

/// A listing as it travels to other nodes: the filter, its query as text.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListAsk {
    pub limit: usize,
    pub authoritative: Option<bool>,
    pub label: Option<String>,
    pub min_size: Option<usize>,
    pub max_size: Option<usize>,
    pub query: Option<String>,
}

impl ListAsk {
    /// The filter it names; the query's parse error when it does not parse.
    pub fn filter(&self) -> Result<ListFilter, String> {
        Ok(ListFilter {
            limit: self.limit,
            authoritative: self.authoritative,
            label: self.label.clone(),
            min_size: self.min_size,
            max_size: self.max_size,
            query: self
                .query
                .as_deref()
                .map(|q| Query::parse_fields(q, "label"))
                .transpose()?,
        })
    }
}

/// What a listing asks for.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub limit: usize,
    /// Only authoritative matches (true) or only relayed ones (false).
    pub authoritative: Option<bool>,
    /// An authoritative match's label, exactly.
    pub label: Option<String>,
    pub min_size: Option<usize>,
    pub max_size: Option<usize>,
    /// Over an authoritative match's label fields (`label.KEY`).
    pub query: Option<Query>,
}

/// This node's matches that pass `filter`, at most `filter.limit`.
pub fn list(registry: &MatchRegistry, filter: &ListFilter) -> Vec<Match> {
    let by_label = filter.label.is_some() || filter.query.is_some();
    let mut found = Vec::new();
    for target in registry.all() {
        if found.len() >= filter.limit {
            break;
        }
        let (summary, fields) = match &target {
            MatchRef::Authoritative(handle) => {
                if filter.authoritative == Some(false) {
                    continue;
                }
                let label = handle.label_state();
                let summary = Match {
                    match_id: handle.id_text.clone(),
                    authoritative: true,
                    label: label.text.clone(),
                    size: handle.size() as i32,
                    tick_rate: handle.tick_rate_hz() as i32,
                    handler_name: handle.handler.clone(),
                };
                (summary, Some(label))
            }
            MatchRef::Relayed(relayed) => {
                if filter.authoritative == Some(true) || by_label {
                    continue;
                }
                let summary = Match {
                    match_id: relayed.id_text.clone(),
                    size: relayed.size() as i32,
                    ..Match::default()
                };
                (summary, None)
            }
            MatchRef::Remote(_) => continue,
        };
        let size = summary.size as usize;
        if filter.min_size.is_some_and(|min| size < min)
            || filter.max_size.is_some_and(|max| size > max)
        {
            continue;
        }
        // As Nakama: with a query, the exact label is not looked at.
        if let (Some(label), None) = (&filter.label, &filter.query) {
            if summary.label.as_deref() != Some(label.as_str()) {
                continue;
            }
        }
        if let (Some(query), Some(label)) = (&filter.query, fields) {
            if !query.matches(&label.fields.strings, &label.fields.numbers) {
                continue;
            }
        }
        found.push(summary);
    }
    found
}

impl super::Matches {
    /// The matches that pass `ask`, at most `ask.limit`: this node's, then (in a cluster) every
    /// other node's, asked at once; a node that does not answer in time is left out.
    pub async fn list_matches(&self, ask: &ListAsk) -> Result<Vec<Match>, String> {
        let filter = ask.filter()?;
        let mut found = list(&self.registry, &filter);
        if let Some(link) = &self.link {
            if found.len() < ask.limit {
                let remaining = ListAsk {
                    limit: ask.limit - found.len(),
                    ..ask.clone()
                };
                let question = super::remote::RoomAsk::ListMatches(remaining);
                let peers = link.peers();
                let answers = futures_util::future::join_all(
                    peers.iter().map(|peer| link.room(peer, &question)),
                )
                .await;
                for (peer, answer) in peers.iter().zip(answers) {
                    match answer.map(serde_json::from_value::<Vec<Match>>) {
                        Ok(Ok(theirs)) => found.extend(theirs),
                        Ok(Err(error)) => {
                            tracing::warn!(%peer, %error, "match listing: unreadable answer")
                        }
                        Err(error) => tracing::warn!(%peer, %error, "match listing: no answer"),
                    }
                }
                found.truncate(ask.limit);
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_query_reads_nested_fields_numbers_and_booleans() {
        let fields = LabelFields::of(Some(
            r#"{"mode":"ranked","level":5,"open":true,"team":{"size":3},"tags":["x"]}"#,
        ));
        let query = |q: &str| Query::parse_fields(q, "label").expect(q);
        assert!(
            query("+label.mode:ranked +label.level:>=3").matches(&fields.strings, &fields.numbers)
        );
        assert!(
            query("+label.team.size:3 +label.open:true").matches(&fields.strings, &fields.numbers)
        );
        assert!(!query("+label.mode:casual").matches(&fields.strings, &fields.numbers));
        assert!(!query("+label.level:<5").matches(&fields.strings, &fields.numbers));
        assert_eq!(LabelFields::of(Some("not json")), LabelFields::default());
        assert!(Query::parse_fields("+properties.mode:x", "label").is_err());
    }
}
