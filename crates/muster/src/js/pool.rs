//! The VMs that run RPCs and hooks: `runtime.js_vms` loaded at start, more — up to
//! `runtime.js_max_vms` — when every VM is busy and calls wait. A VM's thread blocks while
//! its script waits on a service (`nk.walletUpdate` waiting for its commit), so the number of
//! VMs bounds how many such calls are in flight; the pool grows to what the load needs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use muster_js::{Host, JsError, Limits, Registrations, Vm};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::ModuleError;

/// Calls waiting for a VM, beyond which callers wait too.
const QUEUE: usize = 1024;

/// One call for a VM: runs on the VM and answers its caller itself; true when the VM must be
/// replaced afterwards (the call was stopped at its time limit, or the host failed).
type Job = Box<dyn FnOnce(&Vm) -> bool + Send>;

/// The message of a call whose host code panicked.
const HOST_FAILED: &str = "internal error in the JavaScript host";

/// What the pool's threads share.
struct Shared {
    queue: Mutex<mpsc::Receiver<Job>>,
    /// Threads waiting for a call.
    idle: AtomicUsize,
    /// Threads started.
    total: AtomicUsize,
    max: usize,
    name: String,
    text: String,
    host: Arc<dyn Host>,
    limits: Limits,
}

impl Shared {
    fn load(&self) -> Result<(Vm, Registrations), JsError> {
        Vm::load(&self.name, &self.text, self.host.clone(), self.limits)
    }
}

/// A pool of VMs with one bundle loaded.
pub(super) struct Pool {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

impl Pool {
    /// Loads `text` (named `name`) in `min` VMs, each on a thread of its own; what the bundle
    /// registered. Every VM loads before this returns, so a bundle that fails is refused whole.
    pub(super) fn start(
        name: &str,
        text: &str,
        host: Arc<dyn Host>,
        limits: Limits,
        min: usize,
        max: usize,
    ) -> Result<(Pool, Registrations), ModuleError> {
        let (jobs, queue) = mpsc::channel::<Job>(QUEUE);
        let shared = Arc::new(Shared {
            queue: Mutex::new(queue),
            idle: AtomicUsize::new(0),
            total: AtomicUsize::new(0),
            max: max.max(min).max(1),
            name: name.to_owned(),
            text: text.to_owned(),
            host,
            limits,
        });
        let mut registered = Registrations::default();
        for _ in 0..min.max(1) {
            let (loaded, ready) = std::sync::mpsc::channel();
            spawn(&shared, move |result| {
                let _ = loaded.send(result);
            })?;
            registered = ready
                .recv()
                .map_err(|_| ModuleError::Load(JsError::new("a VM thread ended", 13)))?
                .map_err(ModuleError::Load)?;
        }
        Ok((Pool { jobs, shared }, registered))
    }

    /// Runs `call` on the next free VM: its answer.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Vm) -> Result<T, JsError> + Send + 'static,
    ) -> Result<T, JsError> {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |vm| {
            // A panic below the script (a bug of ours) fails this call, not the VM's thread.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(vm)))
                .unwrap_or_else(|_| Err(JsError::new(HOST_FAILED, 13)));
            let replace = matches!(&result, Err(e) if e.code == muster_js::DEADLINE_EXCEEDED || e.message == HOST_FAILED);
            let _ = answer.send(result);
            replace
        });
        let gone = || JsError::new("the JavaScript VMs are stopped", 14);
        self.jobs.send(job).await.map_err(|_| gone())?;
        // Calls wait and no VM is free: one more. (Not merely "none is free": a VM that has
        // just taken this call is not free either, and growing then would load VMs for a load
        // that one VM serves.)
        let waiting = self.jobs.max_capacity() - self.jobs.capacity();
        if waiting > 0 && self.shared.idle.load(Ordering::Relaxed) == 0 {
            self.grow();
        }
        answered.await.map_err(|_| gone())?
    }

    /// VMs started so far.
    pub(super) fn size(&self) -> usize {
        self.shared.total.load(Ordering::Relaxed)
    }

    /// One more VM, unless the pool is at its most.
    fn grow(&self) {
        if let Err(error) = spawn(&self.shared, |result| {
            if let Err(error) = result {
                tracing::error!(message = %error.message, "a JavaScript VM did not load");
            }
        }) {
            tracing::error!(%error, "no thread for another JavaScript VM");
        }
    }
}

/// Starts one VM thread (unless the pool is at its most): it loads the bundle, tells `loaded`,
/// then serves calls until the queue closes.
fn spawn(
    shared: &Arc<Shared>,
    loaded: impl FnOnce(Result<Registrations, JsError>) + Send + 'static,
) -> Result<(), ModuleError> {
    let taken = shared
        .total
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < shared.max).then_some(n + 1)
        });
    let Ok(n) = taken else {
        loaded(Err(JsError::new("the pool is at its most VMs", 8)));
        return Ok(());
    };
    let shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("js-vm-{n}"))
        .spawn(move || match shared.load() {
            Ok((vm, registered)) => {
                loaded(Ok(registered));
                serve(vm, &shared);
            }
            Err(error) => {
                shared.total.fetch_sub(1, Ordering::Relaxed);
                loaded(Err(error));
            }
        })
        .map(drop)
        .map_err(ModuleError::Spawn)
}

/// A VM's thread: calls from the queue until the queue closes. A call stopped at its time
/// limit leaves the VM in whatever state the script left it, so the VM is replaced by a fresh
/// one.
fn serve(mut vm: Vm, shared: &Shared) {
    loop {
        shared.idle.fetch_add(1, Ordering::Relaxed);
        let job = shared.queue.lock().blocking_recv();
        shared.idle.fetch_sub(1, Ordering::Relaxed);
        let Some(job) = job else { return };
        if job(&vm) {
            match shared.load() {
                Ok((fresh, _)) => vm = fresh,
                Err(error) => {
                    tracing::error!(message = %error.message, "a JavaScript VM could not be replaced; it goes on")
                }
            }
        }
    }
}
