//! A game's JavaScript module, as Nakama loads one (`runtime.path`, `runtime.js_entrypoint`).
//!
//! - **RPCs**: a pool of VMs ([`muster_js::Vm`], `runtime.js_vms` up to `runtime.js_max_vms`)
//!   with the module loaded; a call takes a free one and runs inline on its worker, or on a
//!   blocking thread when its function waits on services or runs long (`pool`); every RPC the
//!   module registers is a server function, called like any other (`/v2/rpc/{id}`, the
//!   socket's `rpc`).
//! - **Matches**: every match handler the module registers is a match handler like the
//!   built-in ones (`matches::JsMatch`); each match runs in a VM of its own.
//! - **`nk`** reaches Muster's services through [`host::ServerHost`], blocking the calling
//!   thread: a blocking thread, or a worker that has stepped out of the async workers first.
//! - **Reload** ([`Module::reload`], on SIGHUP or `muster runtime reload`): the bundle is read
//!   and loaded again; if it loads, new calls and new matches use it while running matches
//!   keep their VM; if not, the old bundle stays.

pub mod hooks;
pub mod host;
mod matches;
mod metrics;
mod nk;
mod pool;
pub mod purchase_hooks;
pub mod schedule;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use muster_js::{Hook, JsError, Limits, Registrations, Vm};
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use crate::config::RuntimeConfig;
use crate::functions::{Call, Functions, RpcCode, RpcError, ServerFunction};
use crate::matches::Matches;
use host::ServerHost;
pub use metrics::JsMetrics;
pub use nk::http_rules::HttpRules;
use pool::CallCost;

/// The bundle in force.
struct Bundle {
    path: std::path::PathBuf,
    name: String,
    text: String,
    registered: Registrations,
}

/// The module: its bundle, its pool of VMs and what every VM shares.
pub struct Module {
    bundle: RwLock<Arc<Bundle>>,
    /// The VMs running RPCs and hooks; replaced whole by a reload.
    pool: RwLock<Arc<pool::Pool>>,
    host: Arc<ServerHost>,
    limits: Limits,
    vms: (usize, usize),
    pub(crate) node: String,
    /// `runtime.env`, given to every call as `ctx.env`.
    pub(crate) env: Value,
    pub(crate) metrics: JsMetrics,
    /// One reload at a time.
    reloading: Mutex<()>,
    /// Whether each hook's last call ran long (by hook table and id).
    hook_costs: RwLock<HashMap<Hook, HashMap<String, Arc<CallCost>>>>,
    /// Each hook's last error. One per registered hook.
    hook_errors: RwLock<HashMap<(Hook, String), LastError>>,
}

/// A call's last error: when (Unix ms), its code and message.
type LastError = (i64, i32, String);

/// Why the module could not start (or reload).
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("cannot read the JavaScript module {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("the JavaScript module did not load: {0}")]
    Load(JsError),
}

impl Module {
    /// Loads the module of `config` in every pool VM, when `runtime.path` names one.
    pub fn start(
        config: &RuntimeConfig,
        node: &str,
        host: ServerHost,
        metrics: JsMetrics,
    ) -> Result<Option<Arc<Module>>, ModuleError> {
        if config.path.is_empty() {
            return Ok(None);
        }
        let path = std::path::Path::new(&config.path).join(&config.js_entrypoint);
        let limits = Limits {
            call_timeout: Duration::from_millis(config.js_call_timeout_ms),
            memory_bytes: config.js_memory_mb << 20,
        };
        let host = Arc::new(host);
        let vms = (
            config.js_vms.max(1),
            config.js_max_vms.max(config.js_vms).max(1),
        );
        let mut bundle = read(&path, &config.js_entrypoint)?;
        let (pool, registered) = start_pool(&bundle, &host, limits, vms)?;
        bundle.registered = registered;
        tracing::info!(
            rpcs = ?bundle.registered.rpcs,
            matches = ?bundle.registered.matches,
            vms = vms.0,
            max_vms = vms.1,
            "JavaScript module loaded"
        );
        if !bundle.registered.unused.is_empty() {
            tracing::warn!(
                registered = ?bundle.registered.unused,
                "the module registers functions Muster never calls (events it does not have)"
            );
        }
        let module = Arc::new(Module {
            bundle: RwLock::new(Arc::new(bundle)),
            pool: RwLock::new(Arc::new(pool)),
            host,
            limits,
            vms,
            node: node.to_owned(),
            env: json!(config.env),
            metrics,
            reloading: Mutex::new(()),
            hook_costs: RwLock::default(),
            hook_errors: RwLock::default(),
        });
        hooks::start_events(&module);
        Ok(Some(module))
    }

    /// What the bundle in force registered.
    pub fn registered(&self) -> Registrations {
        self.bundle.read().registered.clone()
    }

    /// The host, to give it the match service once that exists.
    pub fn host(&self) -> &Arc<ServerHost> {
        &self.host
    }

    /// Registers every RPC of the module as a server function, and every match handler.
    pub fn register(self: &Arc<Self>, functions: &mut Functions, matches: &Matches) {
        let registered = self.registered();
        for id in &registered.rpcs {
            let function = JsRpc {
                id: id.clone(),
                module: self.clone(),
                cost: CallCost::default(),
            };
            if let Err(error) = functions.register(id, function) {
                tracing::warn!(%error, "a JavaScript RPC could not be registered");
            }
        }
        for name in &registered.matches {
            let module = self.clone();
            let handler = name.clone();
            matches.register_handler(name, move || {
                Box::new(matches::JsMatch::new(module.clone(), &handler))
            });
        }
    }

