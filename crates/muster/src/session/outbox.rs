//! A socket's bounded queue of messages written by other tasks (presence, chat fanout, matches).
//!
//! An empty outbox allocates nothing, which matters at a million idle sockets. When a producer
//! finds it full, the outbox is marked overflowed and the socket's task closes the connection
//! with a reason: a client that does not read must not grow the server's memory, and a reliable
//! stream with a hole in it is worse than a reconnect. An outbox can also be closed on purpose
//! ([`Outbox::kick`]: the player was banned): the socket's task ends the connection the same way.
//!
//! A transport that can write without its task ([`Consumer::try_write`]: WebSocket and native
//! TCP) is handed a message at once when nothing waits before it: the producer's thread writes
//! it to the kernel, and the socket's task is not woken at all (a chat message or a match's
//! state costs one system call per recipient, not a task wake-up, a poll and then the call).

use std::collections::VecDeque;
use std::sync::Arc;

use super::codec::Frame as Message;
use parking_lot::Mutex;
use tokio::sync::Notify;

pub struct Outbox {
    state: Mutex<State>,
    ready: Notify,
    /// The transport, when more than a task waiting in [`Outbox::ready`] takes the messages.
    /// One pointer, not an enum of kinds: every session holds it, and 8 bytes more put the
    /// session in jemalloc's next size class (320 bytes instead of 256).
    consumer: Option<Arc<dyn Consumer>>,
    capacity: usize,
}

/// A transport that takes an outbox's messages its own way.
pub trait Consumer: Send + Sync {
    /// Told that the queue has something, instead of the task in [`Outbox::ready`] being
    /// woken, by a transport that serves many sessions from one task (ENet): it learns which
    /// outboxes to drain, and must then take the whole queue, as a task would. False (the
    /// default): wake the task.
    fn wake(&self) -> bool {
        false
    }

    /// Writes one message at once, from whichever thread pushes it, without blocking
    /// (WebSocket and native TCP). The outbox calls it (under its lock, so calls are in push
    /// order) only while its queue is empty: a message written this way never overtakes one
    /// queued before it.
    fn try_write(&self, _message: &Message) -> Direct {
        Direct::NotNow
    }

    /// Woken by every [`Outbox::drain`], for a transport whose session's own task waits for
    /// room ([`Outbox::until_below`]: ENet). Kept by the transport that needs it, not by every
    /// outbox: an idle socket's every byte counts.
    fn drained(&self) -> Option<&Notify> {
        None
    }
}

/// What [`Consumer::try_write`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direct {
    /// All of it is with the kernel.
    Written,
    /// Part of it is; the transport kept the rest, and the socket's task must be woken to
    /// finish it before anything else.
    Begun,
    /// None of it (the socket's task is writing, or the kernel's buffer is full): queue it.
    NotNow,
}

struct State {
    queue: VecDeque<Message>,
    closed: Option<Closed>,
}

/// Why an outbox takes nothing more, and its socket must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// A push found it full: the client does not read fast enough.
    Overflowed,
    /// The server ended the session ([`Outbox::kick`]).
    Kicked,
}

/// What the socket task takes out at once.
pub struct Drained {
    pub messages: VecDeque<Message>,
    /// Set once the outbox is closed: end the socket, for this reason.
    pub closed: Option<Closed>,
}

