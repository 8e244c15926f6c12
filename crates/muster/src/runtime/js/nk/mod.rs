//! The `nk` functions Muster answers, by family. Each family reads its arguments by position,
//! as Nakama's runtime takes them, and answers in the shape Nakama's runtime gives.

mod accounts;
mod auth;
mod chat;
pub(crate) mod context;
mod crypto;
pub(crate) mod custom_metrics;
mod economy;
pub(crate) mod events;
mod files;
pub mod http;
pub mod http_rules;
mod leaderboards;
pub(crate) use leaderboards::leaderboard;
pub(crate) mod local_cache;
mod matches;
mod multi_update;
mod parties;
mod purchases;
pub(crate) use purchases::{purchase as purchase_json, subscription as subscription_json};
mod sessions;
mod social;
mod sql;
mod status;
mod storage;
mod streams;

use muster_js::JsError;
use serde_json::{json, Value};
use uuid::Uuid;

use context::{Args, ServerHost};

const BASICS: &[&str] = &["uuidv4"];

/// Every family's names.
pub(super) fn names() -> Vec<&'static str> {
    [
        BASICS,
        accounts::NAMES,
        auth::NAMES,
        economy::NAMES,
        storage::NAMES,
        leaderboards::NAMES,
        social::NAMES,
        status::NAMES,
        chat::NAMES,
        matches::NAMES,
        http::NAMES,
        crypto::NAMES,
        files::NAMES,
        sessions::NAMES,
        streams::NAMES,
        local_cache::NAMES,
        custom_metrics::NAMES,
        events::NAMES,
        multi_update::NAMES,
        parties::NAMES,
        sql::NAMES,
        purchases::NAMES,
    ]
    .concat()
}

/// Answers `nk.<name>(...args)`.
pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let family = |names: &[&str]| names.contains(&name);
    if name == "uuidv4" {
        Ok(json!(Uuid::new_v4().to_string()))
    } else if family(accounts::NAMES) {
        accounts::call(host, name, args)
    } else if family(auth::NAMES) {
        auth::call(host, name, args)
    } else if family(economy::NAMES) {
        economy::call(host, name, args)
    } else if family(storage::NAMES) {
        storage::call(host, name, args)
    } else if family(leaderboards::NAMES) {
        leaderboards::call(host, name, args)
    } else if family(social::NAMES) {
        social::call(host, name, args)
    } else if family(status::NAMES) {
        status::call(host, name, args)
    } else if family(chat::NAMES) {
        chat::call(host, name, args)
    } else if family(matches::NAMES) {
        matches::call(host, name, args)
    } else if family(http::NAMES) {
        http::call(host, name, args)
    } else if family(sessions::NAMES) {
        sessions::call(host, name, args)
    } else if family(files::NAMES) {
        files::call(host, name, args)
    } else if family(streams::NAMES) {
        streams::call(host, name, args)
    } else if family(crypto::NAMES) {
        crypto::call(name, args)
    } else if family(local_cache::NAMES) {
        host.local_cache.call(name, args)
    } else if family(custom_metrics::NAMES) {
        host.custom_metrics.call(name, args)
    } else if family(events::NAMES) {
        events::call(host, name, args)
    } else if family(multi_update::NAMES) {
        multi_update::call(host, name, args)
    } else if family(parties::NAMES) {
        parties::call(host, name, args)
    } else if family(sql::NAMES) {
        sql::call(host, name, args)
    } else if family(purchases::NAMES) {
        purchases::call(host, name, args)
    } else {
        Err(JsError::new(format!("nk.{name} is not available"), 12))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    /// docs/runtime.md's table of Nakama's `nk` says what is true: every function the host
    /// answers is listed as there (✔ or "differs"), or as refused by name; no function listed
    /// as not supported is answered.
    #[test]
    fn the_parity_table_is_true() {
        let doc = include_str!("../../../../../../docs/runtime.md");
        let rows: HashMap<&str, &str> = doc
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("| `")?;
                let (name, rest) = rest.split_once("` | ")?;
                Some((name, rest.trim_end_matches(" |")))
            })
            .collect();
        let served = super::names();
        for name in &served {
            let status = rows
                .get(name)
                .unwrap_or_else(|| panic!("nk.{name} is not in docs/runtime.md's table"));
            assert!(
                status.starts_with('✔')
                    || status.starts_with("differs")
                    || status.contains("refused by name"),
                "nk.{name} is answered, but the table says: {status}"
            );
        }
        for (name, status) in &rows {
            if status.starts_with("not supported") && !status.contains("refused by name") {
                assert!(
                    !served.contains(name),
                    "the table says nk.{name} is not supported, but it is answered"
                );
            }
        }
    }
}
