//! The metagame steps as the scenario file writes them: `storage` (a player's own storage
//! objects, written and read back) and `leaderboard` (scores submitted, records read around the
//! player), both over Nakama's REST API; `steps::storage` and `steps::leaderboard` run them.
//!
//! ```toml
//! [[steps]]
//! do = "storage"
//! interval_s = [5, 10]    # a random wait before each call (or one number)
//! collection = "saves"    # default "swarm"
//! key = "save"            # default "save"; with keys = N, one of save-0 … save-(N-1) per call
//! value_bytes = 200       # the JSON object written, in bytes (default 100)
//! read_ratio = 0.5        # the share of calls that read instead of write (default 0.5)
//!
//! [[steps]]
//! do = "leaderboard"
//! interval_s = [5, 10]
//! leaderboard = "scores"  # required; the server must have it
//! score = [0, 1000]       # each submission a random integer in the range (default [0, 1000000])
//! limit = 10              # records listed around the player (default 10)
//! read_ratio = 0.5
//! ```
//!
//! Names go into URLs and bodies as written, so they are checked here: 1-128 ASCII letters,
//! digits, '_', '-' or '.' (Nakama allows more; a load test needs no more).

use serde::{Deserialize, Deserializer};

use super::rpc::Interval;
use super::Seconds;

/// A collection, key or leaderboard id: 1-128 ASCII letters, digits, '_', '-' or '.'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name(pub String);

impl Name {
    fn check(text: String) -> Result<Name, String> {
        let ok = !text.is_empty()
            && text.len() <= 128
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if ok {
            Ok(Name(text))
        } else {
            Err(format!(
                "{text:?}: use 1-128 ASCII letters, digits, '_', '-' or '.'"
            ))
        }
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Name::check(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The share of calls that read, in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub f64);

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if (0.0..=1.0).contains(&v) {
            Ok(Ratio(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "{v} is not a share of calls between 0 and 1"
            )))
        }
    }
}

/// `[min, max]` scores, integers with `min <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreRange(pub i64, pub i64);

impl<'de> Deserialize<'de> for ScoreRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [low, high] = <[i64; 2]>::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected [min, max], two integers"))?;
        if low > high {
            return Err(serde::de::Error::custom(format!(
                "[{low}, {high}]: the minimum is above the maximum"
            )));
        }
        Ok(ScoreRange(low, high))
    }
}

/// The smallest value a `storage` step writes: `{"p":""}`.
pub const MIN_VALUE_BYTES: u32 = 8;
/// The largest: Muster's default `storage.max_value_bytes`.
pub const MAX_VALUE_BYTES: u32 = 65_536;
/// The most distinct keys per player: Muster's default `storage.max_objects_per_user`.
pub const MAX_KEYS: u32 = 10_000;
/// The most records listed around a player (Nakama's bound).
pub const MAX_LIMIT: u32 = 100;

/// `do = "storage"`: write the player's own object, or read it back.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageStep {
    pub collection: Name,
    /// The key, or with `keys > 1` the prefix of `<key>-<k>`, `k` in `[0, keys)`.
    pub key: Name,
    pub keys: u32,
    /// Bytes of each value written (a JSON object padded to exactly this size).
    pub value_bytes: u32,
    pub read_ratio: Ratio,
    pub interval_s: Interval,
    /// How long to keep calling; until the run ends when absent.
    pub duration_s: Option<Seconds>,
    pub timeout_s: Option<Seconds>,
    /// REST or gRPC.
    pub api: super::Api,
}

impl StorageStep {
    /// The `k`th key of a player.
    pub fn key_name(&self, k: u32) -> String {
        if self.keys <= 1 {
            self.key.0.clone()
        } else {
            format!("{}-{k}", self.key.0)
        }
    }
}

/// `do = "leaderboard"`: submit a score, or list the records around the player.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderboardStep {
    pub leaderboard: Name,
    pub score: ScoreRange,
    /// Records asked for around the player (1-100).
    pub limit: u32,
    pub read_ratio: Ratio,
    pub interval_s: Interval,
    pub duration_s: Option<Seconds>,
    pub timeout_s: Option<Seconds>,
    /// REST or gRPC.
    pub api: super::Api,
}

/// A count checked against its range, for `parse.rs` to report at the key's line.
pub fn check_count(key: &str, value: u32, min: u32, max: u32) -> Result<u32, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "key `{key}`: {value} is not between {min} and {max}"
        ))
    }
}

