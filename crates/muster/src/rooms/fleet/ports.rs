//! The game ports of `fleet.port_range`: one per process, handed out in turn (so a port just
//! given back is the last to be reused: a player still connecting to the old process does not
//! reach a new one), skipping ports something else already listens on.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, TcpListener};

use parking_lot::Mutex;

pub struct Ports {
    first: u16,
    last: u16,
    state: Mutex<State>,
}

struct State {
    taken: BTreeSet<u16>,
    /// Where the next search starts.
    next: u16,
}

impl Ports {
    pub fn new(first: u16, last: u16) -> Ports {
        Ports {
            first,
            last,
            state: Mutex::new(State {
                taken: BTreeSet::new(),
                next: first,
            }),
        }
    }

    /// A free port of the range, now this caller's; `None` when every one is taken.
    pub fn take(&self) -> Option<u16> {
        let mut state = self.state.lock();
        let size = u32::from(self.last - self.first) + 1;
        for step in 0..size {
            let offset = (u32::from(state.next - self.first) + step) % size;
            let port = self.first + offset as u16;
            if state.taken.contains(&port) || !bindable(port) {
                continue;
            }
            state.taken.insert(port);
            state.next = if port == self.last {
                self.first
            } else {
                port + 1
            };
            return Some(port);
        }
        None
    }

    pub fn give_back(&self, port: u16) {
        self.state.lock().taken.remove(&port);
    }

    pub fn in_use(&self) -> usize {
        self.state.lock().taken.len()
    }
}

/// Whether nothing listens on `port` (on all addresses) now.
fn bindable(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_each_port_once_in_turn_and_skips_busy_ones() {
        let busy = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind");
        let b = busy.local_addr().expect("addr").port();
        // A range of three around the busy port (the busy one is skipped).
        let first = b.saturating_sub(1).max(1);
        let ports = Ports::new(first, first + 2);
        let mut got = Vec::new();
        while let Some(p) = ports.take() {
            got.push(p);
        }
        assert!(!got.contains(&b), "{got:?} includes busy {b}");
        assert!(got.len() <= 2 && got.iter().all(|p| (first..=first + 2).contains(p)));
        assert_eq!(ports.in_use(), got.len());
        // Given back, a port comes round again only after the others.
        ports.give_back(got[0]);
        assert_eq!(ports.take(), Some(got[0]));
        assert_eq!(ports.take(), None);
    }
}
