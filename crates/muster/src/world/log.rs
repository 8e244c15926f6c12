//! A shard's action log: every player action the shard applied, appended and synced to disk
//! before the action is acknowledged, so a crash loses nothing acknowledged. A restore replays
//! the actions after its checkpoint's last one.
//!
//! The log is a series of segment files `shard-N.log.<first seq>`. Each record is one line,
//! `<seq>\t<crc32 of the JSON, hex>\t<JSON>`. A run appends to a segment of its own, and starts
//! a new one at each checkpoint; once the checkpoint is on disk, the segments it covers are
//! deleted.
//!
//! Nothing is ever written after bytes that were not acknowledged:
//! - an append that fails (a short write, a failed sync) is undone at once: the segment is cut
//!   back to its last synced record ([`AppendError::undone`]); if even that fails, the caller
//!   must take no more actions on this log (the shard stops taking them);
//! - at open, a segment that ends in a torn record (a crash mid-append, never acknowledged) is
//!   cut back to its last whole record, and the cut is reported ([`ActionLog::damage`]).
//!
//! A bad line followed by good ones (damage in the middle, which this writer never leaves) is
//! reported too, and the good records after it are still read.

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
    /// Bytes of the current segment known to be on disk: its records up to the last synced
    /// append. A failed append is cut back to this.
    synced_len: u64,
    /// The segments on disk, by first sequence number, the current one last.
    segments: Vec<(u64, PathBuf)>,
    next_seq: u64,
    /// What opening found wrong (and repaired) in the segments.
    damage: Vec<Damage>,
    /// Tests: the next append writes this many bytes, then fails.
    #[cfg(test)]
    fail_next: Option<usize>,
}

/// A bad stretch found in a segment when the log was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub segment: PathBuf,
    /// Where the bad bytes start.
    pub offset: u64,
    pub bytes: u64,
    /// True for a torn tail (cut off: never acknowledged); false for bad bytes with good records
    /// after them (kept as they are; the records after them were read).
    pub tail: bool,
}

/// An append that did not reach the disk: none of its records is acknowledged.
#[derive(Debug, thiserror::Error)]
#[error("{error} (undone: {undone})")]
pub struct AppendError {
    pub error: std::io::Error,
    /// True when the segment was cut back to its last synced record, so nothing of the failed
    /// append can be read back: its actions count as never applied. False when even that failed:
    /// what the segment holds is unknown, and nothing more may be appended to it.
    pub undone: bool,
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

/// A segment's good records, read up to its last whole line, and what was wrong in it.
struct Segment {
    records: Vec<Record>,
    /// The end of its last good record.
    good_len: u64,
    len: u64,
    /// Bad stretches followed by good records: (offset, bytes).
    holes: Vec<(u64, u64)>,
}

fn read_segment(path: &Path) -> std::io::Result<Segment> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut segment = Segment {
        records: Vec::new(),
        good_len: 0,
        len: 0,
        holes: Vec::new(),
    };
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)? as u64;
        if read == 0 {
            return Ok(segment);
        }
        let start = segment.len;
        segment.len += read;
        let whole = line.last() == Some(&b'\n');
        let record = std::str::from_utf8(&line)
            .ok()
            .filter(|_| whole)
            .and_then(|text| parse(text.trim_end_matches('\n')));
        if let Some(record) = record {
            if start > segment.good_len {
                segment
                    .holes
                    .push((segment.good_len, start - segment.good_len));
            }
            segment.records.push(record);
            segment.good_len = segment.len;
        }
    }
}