/// The key name with its suffix fits the server's 128 bytes.
pub fn check_keys_fit(key: &Name, keys: u32) -> Result<(), String> {
    let longest = if keys <= 1 {
        key.0.len()
    } else {
        key.0.len() + 1 + (keys - 1).to_string().len()
    };
    if longest > 128 {
        return Err(format!(
            "key `key`: {:?} with keys = {keys} makes keys longer than 128 bytes",
            key.0
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::{Scenario, ScenarioError, Step};

    use super::*;

    const SCENARIO: &str = r#"
name = "t"

[[phases]]
duration_s = 5
players = 10

[[steps]]
do = "authenticate"

[[steps]]
do = "storage"
interval_s = [0.5, 1.5]
duration_s = 3
collection = "saves"
keys = 4
value_bytes = 200
read_ratio = 0.25

[[steps]]
do = "leaderboard"
interval_s = 1
duration_s = 3
leaderboard = "scores"
score = [10, 20]
limit = 5
read_ratio = 0.5
"#;

    fn error_of(text: &str) -> (usize, String) {
        match Scenario::parse(text, "t.toml") {
            Err(ScenarioError::Invalid { line, message, .. }) => (line, message),
            other => panic!("expected an invalid-scenario error, got {other:?}"),
        }
    }

    #[test]
    fn metagame_steps_parse_with_their_defaults() {
        let s = Scenario::parse(SCENARIO, "t.toml").expect("valid");
        let Step::Storage(storage) = &s.steps[1] else {
            panic!("not a storage step")
        };
        assert_eq!(storage.collection.0, "saves");
        assert_eq!(storage.key.0, "save", "the default key");
        assert_eq!(storage.keys, 4);
        assert_eq!(storage.key_name(3), "save-3");
        assert_eq!(storage.value_bytes, 200);
        assert_eq!(storage.read_ratio, Ratio(0.25));
        assert_eq!(
            storage.interval_s,
            Interval::Range(Seconds(0.5), Seconds(1.5))
        );
        let Step::Leaderboard(board) = &s.steps[2] else {
            panic!("not a leaderboard step")
        };
        assert_eq!(board.leaderboard.0, "scores");
        assert_eq!(board.score, ScoreRange(10, 20));
        assert_eq!(board.limit, 5);
        assert_eq!(board.interval_s, Interval::Fixed(Seconds(1.0)));

        let defaults = SCENARIO
            .replace(
                "collection = \"saves\"\nkeys = 4\nvalue_bytes = 200\nread_ratio = 0.25\n",
                "",
            )
            .replace("score = [10, 20]\nlimit = 5\nread_ratio = 0.5\n", "");
        let s = Scenario::parse(&defaults, "t.toml").expect("valid");
        let Step::Storage(storage) = &s.steps[1] else {
            panic!("not a storage step")
        };
        assert_eq!(
            (
                storage.collection.0.as_str(),
                storage.keys,
                storage.value_bytes
            ),
            ("swarm", 1, 100)
        );
        assert_eq!(storage.key_name(0), "save", "one key: the key as written");
        assert_eq!(storage.read_ratio, Ratio(0.5));
        let Step::Leaderboard(board) = &s.steps[2] else {
            panic!("not a leaderboard step")
        };
        assert_eq!((board.score, board.limit), (ScoreRange(0, 1_000_000), 10));
    }

    #[test]
    fn metagame_keys_are_checked_at_their_line() {
        let cases = [
            ("read_ratio = 0.25", "read_ratio = 1.5", 18, "read_ratio"),
            ("keys = 4", "keys = 0", 16, "keys"),
            ("keys = 4", "keys = 20000", 16, "keys"),
            ("value_bytes = 200", "value_bytes = 4", 17, "value_bytes"),
            (
                "value_bytes = 200",
                "value_bytes = 70000",
                17,
                "value_bytes",
            ),
            (
                "collection = \"saves\"",
                "collection = \"a/b\"",
                15,
                "collection",
            ),
            (
                "collection = \"saves\"",
                "colection = \"saves\"",
                15,
                "colection",
            ),
            ("score = [10, 20]", "score = [20, 10]", 25, "minimum"),
            ("score = [10, 20]", "score = [1.5, 2]", 25, "score"),
            ("limit = 5", "limit = 0", 26, "limit"),
            ("limit = 5", "limit = 101", 26, "limit"),
            (
                "leaderboard = \"scores\"",
                "leaderboard = \"\"",
                24,
                "leaderboard",
            ),
            ("interval_s = 1", "interval_s = [2, 1]", 22, "minimum"),
        ];
        for (from, to, line, needle) in cases {
            let (at, message) = error_of(&SCENARIO.replacen(from, to, 1));
            assert_eq!(at, line, "{to}: {message}");
            assert!(message.contains(needle), "{to}: {message}");
        }
        // Another step's key, and a missing required one.
        let (at, message) = error_of(&SCENARIO.replace("limit = 5", "keys = 5"));
        assert_eq!(at, 26, "{message}");
        assert!(
            message.contains("keys") && message.contains("leaderboard"),
            "{message}"
        );
        let (_, message) = error_of(&SCENARIO.replace("leaderboard = \"scores\"\n", ""));
        assert!(message.contains("needs `leaderboard`"), "{message}");
        let (_, message) = error_of(&SCENARIO.replace("interval_s = [0.5, 1.5]\n", ""));
        assert!(message.contains("needs `interval_s`"), "{message}");
        // Keys with their suffix must fit the server's 128 bytes.
        let long = format!("key = \"{}\"\nkeys = 4", "k".repeat(127));
        let (at, message) = error_of(&SCENARIO.replace("keys = 4", &long));
        assert_eq!(at, 16, "{message}");
        assert!(message.contains("128"), "{message}");
    }

    #[test]
    fn metagame_steps_need_a_session_and_an_end() {
        let (at, message) =
            error_of(&SCENARIO.replace("do = \"authenticate\"", "do = \"wait\"\nduration_s = 1"));
        assert_eq!(at, 12, "{message}");
        assert!(
            message.contains("storage") && message.contains("authenticate"),
            "{message}"
        );
        let (at, message) = error_of(&SCENARIO.replacen("duration_s = 3\n", "", 1));
        assert_eq!(at, 19, "{message}");
        assert!(message.contains("unreachable"), "{message}");
    }
}
