//! A socket's own chat state: the channels it is in (with where it sits in each member list) and
//! its message budget. It lives in the socket's [`Session`](crate::session::Session)
//! because other sockets' leaves move this one inside a channel's member list and must update the
//! index kept here (see [`super::registry`] for the lock order).
//!
//! Size matters: every socket carries one, chatting or not. Idle, it is a mutex, an empty `Vec`
//! (no allocation) and a 16-byte token bucket: 48 bytes.

use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Instant;

use parking_lot::Mutex;

use super::{Channel, ChannelRefusal};

/// Per-socket chat state. Locked briefly: never while a channel's lock is wanted (the order is
/// always channel → session, never the reverse).
#[derive(Default)]
pub struct SessionChannels {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    joined: Vec<Joined>,
    bucket: TokenBucket,
}

/// One channel this socket is in.
pub(super) struct Joined {
    pub channel: Arc<Channel>,
    /// This socket's position in the channel's member list; a swap-remove of another member
    /// that moves this one rewrites it (under the channel's lock).
    pub index: u32,
    pub flags: JoinFlags,
}

/// How a socket joined a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JoinFlags {
    /// Messages this socket sends are stored in the channel's history.
    pub persistence: bool,
    /// This socket is left out of the channel's presence list and presence events.
    pub hidden: bool,
    /// A status follower (hidden too): told of the followed user's sessions; its membership is
    /// this node's only (other nodes never deliver to it, so they are not told of it).
    pub follower: bool,
    /// One of a user's own sessions on its status channel: told nothing; its presence carries
    /// the session's status message.
    pub publisher: bool,
}

impl JoinFlags {
    /// A membership of the status domain's, not a chat channel's.
    pub fn is_status(&self) -> bool {
        self.follower || self.publisher
    }
}

/// What a message send needs to know about the channel it goes to.
pub struct Admitted {
    pub channel: Arc<Channel>,
    pub flags: JoinFlags,
}

impl SessionChannels {
    /// Channels joined now.
    pub fn joined_count(&self) -> usize {
        self.state.lock().joined.len()
    }

    /// Status memberships now (follows and the socket's own status channel): chat's bound on
    /// channels leaves them out.
    pub fn status_count(&self) -> usize {
        let state = self.state.lock();
        state.joined.iter().filter(|j| j.flags.is_status()).count()
    }

    /// Users this socket follows now.
    pub fn follow_count(&self) -> usize {
        let state = self.state.lock();
        state.joined.iter().filter(|j| j.flags.follower).count()
    }

    /// The channel `channel_id` if this socket joined it, with its join flags.
    pub fn find(&self, channel_id: &str) -> Option<Admitted> {
        let state = self.state.lock();
        state
            .joined
            .iter()
            .find(|j| &*j.channel.id == channel_id)
            .map(|j| Admitted {
                channel: j.channel.clone(),
                flags: j.flags,
            })
    }

    /// Takes one message from the budget, then finds the channel: a rate-limited socket is
    /// refused before anything else is looked at.
    pub fn admit(
        &self,
        channel_id: &str,
        per_sec: u32,
        burst: u32,
    ) -> Result<Admitted, ChannelRefusal> {
        let mut state = self.state.lock();
        if !state.bucket.take(per_sec, burst, coarse_now_ms()) {
            return Err(ChannelRefusal::RateLimited { per_sec });
        }
        state
            .joined
            .iter()
            .find(|j| &*j.channel.id == channel_id)
            .map(|j| Admitted {
                channel: j.channel.clone(),
                flags: j.flags,
            })
            .ok_or(ChannelRefusal::NotJoined)
    }

    /// Records a new membership at `index` of `channel`'s member list. Called with the channel
    /// locked.
    pub(super) fn add(&self, channel: Arc<Channel>, index: u32, flags: JoinFlags) {
        let mut state = self.state.lock();
        // Grow one slot at a time: a socket is in a handful of channels, and a `Vec`'s default
        // first allocation (four slots) would be three quarters empty for most of them.
        if state.joined.len() == state.joined.capacity() {
            state.joined.reserve_exact(1);
        }
        state.joined.push(Joined {
            channel,
            index,
            flags,
        });
    }

