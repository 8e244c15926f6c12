//! The VMs that run RPCs and hooks: `runtime.js_vms` loaded at start, more — up to
//! `runtime.js_max_vms` — when a call finds every VM busy. A call takes a free VM and runs where
//! its function's last call says it should:
//!
//! - **inline**, on the runtime worker that received it, with no hand-over to another thread —
//!   a function whose calls compute and return (the first call of every function runs so);
//! - **on a blocking thread** (`spawn_blocking`) — a function whose last call waited on a
//!   service (`nk.walletUpdate` waiting for its commit: the thread blocks, not a worker) or ran
//!   longer than [`LONG_CALL`] (a heavy or runaway script holds no worker).
//!
//! An inline call that does wait steps out of the async workers while it waits
//! ([`super::nk::context::ServerHost::wait`]). The number of VMs bounds how many calls are in flight;
//! the pool grows to what the load needs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_js::{Host, JsError, Limits, Registrations, Vm};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::ModuleError;

/// The message of a call whose host code panicked.
const HOST_FAILED: &str = "internal error in the JavaScript host";

/// A call that runs longer than this runs long: the next call of its function runs on a
/// blocking thread. (Elapsed time: a short call preempted on a busy machine may be taken for a
/// long one, which only moves its function's next call to a blocking thread.)
pub(super) const LONG_CALL: Duration = Duration::from_millis(1);

/// What a function's last call did: whether its next one runs on a blocking thread.
#[derive(Debug, Default)]
pub(crate) struct CallCost {
    /// It waited on a service, or ran longer than [`LONG_CALL`].
    blocking: AtomicBool,
}

/// A pool of VMs with one bundle loaded.
pub(super) struct Pool {
    /// VMs loaded and free.
    idle: Mutex<Vec<Vm>>,
    /// One permit per VM the pool may hold: a call holds one while it runs.
    permits: Arc<Semaphore>,
    /// VMs loaded (free or running a call).
    total: AtomicUsize,
    name: String,
    text: String,
    host: Arc<dyn Host>,
    limits: Limits,
    /// What the first VM's `InitModule` registered: the VMs after it take the same without
    /// running `InitModule` (once per node, as Nakama).
    registered: Mutex<Option<Registrations>>,
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
            permits: Arc::new(Semaphore::new(max)),
            total: AtomicUsize::new(0),
            name: name.to_owned(),
            text: text.to_owned(),
            host,
            limits,
            registered: Mutex::new(None),
        };
        for _ in 0..min.max(1) {
            let vm = pool.load().map_err(ModuleError::Load)?;
            pool.idle.lock().push(vm);
        }
        let registered = pool.registered.lock().clone().unwrap_or_default();
        if registered.by_name.is_none() {
            tracing::warn!("a function the module registers is not a global function (an inline function, or a top-level let or const): every VM runs InitModule");
        }
        Ok((pool, registered))
    }

    /// Runs `call` on a free VM (one loaded for it when none is free and the pool may grow):
    /// its answer. The caller waits while every VM the pool may hold is running a call.
    /// `cost` is the function's: where the call runs, and what it did for the next.
    pub(super) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        cost: &CallCost,
        call: impl FnOnce(&Vm) -> Result<T, JsError> + Send + 'static,
    ) -> Result<T, JsError> {
        let stopped = || JsError::new("the JavaScript VMs are stopped", 14);
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| stopped())?;
        let free = self.idle.lock().pop();
        if !cost.blocking.load(Ordering::Relaxed) {
            if let Some(vm) = free {
                let (result, blocking) = self.run_on(vm, call);
                cost.blocking.store(blocking, Ordering::Relaxed);
                return result;
            }
        }
        // On a blocking thread, which also loads a VM when none is free. The VM goes back to
        // the pool there, so a caller that stops waiting loses none.
        let pool = self.clone();
        let done = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let vm = match free {
                Some(vm) => vm,
                None => pool.load()?,
            };
            Ok::<_, JsError>(pool.run_on(vm, call))
        })
        .await
        .map_err(|_| JsError::new(HOST_FAILED, 13))?;
        let (result, blocking) = done?;
        cost.blocking.store(blocking, Ordering::Relaxed);
        result
    }

    /// Runs `call` on `vm` on this thread, then gives `vm` back (unless the call spoiled it):
    /// the answer, and whether the call waited on a service or ran long.
    fn run_on<T>(
        &self,
        vm: Vm,
        call: impl FnOnce(&Vm) -> Result<T, JsError>,
    ) -> (Result<T, JsError>, bool) {
        let started = Instant::now();
        let waits = super::nk::context::waits();
        // A panic below the script (a bug of ours) fails this call, not the thread.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&vm)))
            .unwrap_or_else(|_| Err(JsError::new(HOST_FAILED, 13)));
        let blocking = super::nk::context::waits() != waits || started.elapsed() > LONG_CALL;
        // A call stopped at its time limit leaves the VM in whatever state the script left it:
        // the VM is dropped, and the next call that finds none free loads a fresh one.
        let spoiled = matches!(&result, Err(e) if e.code == muster_js::DEADLINE_EXCEEDED || e.message == HOST_FAILED);
        if spoiled {
            self.total.fetch_sub(1, Ordering::Relaxed);
        } else {
            self.idle.lock().push(vm);
        }
        (result, blocking)
    }

    /// VMs loaded.
    pub(super) fn size(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// One more VM with the bundle loaded; the first runs `InitModule`.
    fn load(&self) -> Result<Vm, JsError> {
        let registered = self.registered.lock().clone();
        let vm = match registered {
            Some(registered) => Vm::load_again(
                &self.name,
                &self.text,
                self.host.clone(),
                self.limits,
                &registered,
            )?,
            None => {
                let (vm, registered) =
                    Vm::load(&self.name, &self.text, self.host.clone(), self.limits)?;
                *self.registered.lock() = Some(registered);
                vm
            }
        };
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(vm)
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
    async fn a_function_whose_call_ran_long_runs_its_next_on_a_blocking_thread() {
        let limits = Limits {
            call_timeout: Duration::from_secs(5),
            memory_bytes: 16 << 20,
        };
        let (pool, registered) =
            Pool::start("index.js", BUNDLE, Arc::new(NoHost), limits, 1, 2).expect("loads");
        let pool = Arc::new(pool);
        assert_eq!(registered.rpcs, ["heavy", "quick"]);
        let (quick, heavy) = (CallCost::default(), CallCost::default());
        let call = |id: &'static str| move |vm: &Vm| vm.call_rpc(id, &serde_json::json!({}), "");
        assert_eq!(pool.run(&quick, call("quick")).await.expect("quick"), "q");
        assert!(!quick.blocking.load(Ordering::Relaxed));
        assert_eq!(pool.run(&heavy, call("heavy")).await.expect("heavy"), "h");
        assert!(heavy.blocking.load(Ordering::Relaxed));
        // On a blocking thread this time, it is measured again.
        assert_eq!(pool.run(&heavy, call("heavy")).await.expect("heavy"), "h");
        assert!(heavy.blocking.load(Ordering::Relaxed));
        assert_eq!(pool.size(), 1, "one VM serves one caller at a time");
    }
}
