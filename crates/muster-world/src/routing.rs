//! Shortest paths on the road graph: contraction hierarchies (the `fast_paths` crate), prepared
//! once per map, and a bounded queue of route requests served by worker threads.
//!
//! The queue's length is a counter kept as requests enter and leave, never a walk of the
//! queue: TDWorld's seeding spent its time in `ConcurrentLinkedQueue.size()`, which walks a
//! linked list on every call.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

pub use fast_paths::PathCalculator;
use fast_paths::{FastGraph, InputGraph};

use crate::map::RoadMap;

/// A map's road graph prepared for shortest-path queries (weights: travel time in ms).
pub struct Router {
    graph: FastGraph,
}

impl Router {
    /// Prepares `map`'s graph (seconds for a city; done once per map).
    pub fn prepare(map: &RoadMap) -> Router {
        let mut input = InputGraph::new();
        for from in 0..map.nodes.len() as u32 {
            for e in map.edges_from(from) {
                input.add_edge(from as usize, e.to as usize, e.ms as usize);
            }
        }
        input.freeze();
        Router {
            graph: fast_paths::prepare(&input),
        }
    }

    /// A calculator for [`Router::route`]; one per thread (it holds the search's scratch space).
    pub fn calculator(&self) -> PathCalculator {
        fast_paths::create_calculator(&self.graph)
    }

    /// The road nodes of the fastest path from `from` to `to` (both included), or `None` when
    /// no road leads there.
    pub fn route(&self, calc: &mut PathCalculator, from: u32, to: u32) -> Option<Vec<u32>> {
        if from == to {
            return None;
        }
        let path = calc.calc_path(&self.graph, from as usize, to as usize)?;
        Some(path.get_nodes().iter().map(|&n| n as u32).collect())
    }
}

/// A route request's answer: the path's nodes, or `None` when there is none.
pub type RouteReply = Box<dyn FnOnce(Option<Vec<u32>>) + Send>;

/// Why a request was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("the routing queue is full ({0} waiting); try again shortly")]
    Full(usize),
    #[error("the routing queue has stopped")]
    Stopped,
}

struct Request {
    from: u32,
    to: u32,
    reply: RouteReply,
}

/// A bounded queue of route requests, answered by worker threads sharing one [`Router`].
pub struct RouteQueue {
    sender: Mutex<Option<mpsc::SyncSender<Request>>>,
    capacity: usize,
    /// Requests waiting or being computed: a counter, never a walk.
    queued: Arc<AtomicUsize>,
    served: Arc<AtomicU64>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl RouteQueue {
    /// `workers` threads serving at most `capacity` waiting requests.
    pub fn start(router: Arc<Router>, workers: usize, capacity: usize) -> RouteQueue {
        let (sender, receiver) = mpsc::sync_channel::<Request>(capacity.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        let queued = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicU64::new(0));
        let handles = (0..workers.max(1))
            .map(|i| {
                let (router, receiver, queued, served) = (
                    router.clone(),
                    receiver.clone(),
                    queued.clone(),
                    served.clone(),
                );
                std::thread::Builder::new()
                    .name(format!("world-route-{i}"))
                    .spawn(move || {
                        let mut calc = router.calculator();
                        loop {
                            // The lock is held only while taking one request.
                            let next = match receiver.lock() {
                                Ok(r) => r.recv(),
                                Err(_) => return,
                            };
                            let Ok(request) = next else { return };
                            let path = router.route(&mut calc, request.from, request.to);
                            queued.fetch_sub(1, Ordering::Relaxed);
                            served.fetch_add(1, Ordering::Relaxed);
                            (request.reply)(path);
                        }
                    })
                    .expect("spawn a routing thread")
            })
            .collect();
        RouteQueue {
            sender: Mutex::new(Some(sender)),
            capacity,
            queued,
            served,
            workers: handles,
        }
    }

    /// Queues a request; `reply` is called from a worker with the answer. Refused at once when
    /// `capacity` requests are already waiting.
    pub fn submit(&self, from: u32, to: u32, reply: RouteReply) -> Result<(), QueueError> {
        let sender = self.sender.lock().map_err(|_| QueueError::Stopped)?;
        let sender = sender.as_ref().ok_or(QueueError::Stopped)?;
        // Counted before it is sent, so the count never goes below zero.
        let before = self.queued.fetch_add(1, Ordering::Relaxed);
        if before >= self.capacity {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(QueueError::Full(before));
        }
        match sender.try_send(Request { from, to, reply }) {
            Ok(()) => Ok(()),
            Err(mpsc::TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                Err(QueueError::Full(before))
            }
            Err(mpsc::TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                Err(QueueError::Stopped)
            }
        }
    }

    /// Requests waiting or in progress (O(1)).
    pub fn len(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Requests answered since the start.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Stops taking requests, lets the workers answer what is queued, and waits for them.
    pub fn stop(mut self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
