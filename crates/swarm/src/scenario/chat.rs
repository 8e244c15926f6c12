//! The chat steps as the scenario file writes them (`chat_join`, `chat`), checked when the
//! scenario is loaded; `steps::chat` runs them.

use serde::{Deserialize, Deserializer};

use super::Seconds;

/// `[low, high]` seconds; `low <= high`, both positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondsRange(pub Seconds, pub Seconds);

impl<'de> Deserialize<'de> for SecondsRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [low, high] = <[Seconds; 2]>::deserialize(d)?;
        if low.0 > high.0 {
            return Err(serde::de::Error::custom(format!(
                "[{}, {}]: the first number must not exceed the second",
                low.0, high.0
            )));
        }
        Ok(SecondsRange(low, high))
    }
}

/// `[low, high]` bytes, `1 <= low <= high <= 4000`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BytesRange(pub u32, pub u32);

impl<'de> Deserialize<'de> for BytesRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [low, high] = <[u32; 2]>::deserialize(d)?;
        if low == 0 || low > high || high > 4000 {
            return Err(serde::de::Error::custom(format!(
                "[{low}, {high}]: expected 1 <= low <= high <= 4000 bytes"
            )));
        }
        Ok(BytesRange(low, high))
    }
}

/// `do = "chat_join"`: join one room out of `channels`.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinStep {
    /// How many rooms the players are spread over (M).
    pub channels: u64,
    /// When set, consecutive players share a room: player `i` joins room `(i / group_size) % M`
    /// (so M × group_size players fill every room exactly). Otherwise each player picks one
    /// uniformly at random.
    pub group_size: Option<u64>,
    /// Room names are `<room_prefix>-<k>`.
    pub room_prefix: String,
    /// Ask the server to store the player's messages (Nakama's `persistence`).
    pub persistence: bool,
    /// Join without a presence (Nakama's `hidden`).
    pub hidden: bool,
    pub timeout_s: Option<Seconds>,
}

/// `do = "chat"`: send messages to the room joined last.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatStep {
    /// Each message is sent a uniformly random time in this range after the previous one.
    pub interval_s: SecondsRange,
    /// The random text of each message has a uniformly random length in this range.
    pub message_bytes: BytesRange,
    /// How long to keep sending; until the run ends when absent.
    pub duration_s: Option<Seconds>,
    /// How long to wait for each ack.
    pub timeout_s: Option<Seconds>,
}

impl JoinStep {
    /// The room of player `index`.
    pub fn room(&self, index: u64, rng: &mut fastrand::Rng) -> String {
        let k = match self.group_size {
            Some(g) => (index / g.max(1)) % self.channels,
            None => rng.u64(0..self.channels),
        };
        format!("{}-{k}", self.room_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_by_group_or_uniform() {
        let step = JoinStep {
            channels: 4,
            group_size: Some(5),
            room_prefix: "r".into(),
            persistence: false,
            hidden: false,
            timeout_s: None,
        };
        let mut rng = fastrand::Rng::with_seed(0);
        let rooms: Vec<String> = (0..25).map(|i| step.room(i, &mut rng)).collect();
        assert_eq!(&rooms[..6], ["r-0", "r-0", "r-0", "r-0", "r-0", "r-1"]);
        assert_eq!(rooms[20], "r-0", "wraps around after M groups");
        let uniform = JoinStep {
            group_size: None,
            ..step
        };
        let picked: std::collections::HashSet<String> =
            (0..200).map(|i| uniform.room(i, &mut rng)).collect();
        assert_eq!(picked.len(), 4, "every room gets players");
    }
}