    /// Reads and loads the bundle again. On success new calls and new matches use it (running
    /// matches keep theirs); on failure nothing changes and the error says why. RPC ids and
    /// match names are those registered at start: a reloaded bundle changes what they do.
    pub fn reload(&self) -> Result<(), ModuleError> {
        let _one = self.reloading.lock();
        let current = self.bundle.read().clone();
        let mut bundle = read(&current.path, &current.name)?;
        let (pool, registered) = start_pool(&bundle, &self.host, self.limits, self.vms)?;
        bundle.registered = registered;
        let added: Vec<&String> = bundle
            .registered
            .rpcs
            .iter()
            .chain(&bundle.registered.matches)
            .filter(|n| {
                !current.registered.rpcs.contains(n) && !current.registered.matches.contains(n)
            })
            .collect();
        if !added.is_empty() {
            tracing::warn!(
                ?added,
                "the reloaded module registers new names: they are served after a restart"
            );
        }
        *self.bundle.write() = Arc::new(bundle);
        // The old pool's threads end once their queue is drained.
        *self.pool.write() = Arc::new(pool);
        self.metrics.reloads.inc();
        tracing::info!("JavaScript module reloaded");
        Ok(())
    }

    /// A VM with the bundle in force, for a match (its `InitModule` ran at start, not again).
    fn load_vm(&self) -> Result<Vm, JsError> {
        let bundle = self.bundle.read().clone();
        let host: Arc<dyn muster_js::Host> = self.host.clone();
        Vm::load_again(
            &bundle.name,
            &bundle.text,
            host,
            self.limits,
            &bundle.registered,
        )
    }

    /// Runs `call` (of a function whose cost is `cost`) on a free pool VM: its answer.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        cost: &CallCost,
        call: impl FnOnce(&Vm) -> Result<T, JsError> + Send + 'static,
    ) -> Result<T, JsError> {
        let pool = self.pool.read().clone();
        let answer = pool.run(cost, call).await;
        self.metrics.vms.set(pool.size() as i64);
        answer
    }

    /// The cost record of the hook `id` of `table` (made at its first call).
    pub(crate) fn hook_cost(&self, table: Hook, id: &str) -> Arc<CallCost> {
        if let Some(cost) = self.hook_costs.read().get(&table).and_then(|t| t.get(id)) {
            return cost.clone();
        }
        let mut costs = self.hook_costs.write();
        costs
            .entry(table)
            .or_default()
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    async fn call(
        &self,
        id: &str,
        cost: &CallCost,
        mut context: Value,
        payload: &str,
    ) -> Result<String, JsError> {
        context["node"] = json!(self.node);
        let (id, payload) = (id.to_owned(), payload.to_owned());
        self.run(cost, move |vm| vm.call_rpc(&id, &context, &payload))
            .await
    }
}

/// A pool of `vms` (at start, at most) VMs with `bundle` loaded.
fn start_pool(
    bundle: &Bundle,
    host: &Arc<ServerHost>,
    limits: Limits,
    (min, max): (usize, usize),
) -> Result<(pool::Pool, Registrations), ModuleError> {
    let host: Arc<dyn muster_js::Host> = host.clone();
    pool::Pool::start(&bundle.name, &bundle.text, host, limits, min, max)
}

fn read(path: &std::path::Path, name: &str) -> Result<Bundle, ModuleError> {
    let text = std::fs::read_to_string(path).map_err(|error| ModuleError::Read {
        path: path.display().to_string(),
        error,
    })?;
    Ok(Bundle {
        path: path.to_owned(),
        name: name.to_owned(),
        text,
        registered: Registrations::default(),
    })
}

/// One of the module's RPCs as a server function.
struct JsRpc {
    id: String,
    module: Arc<Module>,
    cost: CallCost,
}

#[async_trait::async_trait]
impl ServerFunction for JsRpc {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let context = context_of(&call, &self.module);
        let answer = self
            .module
            .call(&self.id, &self.cost, context, call.payload)
            .await;
        answer.map_err(|error| {
            // A failure the client sees as "internal" keeps its detail here, for the module's
            // author; the others are the module's own answers.
            if code_of(error.code) == RpcCode::Internal {
                tracing::warn!(rpc = %self.id, message = %error.message, "a JavaScript RPC failed");
            } else {
                tracing::debug!(rpc = %self.id, code = error.code, message = %error.message, "a JavaScript RPC refused a call");
            }
            RpcError::new(code_of(error.code), error.message)
        })
    }
}

/// Nakama's `ctx` for an RPC.
fn context_of(call: &Call<'_>, module: &Module) -> Value {
    let mut context = json!({
        "executionMode": "rpc",
        "env": module.env,
        "queryParams": {},
        "headers": {},
        "vars": {},
    });
    if let Some(caller) = call.caller {
        context["userId"] = json!(caller.user_id.to_string());
        context["username"] = json!(caller.username);
    }
    if let Some(request) = call.request {
        context["sessionId"] = json!(request
            .session_id
            .map(|s| s.to_string())
            .unwrap_or_default());
        context["clientIp"] = json!(request.client_ip);
        context["vars"] = json!(request.vars);
        context["queryParams"] = json!(request.query_params);
        context["headers"] = json!(request.headers);
        context["userSessionExp"] = json!(request.session_expires);
    }
    context
}

/// A gRPC code as a function's error code.
pub(crate) fn code_of(code: i32) -> RpcCode {
    match code {
        3 | 11 => RpcCode::InvalidArgument,
        5 => RpcCode::NotFound,
        6 => RpcCode::AlreadyExists,
        7 | 16 => RpcCode::PermissionDenied,
        8 => RpcCode::ResourceExhausted,
        9 | 10 => RpcCode::FailedPrecondition,
        4 | 14 => RpcCode::Unavailable,
        _ => RpcCode::Internal,
    }
}
