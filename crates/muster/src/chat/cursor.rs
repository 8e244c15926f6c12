//! Paging through a channel's history (`GET /v2/channel/{channel_id}`), as Nakama's
//! `ListChannelMessages` does: a page of at most `limit` messages in the order asked for
//! (`forward`: oldest first), a `next_cursor` to continue past its last message, a `prev_cursor`
//! to go back before its first, and a `cacheable_cursor` that lists what arrives later.
//!
//! Messages are ordered by the store's `seq` (insertion order). A cursor
//! ([`crate::base::cursor`]) names the position, the page's direction, next or previous, and a
//! hash of the channel id, so a cursor is never used on another channel by mistake.

use serde::{Deserialize, Serialize};

use crate::chat::store::HistoryRow;

/// Nakama's largest page.
pub const MAX_LIMIT: usize = 100;

/// A cursor as clients hold it.
#[derive(Serialize, Deserialize)]
struct Wire {
    /// The position.
    s: i64,
    /// The listing's direction (`forward`), and whether it continues after the position.
    f: bool,
    n: bool,
    /// The channel's hash.
    h: u32,
}

/// A decoded cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub seq: i64,
    /// The direction of the listing that issued it.
    pub forward: bool,
    /// True: continue after `seq`; false: go back before it.
    pub is_next: bool,
}

/// Why a cursor cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("Malformed cursor.")]
    Malformed,
    #[error("Cursor belongs to another channel.")]
    OtherChannel,
    #[error("Cursor was issued for the other direction: keep `forward` as it was.")]
    OtherDirection,
}

impl Cursor {
    pub fn encode(&self, channel_id: &str) -> String {
        crate::base::cursor::encode(&Wire {
            s: self.seq,
            f: self.forward,
            n: self.is_next,
            h: channel_hash(channel_id),
        })
    }

    /// Reads a cursor a listing of `channel_id` in direction `forward` may use.
    pub fn decode(text: &str, channel_id: &str, forward: bool) -> Result<Cursor, CursorError> {
        let wire: Wire = crate::base::cursor::decode(text).ok_or(CursorError::Malformed)?;
        if wire.h != channel_hash(channel_id) {
            return Err(CursorError::OtherChannel);
        }
        if wire.f != forward {
            return Err(CursorError::OtherDirection);
        }
        Ok(Cursor {
            seq: wire.s,
            forward: wire.f,
            is_next: wire.n,
        })
    }
}

/// FNV-1a: a cursor check, not a secret.
fn channel_hash(channel_id: &str) -> u32 {
    channel_id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// What to read from the store for one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Read in ascending `seq` order.
    pub ascending: bool,
    /// Read only past this position, in the reading direction.
    pub from_seq: Option<i64>,
    /// Rows to read: one more than the page, to know whether more follow.
    pub read: usize,
    forward: bool,
    limit: usize,
    cursor: Option<Cursor>,
}

impl Plan {
    pub fn new(forward: bool, limit: usize, cursor: Option<Cursor>) -> Plan {
        // A "previous" cursor reads backwards from its position, and the rows are turned
        // around afterwards so the page is still in the order asked for.
        let ascending = match cursor {
            Some(c) if !c.is_next => !forward,
            _ => forward,
        };
        Plan {
            ascending,
            from_seq: cursor.map(|c| c.seq),
            read: limit + 1,
            forward,
            limit,
            cursor,
        }
    }

    /// Turns the rows read into the page and its cursors.
    pub fn page(&self, mut rows: Vec<HistoryRow>, channel_id: &str, incoming: &str) -> Page {
        let more = rows.len() > self.limit;
        rows.truncate(self.limit);
        let backwards = self.cursor.is_some_and(|c| !c.is_next);
        if backwards {
            rows.reverse();
        }
        let at = |row: Option<&HistoryRow>, is_next: bool| {
            row.map(|r| {
                Cursor {
                    seq: r.seq,
                    forward: self.forward,
                    is_next,
                }
                .encode(channel_id)
            })
        };
        // Past the last row: known from the extra row when reading forwards, and known to exist
        // (we came from there) when reading back from a "previous" cursor. Before the first row:
        // the other way round.
        let (has_next, has_prev) = if backwards {
            (true, more)
        } else {
            (more, self.cursor.is_some())
        };
        let next_cursor = if has_next {
            at(rows.last(), true)
        } else {
            None
        };
        let prev_cursor = if has_prev {
            at(rows.first(), false)
        } else {
            None
        };
        let newest = if self.forward {
            rows.last()
        } else {
            rows.first()
        };
        let cacheable_cursor = match newest {
            Some(row) => Some(
                Cursor {
                    seq: row.seq,
                    forward: true,
                    is_next: true,
                }
                .encode(channel_id),
            ),
            None if self.forward && self.cursor.is_some() => Some(incoming.to_owned()),
            None => None,
        };
        Page {
            rows,
            next_cursor,
            prev_cursor,
            cacheable_cursor,
        }
    }
}

/// One page of history, in the order asked for.
pub struct Page {
    pub rows: Vec<HistoryRow>,
    pub next_cursor: Option<String>,
    pub prev_cursor: Option<String>,
    pub cacheable_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::store::ChannelMessageRecord;

