//! A shard's action log: every player action the shard applied, appended and synced to disk
//! before the action is acknowledged, so a crash loses nothing acknowledged. A restore replays
//! the actions after its checkpoint's last one.
//!
//! The log is a series of segment files `shard-N.log.<first seq>`. Each record is one line,
//! `<seq>\t<crc32 of the JSON, hex>\t<JSON>`; a torn last line (a crash mid-append, never
//! acknowledged) fails its check and ends the reading of that segment. A run appends to a segment
//! of its own, and starts a new one at each checkpoint; once the checkpoint is on disk, the
//! segments it covers are deleted.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::actions::Action;

/// One logged action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    /// The shard's world time when it was applied, ms.
    pub t: u64,
    /// The player (Muster's user id).
    pub user: uuid::Uuid,
    pub action: Action,
}

pub struct ActionLog {
    dir: PathBuf,
    shard: usize,
    file: File,
    /// The segments on disk, by first sequence number, the current one last.
    segments: Vec<(u64, PathBuf)>,
    next_seq: u64,
}

fn segment_path(dir: &Path, shard: usize, first: u64) -> PathBuf {
    dir.join(format!("shard-{shard}.log.{first}"))
}

/// Shard `shard`'s segments in `dir`, by first sequence number.
fn segments(dir: &Path, shard: usize) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let prefix = format!("shard-{shard}.log.");
    let mut segments: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let first = name.strip_prefix(&prefix)?.parse::<u64>().ok()?;
            Some((first, e.path()))
        })
        .collect();
    segments.sort();
    Ok(segments)
}

/// Deletes shard `shard`'s whole log (its world was replaced).
pub fn remove_all(dir: &Path, shard: usize) -> std::io::Result<()> {
    for (_, path) in segments(dir, shard)? {
        std::fs::remove_file(path)?;
    }
    sync_dir(dir)
}

impl ActionLog {
    /// Opens shard `shard`'s log in `dir`: returns it (appending to a new segment) and the
    /// records after `applied`, in order.
    pub fn open(
        dir: &Path,
        shard: usize,
        applied: u64,
    ) -> std::io::Result<(ActionLog, Vec<Record>)> {
        let mut segments = segments(dir, shard)?;
        let mut records = Vec::new();
        let mut last = applied;
        for (_, path) in &segments {
            for line in BufReader::new(File::open(path)?).lines() {
                let Ok(line) = line else { break };
                let Some(record) = parse(&line) else {
                    // A torn tail: nothing after it in this segment was ever acknowledged.
                    break;
                };
                last = last.max(record.seq);
                if record.seq > applied {
                    records.push(record);
                }
            }
        }
        records.sort_by_key(|r| r.seq);
        let next_seq = last + 1;
        let path = segment_path(dir, shard, next_seq);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        segments.retain(|(first, _)| *first != next_seq);
        segments.push((next_seq, path));
        sync_dir(dir)?;
        Ok((
            ActionLog {
                dir: dir.to_path_buf(),
                shard,
                file,
                segments,
                next_seq,
            },
            records,
        ))
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Appends `records` and syncs them to disk (one sync for the batch).
    pub fn append(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(records.len() * 128);
        for record in records {
            let json = serde_json::to_string(record).map_err(std::io::Error::other)?;
            let crc = crc32fast::hash(json.as_bytes());
            writeln!(out, "{}\t{crc:08x}\t{json}", record.seq)?;
        }
        self.file.write_all(&out)?;
        self.file.sync_data()
    }

    /// Starts a new segment for what follows; returns the first sequence number it will hold
    /// (every record before it is in older segments).
    pub fn rotate(&mut self) -> std::io::Result<u64> {
        let first = self.next_seq;
        if self.segments.last().is_some_and(|(f, _)| *f == first) {
            return Ok(first);
        }
        let path = segment_path(&self.dir, self.shard, first);
        self.file = OpenOptions::new().create(true).append(true).open(&path)?;
        self.segments.push((first, path));
        sync_dir(&self.dir)?;
        Ok(first)
    }

    /// Deletes the segments holding only records before `boundary` (a checkpoint covers them).
    pub fn forget_before(&mut self, boundary: u64) {
        let current = self.segments.last().map(|(f, _)| *f);
        self.segments.retain(|(first, path)| {
            let covered = *first < boundary && Some(*first) != current;
            if covered {
                let _ = std::fs::remove_file(path);
            }
            !covered
        });
    }
}

fn parse(line: &str) -> Option<Record> {
    let mut parts = line.splitn(3, '\t');
    let seq: u64 = parts.next()?.parse().ok()?;
    let crc = u32::from_str_radix(parts.next()?, 16).ok()?;
    let json = parts.next()?;
    if crc32fast::hash(json.as_bytes()) != crc {
        return None;
    }
    let record: Record = serde_json::from_str(json).ok()?;
    (record.seq == seq).then_some(record)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(seq: u64) -> Record {
        Record {
            seq,
            t: seq * 100,
            user: uuid::Uuid::from_u128(seq as u128),
            action: Action::Claim {
                building: seq as u32,
            },
        }
    }

    #[test]
    fn records_survive_reopen_rotation_and_a_torn_tail() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut log, old) = ActionLog::open(dir.path(), 3, 0).expect("open");
        assert!(old.is_empty());
        let batch: Vec<Record> = (0..3).map(|_| claim(log.next_seq())).collect();
        log.append(&batch).expect("append");
        let boundary = log.rotate().expect("rotate");
        assert_eq!(boundary, 4);
        let more = claim(log.next_seq());
        log.append(std::slice::from_ref(&more)).expect("append");
        // A torn record at the end of the current segment (never acknowledged).
        let current = segment_path(dir.path(), 3, 4);
        let mut f = OpenOptions::new()
            .append(true)
            .open(&current)
            .expect("open");
        f.write_all(b"5\tdeadbeef\t{\"seq\":5,\"t\"")
            .expect("write");
        drop(log);
        let (mut log, replay) = ActionLog::open(dir.path(), 3, 0).expect("reopen");
        assert_eq!(
            replay.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(replay[3], more);
        assert_eq!(log.next_seq(), 5);
        // After a checkpoint that applied up to 3, only what follows is replayed...
        let (_, replay) = ActionLog::open(dir.path(), 3, 3).expect("reopen");
        assert_eq!(replay.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![4]);
        // ...and the segment it covers can go.
        log.forget_before(boundary);
        assert!(!segment_path(dir.path(), 3, 1).exists());
        assert!(current.exists());
    }
}