    /// Forgets the membership in `channel`, returning where it sat and how it joined. Called
    /// with the channel locked.
    pub(super) fn remove(&self, channel: &Arc<Channel>) -> Option<(u32, JoinFlags)> {
        let mut state = self.state.lock();
        let at = state
            .joined
            .iter()
            .position(|j| Arc::ptr_eq(&j.channel, channel))?;
        let joined = state.joined.swap_remove(at);
        if state.joined.is_empty() {
            state.joined = Vec::new();
        }
        Some((joined.index, joined.flags))
    }

    /// Records that this socket now sits at `index` of `channel` (another member's swap-remove
    /// moved it). Called with the channel locked.
    pub(super) fn moved(&self, channel: &Arc<Channel>, index: u32) {
        let mut state = self.state.lock();
        if let Some(joined) = state
            .joined
            .iter_mut()
            .find(|j| Arc::ptr_eq(&j.channel, channel))
        {
            joined.index = index;
        }
    }

    /// Every channel this socket is in (for the disconnect cleanup).
    /// The ids of the channels joined now.
    pub fn channel_ids(&self) -> Vec<Arc<str>> {
        let state = self.state.lock();
        state.joined.iter().map(|j| j.channel.id.clone()).collect()
    }

    /// The ids of the channels joined now, with how each was joined.
    pub fn memberships(&self) -> Vec<(Arc<str>, JoinFlags)> {
        let state = self.state.lock();
        state
            .joined
            .iter()
            .map(|j| (j.channel.id.clone(), j.flags))
            .collect()
    }

    pub(super) fn channels(&self) -> Vec<Arc<Channel>> {
        let state = self.state.lock();
        state.joined.iter().map(|j| j.channel.clone()).collect()
    }

    /// Where this socket sits in `channel` (tests and invariant checks).
    #[cfg(test)]
    pub(super) fn index_in(&self, channel: &Arc<Channel>) -> Option<u32> {
        let state = self.state.lock();
        state
            .joined
            .iter()
            .find(|j| Arc::ptr_eq(&j.channel, channel))
            .map(|j| j.index)
    }
}

/// A token bucket kept as the debt owed to it, so a new socket starts full without knowing the
/// configuration: `spent` tokens drain away at `per_sec`, and a message is allowed while the
/// debt after it stays within `burst`. Hand-written because it lives inside a lock the socket
/// already takes for every message and costs 16 bytes; a `governor` direct limiter per socket
/// would carry its own clock and quota in every one of a million sockets.
#[derive(Default)]
struct TokenBucket {
    spent: f32,
    at_ms: u64,
}

impl TokenBucket {
    fn take(&mut self, per_sec: u32, burst: u32, now_ms: u64) -> bool {
        if per_sec == 0 {
            return true;
        }
        let elapsed_s = now_ms.saturating_sub(self.at_ms) as f32 / 1000.0;
        self.at_ms = now_ms;
        self.spent = (self.spent - elapsed_s * per_sec as f32).max(0.0);
        if self.spent + 1.0 > burst as f32 {
            return false;
        }
        self.spent += 1.0;
        true
    }
}

/// Milliseconds since the first call in this process: a cheap monotonic clock for rate limits.
fn coarse_now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let mut bucket = TokenBucket::default();
        let start = 1_000_000;
        assert!((0..5).all(|_| bucket.take(2, 5, start)), "a burst of 5");
        assert!(!bucket.take(2, 5, start), "the 6th at once is refused");
        assert!(
            !bucket.take(2, 5, start + 400),
            "0.8 token refilled: still refused"
        );
        assert!(
            bucket.take(2, 5, start + 500),
            "one token after 0.5 s at 2/s"
        );
        assert!(!bucket.take(2, 5, start + 500));
        assert!(
            (0..5).all(|_| bucket.take(2, 5, start + 60_000)),
            "full again after a quiet minute, and no fuller than the burst"
        );
        assert!(!bucket.take(2, 5, start + 60_000));
        assert!((0..1000).all(|_| bucket.take(0, 0, start)), "0 disables");
    }

    #[test]
    fn an_idle_session_s_channels_are_small() {
        assert!(std::mem::size_of::<SessionChannels>() <= 48);
    }
}