    const CHANNEL: &str = "2...lobby";

    fn cursor_round_trip(c: Cursor) {
        assert_eq!(
            Cursor::decode(&c.encode(CHANNEL), CHANNEL, c.forward),
            Ok(c)
        );
    }

    #[test]
    fn cursors_round_trip_and_refuse_misuse() {
        for (seq, forward, is_next) in
            [(0, true, true), (i64::MAX, false, false), (42, true, false)]
        {
            cursor_round_trip(Cursor {
                seq,
                forward,
                is_next,
            });
        }
        let text = Cursor {
            seq: 5,
            forward: true,
            is_next: true,
        }
        .encode(CHANNEL);
        assert_eq!(
            Cursor::decode(&text, "2...other", true),
            Err(CursorError::OtherChannel)
        );
        assert_eq!(
            Cursor::decode(&text, CHANNEL, false),
            Err(CursorError::OtherDirection)
        );
        for bad in ["", "!!", "AQ", "AQIDBAUGBwgJCgsMDQ4PEA"] {
            assert_eq!(
                Cursor::decode(bad, CHANNEL, true),
                Err(CursorError::Malformed),
                "{bad}"
            );
        }
    }

    /// Simulates the store: seqs 1..=n, read as a plan says.
    fn read(n: i64, plan: &Plan) -> Vec<HistoryRow> {
        let mut seqs: Vec<i64> = (1..=n).collect();
        if !plan.ascending {
            seqs.reverse();
        }
        seqs.into_iter()
            .filter(|s| match plan.from_seq {
                None => true,
                Some(from) if plan.ascending => *s > from,
                Some(from) => *s < from,
            })
            .take(plan.read)
            .map(|seq| HistoryRow {
                seq,
                message: ChannelMessageRecord {
                    id: uuid::Uuid::nil(),
                    channel_id: CHANNEL.into(),
                    code: 0,
                    sender_id: uuid::Uuid::nil(),
                    username: String::new(),
                    content: "{}".into(),
                    create_time_ms: 0,
                    update_time_ms: 0,
                },
            })
            .collect()
    }

    fn list(n: i64, forward: bool, limit: usize, cursor: Option<&str>) -> (Vec<i64>, Page) {
        let decoded = cursor.map(|c| Cursor::decode(c, CHANNEL, forward).expect("valid cursor"));
        let plan = Plan::new(forward, limit, decoded);
        let page = plan.page(read(n, &plan), CHANNEL, cursor.unwrap_or(""));
        (page.rows.iter().map(|r| r.seq).collect(), page)
    }

    #[test]
    fn pages_forward_then_back() {
        let (seqs, p1) = list(5, true, 2, None);
        assert_eq!(seqs, [1, 2]);
        assert!(p1.prev_cursor.is_none());
        let (seqs, p2) = list(5, true, 2, p1.next_cursor.as_deref());
        assert_eq!(seqs, [3, 4]);
        let (seqs, p3) = list(5, true, 2, p2.next_cursor.as_deref());
        assert_eq!(seqs, [5]);
        assert!(p3.next_cursor.is_none(), "nothing after the last");
        let (seqs, back) = list(5, true, 2, p3.prev_cursor.as_deref());
        assert_eq!(seqs, [3, 4], "previous page, still oldest first");
        let (seqs, first) = list(5, true, 2, back.prev_cursor.as_deref());
        assert_eq!(seqs, [1, 2]);
        assert!(first.prev_cursor.is_none(), "nothing before the first");
        let (seqs, _) = list(5, true, 2, first.next_cursor.as_deref());
        assert_eq!(seqs, [3, 4]);
    }

    #[test]
    fn pages_backward_newest_first() {
        let (seqs, p1) = list(5, false, 2, None);
        assert_eq!(seqs, [5, 4]);
        let (seqs, p2) = list(5, false, 2, p1.next_cursor.as_deref());
        assert_eq!(seqs, [3, 2]);
        let (seqs, p3) = list(5, false, 2, p2.next_cursor.as_deref());
        assert_eq!(seqs, [1]);
        assert!(p3.next_cursor.is_none());
        let (seqs, back) = list(5, false, 2, p3.prev_cursor.as_deref());
        assert_eq!(seqs, [3, 2]);
        let (seqs, _) = list(5, false, 2, back.prev_cursor.as_deref());
        assert_eq!(seqs, [5, 4]);
    }

    #[test]
    fn cacheable_cursor_lists_what_comes_later() {
        let (_, page) = list(3, true, 10, None);
        let cacheable = page.cacheable_cursor.expect("cacheable");
        let (seqs, later) = list(3, true, 10, Some(&cacheable));
        assert!(seqs.is_empty(), "nothing newer yet");
        assert_eq!(later.cacheable_cursor.as_deref(), Some(cacheable.as_str()));
        let (seqs, _) = list(5, true, 10, Some(&cacheable));
        assert_eq!(seqs, [4, 5], "two arrived since");
        let (_, newest_first) = list(3, false, 1, None);
        let from_backward = newest_first.cacheable_cursor.expect("cacheable");
        let (seqs, _) = list(5, true, 10, Some(&from_backward));
        assert_eq!(seqs, [4, 5], "from a newest-first listing too");
    }
}
