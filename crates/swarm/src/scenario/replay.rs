//! Recorded match inputs, replayed by the `replay` step (Hathora's flow: "run a replay of a
//! playthrough") and written by the `play` step's `record` key.
//!
//! The file is JSON lines. The first line is a header, every other line one message a client
//! sent, in send order:
//!
//! ```text
//! {"format":"muster-replay","version":1,"connections":2}
//! {"t_ms":0.0,"conn":0,"op":1,"data":"AQAAAAEA"}
//! {"t_ms":66.7,"conn":1,"op":1,"data":"AQAAAAAB"}
//! ```
//!
//! `t_ms` is the send time since the start of play, `conn` the connection (player) index, `op`
//! the match op code and `data` the payload in base64. Replaying sends each message on
//! connection `conn` at `t_ms` after the replay starts (over the room's connections, `conn`
//! modulo their number).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "muster-replay";

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    connections: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    t_ms: f64,
    conn: u32,
    op: i64,
    data: String,
}

/// One recorded message.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub at: Duration,
    pub conn: u32,
    pub op: i64,
    pub data: Vec<u8>,
}

/// A whole recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub connections: u32,
    pub records: Vec<Record>,
}

/// Replay files a coordinator shipped to this (remote) worker, by the path the scenario names
/// them with: a worker on another machine need not have them on disk.
static SHIPPED: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);

/// Makes `files` (path as the scenario names it → text) what [`Replay::load`] reads for those
/// paths, in place of what a previous run shipped.
pub fn provide_shipped(files: HashMap<PathBuf, String>) {
    if let Ok(mut shipped) = SHIPPED.lock() {
        *shipped = Some(files);
    }
}

fn shipped(path: &Path) -> Option<String> {
    SHIPPED.lock().ok()?.as_ref()?.get(path).cloned()
}

impl Replay {
    /// Reads a replay file: a shipped copy when the coordinator sent one, else from disk.
    pub fn load(path: &Path) -> Result<Replay, String> {
        if let Some(text) = shipped(path) {
            return Replay::parse(&text).map_err(|e| format!("{}: {e}", path.display()));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the replay: {e}", path.display()))?;
        Replay::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Replay, String> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or("empty replay file")?;
        let header: Header =
            serde_json::from_str(first).map_err(|e| format!("line 1: bad header: {e}"))?;
        if header.format != FORMAT || header.version != 1 {
            return Err(format!("line 1: not a {FORMAT} version 1 file"));
        }
        if header.connections == 0 {
            return Err("line 1: connections must be at least 1".into());
        }
        let mut records = Vec::new();
        let mut last = 0.0;
        for (i, line) in lines {
            let n = i + 1;
            let line: Line = serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))?;
            if !(line.t_ms.is_finite() && line.t_ms >= last) {
                return Err(format!("line {n}: t_ms must not go back in time"));
            }
            last = line.t_ms;
            let data = base64::engine::general_purpose::STANDARD
                .decode(&line.data)
                .map_err(|_| format!("line {n}: data is not base64"))?;
            records.push(Record {
                at: Duration::from_secs_f64(line.t_ms / 1000.0),
                conn: line.conn % header.connections,
                op: line.op,
                data,
            });
        }
        Ok(Replay {
            connections: header.connections,
            records,
        })
    }

    /// How long the replay lasts.
    pub fn duration(&self) -> Duration {
        self.records.last().map_or(Duration::ZERO, |r| r.at)
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let mut out = Vec::new();
        let header = Header {
            format: FORMAT.into(),
            version: 1,
            connections: self.connections,
        };
        let mut push = |line: String| {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        };
        push(serde_json::to_string(&header).unwrap_or_default());
        for r in &self.records {
            let line = Line {
                t_ms: (r.at.as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
                conn: r.conn,
                op: r.op,
                data: base64::engine::general_purpose::STANDARD.encode(&r.data),
            };
            push(serde_json::to_string(&line).unwrap_or_default());
        }
        let mut file = std::fs::File::create(path)
            .map_err(|e| format!("{}: cannot write the replay: {e}", path.display()))?;
        file.write_all(&out)
            .map_err(|e| format!("{}: cannot write the replay: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_bad_files() {
        let replay = Replay {
            connections: 2,
            records: vec![
                Record {
                    at: Duration::from_millis(0),
                    conn: 0,
                    op: 1,
                    data: vec![1, 2],
                },
                Record {
                    at: Duration::from_millis(66),
                    conn: 1,
                    op: 1,
                    data: vec![3],
                },
            ],
        };
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("r.jsonl");
        replay.write(&path).expect("write");
        assert_eq!(Replay::load(&path).expect("load"), replay);
        assert_eq!(replay.duration(), Duration::from_millis(66));
        for bad in [
            "",
            "{\"format\":\"other\",\"version\":1,\"connections\":2}",
            "{\"format\":\"muster-replay\",\"version\":1,\"connections\":1}\n{\"t_ms\":5,\"conn\":0,\"op\":1,\"data\":\"AA==\"}\n{\"t_ms\":1,\"conn\":0,\"op\":1,\"data\":\"AA==\"}",
            "{\"format\":\"muster-replay\",\"version\":1,\"connections\":1}\n{\"t_ms\":1,\"conn\":0,\"op\":1,\"data\":\"!!\"}",
        ] {
            assert!(Replay::parse(bad).is_err(), "{bad}");
        }
    }
}
