//! The VMs that run RPCs and hooks: `runtime.js_vms` loaded at start, more — up to
//! `runtime.js_max_vms` — when every VM is busy. A call takes a free VM and runs on the thread
//! that called it, a runtime worker, stepping out of the async workers for its length
//! (`block_in_place`): a short call hands nothing over to another thread, a long one (or one
//! waiting on a service, `nk.walletUpdate` waiting for its commit) leaves the worker's other
//! tasks to a thread that takes them over. The number of VMs bounds how many calls are in
//! flight; the pool grows to what the load needs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use muster_js::{Host, JsError, Limits, Registrations, Vm};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::ModuleError;

/// The message of a call whose host code panicked.
const HOST_FAILED: &str = "internal error in the JavaScript host";

/// A pool of VMs with one bundle loaded.
pub(super) struct Pool {
    /// VMs loaded and free.
    idle: Mutex<Vec<Vm>>,
    /// One permit per VM the pool may hold: a call holds one while it runs.
    permits: Semaphore,
    /// VMs loaded (free or running a call).
    total: AtomicUsize,
    name: String,
    text: String,
    host: Arc<dyn Host>,
    limits: Limits,
}

impl Pool {
    /// Loads `text` (named `name`) in `min` VMs; what the bundle registered. Every VM loads
    /// before this returns, so a bundle that fails is refused whole.
    pub(super) fn start(
        name: &str,
        text: &str,
        host: Arc<dyn Host>,
        limits: Limits,
        min: usize,
        max: usize,
    ) -> Result<(Pool, Registrations), ModuleError> {
        let max = max.max(min).max(1);
        let pool = Pool {
            idle: Mutex::new(Vec::with_capacity(max)),
            permits: Semaphore::new(max),
            total: AtomicUsize::new(0),
            name: name.to_owned(),
            text: text.to_owned(),
            host,
            limits,
        };
        let mut registered = Registrations::default();
        for _ in 0..min.max(1) {
            let (vm, loaded) = pool.load().map_err(ModuleError::Load)?;
            registered = loaded;
            pool.idle.lock().push(vm);
        }
        Ok((pool, registered))
    }

    /// Runs `call` on a free VM (one loaded for it when none is free and the pool may grow):
    /// its answer. The caller waits while every VM the pool may hold is running a call.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Vm) -> Result<T, JsError> + Send + 'static,
    ) -> Result<T, JsError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| JsError::new("the JavaScript VMs are stopped", 14))?;
        let free = self.idle.lock().pop();
        in_place(|| {
            let vm = match free {
                Some(vm) => vm,
                None => self.load()?.0,
            };
            // A panic below the script (a bug of ours) fails this call, not the worker.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&vm)))
                .unwrap_or_else(|_| Err(JsError::new(HOST_FAILED, 13)));
            // A call stopped at its time limit leaves the VM in whatever state the script left
            // it: the VM is dropped, and the next call that finds none free loads a fresh one.
            let spoiled = matches!(&result, Err(e) if e.code == muster_js::DEADLINE_EXCEEDED || e.message == HOST_FAILED);
            if spoiled {
                self.total.fetch_sub(1, Ordering::Relaxed);
            } else {
                self.idle.lock().push(vm);
            }
            result
        })
    }

    /// VMs loaded.
    pub(super) fn size(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// One more VM with the bundle loaded.
    fn load(&self) -> Result<(Vm, Registrations), JsError> {
        let loaded = Vm::load(&self.name, &self.text, self.host.clone(), self.limits)?;
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(loaded)
    }
}

/// Runs `work` on this thread; on a worker of the multi-threaded runtime, stepped out of the
/// async workers so that a long script or a wait on a service does not hold the worker's
/// other tasks (a short one is done before any other thread takes them over).
fn in_place<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