impl ActionLog {
    /// Opens shard `shard`'s log in `dir`: returns it (appending to a new segment) and the
    /// records after `applied`, in order. Torn tails are cut off first (see [`Self::damage`]).
    pub fn open(
        dir: &Path,
        shard: usize,
        applied: u64,
    ) -> std::io::Result<(ActionLog, Vec<Record>)> {
        let mut segments = segments(dir, shard)?;
        let mut records = Vec::new();
        let mut damage = Vec::new();
        let mut last = applied;
        for (_, path) in &segments {
            let segment = read_segment(path)?;
            for (offset, bytes) in &segment.holes {
                damage.push(Damage {
                    segment: path.clone(),
                    offset: *offset,
                    bytes: *bytes,
                    tail: false,
                });
            }
            if segment.len > segment.good_len {
                // A torn tail: cut it off, so that nothing is ever written after it.
                let file = OpenOptions::new().write(true).open(path)?;
                file.set_len(segment.good_len)?;
                file.sync_all()?;
                damage.push(Damage {
                    segment: path.clone(),
                    offset: segment.good_len,
                    bytes: segment.len - segment.good_len,
                    tail: true,
                });
            }
            for record in segment.records {
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
        let synced_len = file.metadata()?.len();
        segments.retain(|(first, _)| *first != next_seq);
        segments.push((next_seq, path));
        sync_dir(dir)?;
        Ok((
            ActionLog {
                dir: dir.to_path_buf(),
                shard,
                file,
                synced_len,
                segments,
                next_seq,
                damage,
                #[cfg(test)]
                fail_next: None,
            },
            records,
        ))
    }

    /// What opening found wrong in the segments (torn tails were cut off).
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Appends `records` and syncs them to disk (one sync for the batch). On failure the
    /// append is undone (see [`AppendError`]) and the records' sequence numbers are given
    /// again to what comes next.
    pub fn append(&mut self, records: &[Record]) -> Result<(), AppendError> {
        let mut out = Vec::with_capacity(records.len() * 128);
        for record in records {
            let json = serde_json::to_string(record).map_err(|e| AppendError {
                error: std::io::Error::other(e),
                undone: true,
            })?;
            let crc = crc32fast::hash(json.as_bytes());
            // Writing to a Vec cannot fail.
            let _ = writeln!(out, "{}\t{crc:08x}\t{json}", record.seq);
        }
        match self.write(&out) {
            Ok(()) => {
                self.synced_len += out.len() as u64;
                Ok(())
            }
            Err(error) => {
                let undone = self.undo().is_ok();
                if undone {
                    if let Some(first) = records.iter().map(|r| r.seq).min() {
                        self.next_seq = self.next_seq.min(first);
                    }
                }
                Err(AppendError { error, undone })
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(keep) = self.fail_next.take() {
            // A short write, then a failure, as a full disk gives.
            self.file.write_all(&bytes[..keep.min(bytes.len())])?;
            return Err(std::io::Error::other("injected failure"));
        }
        self.file.write_all(bytes)?;
        self.file.sync_data()
    }

    /// Cuts the current segment back to its last synced record, on disk.
    fn undo(&mut self) -> std::io::Result<()> {
        self.file.set_len(self.synced_len)?;
        self.file.sync_all()
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
        self.synced_len = self.file.metadata()?.len();
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
        let torn = b"5\tdeadbeef\t{\"seq\":5,\"t\"";
        f.write_all(torn).expect("write");
        drop(log);
        let torn_at = std::fs::metadata(&current).expect("meta").len() - torn.len() as u64;
        let (mut log, replay) = ActionLog::open(dir.path(), 3, 0).expect("reopen");
        assert_eq!(
            replay.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        // The torn tail is reported and cut off.
        assert_eq!(
            log.damage(),
            &[Damage {
                segment: current.clone(),
                offset: torn_at,
                bytes: torn.len() as u64,
                tail: true
            }]
        );
        assert_eq!(std::fs::metadata(&current).expect("meta").len(), torn_at);
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

    fn seqs(records: &[Record]) -> Vec<u64> {
        records.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn a_failed_append_is_undone_and_nothing_of_it_is_read_back() {
        // A short write (a full disk), and a whole write whose sync failed.
        for keep in [10, usize::MAX] {
            let dir = tempfile::tempdir().expect("dir");
            let (mut log, _) = ActionLog::open(dir.path(), 0, 0).expect("open");
            let batch: Vec<Record> = (0..2).map(|_| claim(log.next_seq())).collect();
            log.append(&batch).expect("append");
            let failing = claim(log.next_seq());
            log.fail_next = Some(keep);
            let error = log
                .append(std::slice::from_ref(&failing))
                .expect_err("fails");
            assert!(error.undone, "{error}");
            // The failed record's number goes to the next record, appended after the cut.
            let next = Record {
                action: Action::Claim { building: 99 },
                ..claim(log.next_seq())
            };
            assert_eq!(next.seq, 3);
            log.append(std::slice::from_ref(&next)).expect("append");
            drop(log);
            let (log, replay) = ActionLog::open(dir.path(), 0, 0).expect("reopen");
            assert_eq!(seqs(&replay), vec![1, 2, 3], "keep {keep}");
            assert_eq!(
                replay[2], next,
                "the record after the failure, not the failed one"
            );
            assert!(log.damage().is_empty(), "{:?}", log.damage());
        }
    }

    #[test]
    fn a_run_that_died_mid_append_leaves_nothing_in_the_way_of_the_next() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut log, _) = ActionLog::open(dir.path(), 1, 0).expect("open");
        let first = claim(log.next_seq());
        log.append(std::slice::from_ref(&first)).expect("append");
        drop(log);
        // The second run dies during its first append: its segment (first seq 2) holds only a
        // torn record.
        let (log, _) = ActionLog::open(dir.path(), 1, 0).expect("open");
        drop(log);
        let segment = segment_path(dir.path(), 1, 2);
        std::fs::write(&segment, b"2\t0000").expect("torn bytes");
        // The third run appends to that same segment: after the cut, not after the torn bytes.
        let (mut log, replay) = ActionLog::open(dir.path(), 1, 0).expect("open");
        assert_eq!(seqs(&replay), vec![1]);
        assert_eq!(log.damage().len(), 1);
        let second = claim(log.next_seq());
        log.append(std::slice::from_ref(&second)).expect("append");
        drop(log);
        let (log, replay) = ActionLog::open(dir.path(), 1, 0).expect("open");
        assert_eq!(seqs(&replay), vec![1, 2]);
        assert!(log.damage().is_empty());
    }

    #[test]
    fn bad_bytes_in_the_middle_are_reported_and_what_follows_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut log, _) = ActionLog::open(dir.path(), 2, 0).expect("open");
        let one = claim(log.next_seq());
        log.append(&[one]).expect("append");
        let segment = segment_path(dir.path(), 2, 1);
        let mut f = OpenOptions::new()
            .append(true)
            .open(&segment)
            .expect("open");
        f.write_all(b"2\tffffffff\t{\"bad\":1}\n").expect("write");
        drop(f);
        log.synced_len = std::fs::metadata(&segment).expect("meta").len();
        log.next_seq();
        let three = claim(log.next_seq());
        log.append(&[three]).expect("append");
        drop(log);
        let (log, replay) = ActionLog::open(dir.path(), 2, 0).expect("open");
        assert_eq!(seqs(&replay), vec![1, 3]);
        assert_eq!(log.damage().len(), 1);
        assert!(!log.damage()[0].tail);
    }
}
