//! The `channel_presence_event` a channel's members get when someone joins or leaves, in
//! Nakama's form: the channel id and the fields it names (room, group or the two users of a
//! direct chat), with the joins or the leaves.

use muster_proto::realtime::{ChannelPresenceEvent, Envelope, Message, UserPresence};

use super::ids::Fields;
use crate::session::channels::PresenceEvents;
use crate::session::fanout::Encoded;

/// Chat's presence events, given to the channel registry.
pub struct ChatPresence;

impl PresenceEvents for ChatPresence {
    fn joined(&self, channel_id: &str, who: UserPresence) -> Encoded {
        presence_event(channel_id, vec![who], Vec::new())
    }

    fn left(&self, channel_id: &str, who: UserPresence) -> Encoded {
        presence_event(channel_id, Vec::new(), vec![who])
    }
}

fn presence_event(id: &str, joins: Vec<UserPresence>, leaves: Vec<UserPresence>) -> Encoded {
    let fields = Fields::of(id);
    Encoded::new(Envelope::new(
        "",
        Message::ChannelPresenceEvent(ChannelPresenceEvent {
            channel_id: id.to_owned(),
            joins,
            leaves,
            room_name: fields.room_name.to_owned(),
            group_id: fields.group_id.to_owned(),
            user_id_one: fields.user_id_one.to_owned(),
            user_id_two: fields.user_id_two.to_owned(),
        }),
    ))
}
