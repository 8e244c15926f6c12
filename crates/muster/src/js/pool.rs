//! The VMs that run RPCs and hooks: `runtime.js_vms` loaded at start, more — up to
//! `runtime.js_max_vms` — when a call finds every VM busy. A call takes a free VM and runs on
//! the thread that received it, a runtime worker, with no hand-over to another thread. While a
//! script waits on a service (`nk.walletUpdate` waiting for its commit) the worker steps out of
//! the async workers ([`super::host::ServerHost::wait`]); a function whose last call ran long on
//! its thread ([`LONG_CALL`], waits not counted) runs its next call stepped out for its whole
//! length, so a heavy or runaway script holds no worker's other tasks. The number of VMs bounds
//! how many calls are in flight; the pool grows to what the load needs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_js::{Host, JsError, Limits, Registrations, Vm};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::ModuleError;

/// The message of a call whose host code panicked.
const HOST_FAILED: &str = "internal error in the JavaScript host";

/// A call that runs longer than this on its thread (waits on services not counted) runs long:
/// the next call of its function steps out of the async workers for its whole length.
pub(super) const LONG_CALL: Duration = Duration::from_millis(1);

/// Whether a function's last call ran long.
#[derive(Debug, Default)]
pub(crate) struct CallCost {
    long: AtomicBool,
}

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
    /// `cost` is the function's: whether to step out of the async workers for the whole call.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        cost: &CallCost,
        call: impl FnOnce(&Vm) -> Result<T, JsError> + Send + 'static,
    ) -> Result<T, JsError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| JsError::new("the JavaScript VMs are stopped", 14))?;
        let free = self.idle.lock().pop();
        let vm = match free {
            Some(vm) => vm,
            // Loading runs the whole bundle: never on an async worker.
            None => in_place(|| self.load())?.0,
        };
        let run = move || {
            let started = Instant::now();
            let waited = super::host::waited();
            // A panic below the script (a bug of ours) fails this call, not the worker.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&vm)))
                .unwrap_or_else(|_| Err(JsError::new(HOST_FAILED, 13)));
            let on_thread = started
                .elapsed()
                .saturating_sub(super::host::waited().saturating_sub(waited));
            cost.long.store(on_thread > LONG_CALL, Ordering::Relaxed);
            // A call stopped at its time limit leaves the VM in whatever state the script left
            // it: the VM is dropped, and the next call that finds none free loads a fresh one.
            let spoiled = matches!(&result, Err(e) if e.code == muster_js::DEADLINE_EXCEEDED || e.message == HOST_FAILED);
            if spoiled {
                self.total.fetch_sub(1, Ordering::Relaxed);
            } else {
                self.idle.lock().push(vm);
            }
            result
        };
        if cost.long.load(Ordering::Relaxed) {
            in_place(run)
        } else {
            run()
        }
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
/// async workers so that it does not hold the worker's other tasks.
fn in_place<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoHost;

    impl Host for NoHost {
        fn names(&self) -> Vec<String> {
            Vec::new()
        }
        fn call(&self, name: &str, _: serde_json::Value) -> Result<serde_json::Value, JsError> {
            Err(JsError::new(format!("no nk.{name} here"), 12))
        }
        fn log(&self, _: &str, _: &str) {}
    }

    const BUNDLE: &str = r#"
        function InitModule(ctx, logger, nk, initializer) {
          initializer.registerRpc("quick", function () { return "q"; });
          initializer.registerRpc("heavy", function () {
            const until = Date.now() + 5;
            while (Date.now() < until) {}
            return "h";
          });
        }
    "#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_function_whose_call_ran_long_steps_out_for_its_next() {
        let limits = Limits {
            call_timeout: Duration::from_secs(5),
            memory_bytes: 16 << 20,
        };
        let (pool, registered) =
            Pool::start("index.js", BUNDLE, Arc::new(NoHost), limits, 1, 2).expect("loads");
        assert_eq!(registered.rpcs, ["heavy", "quick"]);
        let (quick, heavy) = (CallCost::default(), CallCost::default());
        let call = |id: &'static str| move |vm: &Vm| vm.call_rpc(id, &serde_json::json!({}), "");
        assert_eq!(pool.run(&quick, call("quick")).await.expect("quick"), "q");
        assert!(!quick.long.load(Ordering::Relaxed));
        assert_eq!(pool.run(&heavy, call("heavy")).await.expect("heavy"), "h");
        assert!(heavy.long.load(Ordering::Relaxed));
        // Stepped out this time, it is measured again.
        assert_eq!(pool.run(&heavy, call("heavy")).await.expect("heavy"), "h");
        assert!(heavy.long.load(Ordering::Relaxed));
        assert_eq!(pool.size(), 1, "one VM serves one caller at a time");
    }
}
