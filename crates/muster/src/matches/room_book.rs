//! The book of this node's built-in rooms: in the order they were created (and per handler), so a listing
//! reads one page of it instead of walking every match, and counted per creator, so one
//! player cannot fill the node (`rooms.max_rooms_per_user`, `rooms.creates_per_user_per_minute`).
//!
//! A room enters the book when it is created and leaves it when its match ends, before a
//! `DELETE` of it is answered; the counts are kept on those two events, never by walking.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::Engine;
use parking_lot::Mutex;
use uuid::Uuid;

use super::error::MatchError;
use crate::base::ratelimit::KeyedLimit;

/// Where a room sits in the book: its number in the order rooms were created on this node.
type Place = u64;

#[derive(Default)]
struct Pages {
    /// Rooms by place.
    all: BTreeMap<Place, String>,
    /// (handler, place) of every room.
    by_handler: BTreeSet<(String, Place)>,
    /// Each room's place and handler, by id.
    places: HashMap<String, (Place, String)>,
    next: Place,
    per_owner: HashMap<Uuid, usize>,
}

pub struct RoomBook {
    pages: Mutex<Pages>,
    creates: KeyedLimit<Uuid>,
    max_per_user: usize,
}

/// A page of room ids, and the cursor of the next page (none after the last).
pub struct Page {
    pub ids: Vec<String>,
    pub cursor: Option<String>,
}

impl RoomBook {
    pub fn new(max_per_user: usize, creates_per_minute: u32) -> RoomBook {
        RoomBook {
            pages: Mutex::new(Pages::default()),
            creates: KeyedLimit::per_minute(creates_per_minute),
            max_per_user,
        }
    }

    /// Checks that `owner` may create a room now (their creation rate and their rooms), and
    /// counts the room against them; [`RoomBook::remove`] (or [`RoomBook::cancel`], if the room
    /// never comes to be) gives it back.
    pub fn reserve(&self, owner: Uuid) -> Result<(), MatchError> {
        if !self.creates.allow(owner) {
            return Err(MatchError::TooMany(
                "Too many rooms created: slow down.".into(),
            ));
        }
        let mut pages = self.pages.lock();
        let held = pages.per_owner.entry(owner).or_insert(0);
        // An entry at the limit (at least 1) is never empty, so a refusal leaves none behind.
        if self.max_per_user > 0 && *held >= self.max_per_user {
            return Err(MatchError::TooMany(format!(
                "You have {} rooms open, the most one player may: end one first.",
                *held
            )));
        }
        *held += 1;
        Ok(())
    }

    /// Gives back a reservation whose room was not created.
    pub fn cancel(&self, owner: Uuid) {
        release(&mut self.pages.lock().per_owner, owner);
    }

    /// Enters a created room, after every room before it.
    pub fn add(&self, handler: &str, id: &str) {
        let mut pages = self.pages.lock();
        let place = pages.next;
        pages.next += 1;
        pages.all.insert(place, id.to_owned());
        pages.by_handler.insert((handler.to_owned(), place));
        pages
            .places
            .insert(id.to_owned(), (place, handler.to_owned()));
    }

    /// Takes an ended room out, and off its owner's count.
    pub fn remove(&self, id: &str, owner: Option<Uuid>) {
        let mut pages = self.pages.lock();
        if let Some((place, handler)) = pages.places.remove(id) {
            pages.all.remove(&place);
            pages.by_handler.remove(&(handler, place));
        }
        if let Some(owner) = owner {
            release(&mut pages.per_owner, owner);
        }
    }

    /// Rooms open now.
    pub fn len(&self) -> usize {
        self.pages.lock().all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `limit` rooms (of `handler`, if given) created after `cursor`'s, oldest first.
    pub fn page(
        &self,
        handler: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<Page, MatchError> {
        let after = cursor.filter(|c| !c.is_empty()).map(decode).transpose()?;
        let pages = self.pages.lock();
        let from = after.map_or(0, |place| place + 1);
        let mut ids: Vec<(Place, String)> = match handler {
            None => pages
                .all
                .range(from..)
                .take(limit + 1)
                .map(|(place, id)| (*place, id.clone()))
                .collect(),
            Some(handler) => pages
                .by_handler
                .range((handler.to_owned(), from)..)
                .take_while(|(h, _)| h == handler)
                .take(limit + 1)
                .filter_map(|(_, place)| Some((*place, pages.all.get(place)?.clone())))
                .collect(),
        };
        let cursor = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().map(|(place, _)| encode(*place))
        } else {
            None
        };
        Ok(Page {
            ids: ids.into_iter().map(|(_, id)| id).collect(),
            cursor,
        })
    }

    /// Forgets the creation rates of players who have been quiet (housekeeping).
    pub fn prune(&self) {
        self.creates.prune();
    }
}

fn release(per_owner: &mut HashMap<Uuid, usize>, owner: Uuid) {
    if let Some(held) = per_owner.get_mut(&owner) {
        *held = held.saturating_sub(1);
        if *held == 0 {
            per_owner.remove(&owner);
        }
    }
}

/// A cursor: where the previous page ended. Forging one only moves where a listing starts.
fn encode(place: Place) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("room:{place}"))
}

fn decode(cursor: &str) -> Result<Place, MatchError> {
    let bad = || MatchError::BadInput("The cursor is not one this server gave.".into());
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix("room:")
        .and_then(|place| place.parse().ok())
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_creation_and_handler_and_quotas_are_given_back() {
        let book = RoomBook::new(2, 0);
        for (i, handler) in ["arena", "lobby", "arena", "arena", "lobby"]
            .iter()
            .enumerate()
        {
            book.add(handler, &format!("room-{i}"));
        }
        let first = book.page(None, None, 2).expect("page");
        assert_eq!(first.ids, ["room-0", "room-1"]);
        let second = book.page(None, first.cursor.as_deref(), 2).expect("page");
        assert_eq!(second.ids, ["room-2", "room-3"]);
        let last = book.page(None, second.cursor.as_deref(), 2).expect("page");
        assert_eq!(last.ids, ["room-4"]);
        assert!(last.cursor.is_none());
        let arenas = book.page(Some("arena"), None, 2).expect("page");
        assert_eq!(arenas.ids, ["room-0", "room-2"]);
        let more = book
            .page(Some("arena"), arenas.cursor.as_deref(), 2)
            .expect("page");
        assert_eq!(more.ids, ["room-3"]);
        assert!(book
            .page(Some("nothing"), None, 10)
            .expect("page")
            .ids
            .is_empty());
        assert!(book.page(None, Some("garbage!"), 10).is_err());

        let alice = Uuid::from_u128(1);
        book.reserve(alice).expect("first");
        book.reserve(alice).expect("second");
        assert!(matches!(book.reserve(alice), Err(MatchError::TooMany(_))));
        book.remove("room-0", Some(alice));
        book.reserve(alice)
            .expect("a room ended: room for one more");
        book.cancel(alice);
        book.cancel(alice);
        assert!(
            book.pages.lock().per_owner.is_empty(),
            "no count outlives its rooms"
        );
    }

    #[test]
    fn creations_per_minute_are_limited_per_user() {
        let book = RoomBook::new(0, 3);
        let (alice, bob) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for _ in 0..3 {
            book.reserve(alice).expect("within the rate");
        }
        assert!(matches!(book.reserve(alice), Err(MatchError::TooMany(_))));
        book.reserve(bob)
            .expect("another player has a rate of their own");
    }
}