impl Outbox {
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                closed: None,
            }),
            ready: Notify::new(),
            consumer: None,
            capacity,
        }
    }

    /// An outbox whose messages `consumer` takes its own way ([`Consumer`]).
    pub fn with_consumer(capacity: usize, consumer: Arc<dyn Consumer>) -> Outbox {
        Outbox {
            consumer: Some(consumer),
            ..Outbox::new(capacity)
        }
    }

    /// Queues `message`; false (and the socket will be closed) when the queue is full.
    ///
    /// Only the push that finds the queue empty wakes the socket's task: the task drains the
    /// whole queue when it wakes (and checks [`Outbox::is_empty`] after a write before waiting
    /// again), so later pushes ride on that wake-up instead of scheduling the task once each.
    /// A push that finds the queue empty is first offered to the transport
    /// ([`Consumer::try_write`]), and queued only if it does not take it.
    pub fn push(&self, message: Message) -> bool {
        let mut state = self.state.lock();
        if state.closed.is_some() {
            return false;
        }
        let was_empty = state.queue.is_empty();
        if let (true, Some(consumer)) = (was_empty, &self.consumer) {
            match consumer.try_write(&message) {
                Direct::Written => return true,
                Direct::Begun => {
                    drop(state);
                    self.wake();
                    return true;
                }
                Direct::NotNow => {}
            }
        }
        let accepted = state.queue.len() < self.capacity;
        if accepted {
            state.queue.push_back(message);
        } else {
            state.closed = Some(Closed::Overflowed);
            state.queue = VecDeque::new();
        }
        drop(state);
        if was_empty || !accepted {
            self.wake();
        }
        accepted
    }

    /// Tells the socket's side there is something to take: its transport's wake, or the task
    /// waiting in [`Outbox::ready`].
    fn wake(&self) {
        if !self
            .consumer
            .as_ref()
            .is_some_and(|consumer| consumer.wake())
        {
            self.ready.notify_one();
        }
    }

    /// Resolves when something was pushed since the last [`Outbox::drain`].
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    /// Closes the outbox and wakes its socket's task, which ends the connection: what is queued
    /// is dropped and nothing more is taken.
    pub fn kick(&self) {
        let mut state = self.state.lock();
        if state.closed.is_some() {
            return;
        }
        state.closed = Some(Closed::Kicked);
        state.queue = VecDeque::new();
        drop(state);
        self.wake();
    }

    /// Resolves once the outbox is closed (overflowed or kicked), with why. Consumes wake-ups
    /// meant for [`Outbox::ready`], so whoever waits on it must check [`Outbox::is_empty`]
    /// afterwards.
    pub async fn closed(&self) -> Closed {
        loop {
            if let Some(closed) = self.state.lock().closed {
                return closed;
            }
            self.ready.notified().await;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.state.lock().queue.is_empty()
    }

    pub fn drain(&self) -> Drained {
        let mut state = self.state.lock();
        let drained = Drained {
            messages: std::mem::take(&mut state.queue),
            closed: state.closed,
        };
        drop(state);
        if let Some(drained) = self.drained_notify() {
            drained.notify_waiters();
        }
        drained
    }

    fn drained_notify(&self) -> Option<&Notify> {
        self.consumer
            .as_ref()
            .and_then(|consumer| consumer.drained())
    }

    /// Resolves once fewer than `len` messages wait: a session's own task answering a burst of
    /// requests waits for its transport to take the answers instead of overflowing its outbox.
    /// Only a transport whose consumer has a [`Consumer::drained`] notifier can wait; for the
    /// others this resolves at once.
    pub async fn until_below(&self, len: usize) {
        let Some(notify) = self.drained_notify() else {
            return;
        };
        loop {
            let drained = notify.notified();
            if self.state.lock().queue.len() < len {
                return;
            }
            drained.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_and_overflow_is_sticky() {
        let outbox = Outbox::new(2);
        assert!(outbox.push(Message::Text("a".into())));
        assert!(outbox.push(Message::Text("b".into())));
        outbox.ready().await;
        let drained = outbox.drain();
        assert_eq!(drained.messages.len(), 2);
        assert!(drained.closed.is_none());
        assert!(outbox.push(Message::Text("c".into())));
        assert!(outbox.push(Message::Text("d".into())));
        assert!(!outbox.push(Message::Text("e".into())));
        assert!(!outbox.push(Message::Text("f".into())), "stays overflowed");
        let drained = outbox.drain();
        assert_eq!(drained.closed, Some(Closed::Overflowed));
        assert!(
            drained.messages.is_empty(),
            "an overflowed queue is released at once"
        );
    }

    /// A transport that takes what it is told to, recording what it wrote.
    struct Scripted {
        answer: Mutex<Direct>,
        written: Mutex<Vec<String>>,
    }

    impl Consumer for Scripted {
        fn try_write(&self, message: &Message) -> Direct {
            let answer = *self.answer.lock();
            if answer != Direct::NotNow {
                let Message::Text(text) = message else {
                    panic!("text frames only")
                };
                self.written.lock().push(text.as_str().to_owned());
            }
            answer
        }
    }

    #[tokio::test]
    async fn a_direct_write_never_overtakes_a_queued_message() {
        let direct = Arc::new(Scripted {
            answer: Mutex::new(Direct::Written),
            written: Mutex::new(Vec::new()),
        });
        let outbox = Outbox::with_consumer(4, direct.clone());
        assert!(outbox.push(Message::Text("a".into())));
        assert_eq!(*direct.written.lock(), ["a"]);
        assert!(outbox.is_empty(), "written at once, not queued");

        // The transport is busy: queued, and the task is woken.
        *direct.answer.lock() = Direct::NotNow;
        assert!(outbox.push(Message::Text("b".into())));
        // Free again, but "b" waits: "c" queues behind it instead of overtaking it.
        *direct.answer.lock() = Direct::Written;
        assert!(outbox.push(Message::Text("c".into())));
        assert_eq!(*direct.written.lock(), ["a"]);
        outbox.ready().await;
        let queued: Vec<_> = outbox.drain().messages.into_iter().collect();
        assert_eq!(
            queued,
            [Message::Text("b".into()), Message::Text("c".into())]
        );

        // Written in part: accepted, and the task is woken to finish it.
        *direct.answer.lock() = Direct::Begun;
        assert!(outbox.push(Message::Text("d".into())));
        outbox.ready().await;
        assert!(outbox.is_empty());
        assert_eq!(*direct.written.lock(), ["a", "d"]);

        // A closed outbox offers nothing to the transport.
        outbox.kick();
        assert!(!outbox.push(Message::Text("e".into())));
        assert_eq!(*direct.written.lock(), ["a", "d"]);
    }
}
