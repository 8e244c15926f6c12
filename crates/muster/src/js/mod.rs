//! A game's JavaScript module, as Nakama loads one (`runtime.path`, `runtime.js_entrypoint`):
//! `runtime.js_vms` VMs ([`muster_js::Vm`]), each on a thread of its own with the module loaded,
//! take calls from one queue; every RPC the module registers is a server function, called
//! like any other (`/v2/rpc/{id}`, the socket's `rpc`). The module's `nk` reaches Muster's
//! services through this module's [`muster_js::Host`], on the VM's thread (blocking on the
//! service, never on a runtime worker).

use std::sync::Arc;
use std::time::Duration;

use muster_js::{Host, JsError, Limits, Vm};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::base::config::RuntimeConfig;
use crate::functions::{Call, Functions, RpcCode, RpcError, ServerFunction};
use crate::notifications::{NewNotification, Notifications};

/// Calls waiting for a VM, beyond which callers wait too.
const QUEUE: usize = 1024;

/// One call for a VM.
struct Job {
    id: String,
    context: Value,
    payload: String,
    answer: oneshot::Sender<Result<String, JsError>>,
}

/// The module's VMs and their queue.
pub struct Module {
    jobs: mpsc::Sender<Job>,
    /// The RPC ids the module registered.
    pub rpcs: Vec<String>,
}

/// Why the module could not start.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("cannot read the JavaScript module {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("the JavaScript module did not load: {0}")]
    Load(JsError),
    #[error("cannot start a thread for a JavaScript VM: {0}")]
    Spawn(std::io::Error),
}

impl Module {
    /// Loads the module of `config` in every VM, when `runtime.path` names one.
    pub fn start(
        config: &RuntimeConfig,
        node: &str,
        notifications: Arc<Notifications>,
    ) -> Result<Option<Arc<Module>>, ModuleError> {
        if config.path.is_empty() {
            return Ok(None);
        }
        let path = std::path::Path::new(&config.path).join(&config.js_entrypoint);
        let bundle = std::fs::read_to_string(&path).map_err(|error| ModuleError::Read {
            path: path.display().to_string(),
            error,
        })?;
        let name = config.js_entrypoint.clone();
        let limits = Limits {
            call_timeout: Duration::from_millis(config.js_call_timeout_ms),
            memory_bytes: config.js_memory_mb << 20,
        };
        let host: Arc<dyn Host> = Arc::new(ServerHost {
            notifications,
            handle: tokio::runtime::Handle::current(),
        });
        let (jobs, queue) = mpsc::channel::<Job>(QUEUE);
        let queue = Arc::new(Mutex::new(queue));
        let mut rpcs = Vec::new();
        for n in 0..config.js_vms.max(1) {
            // Loaded here, so a module that fails stops the start with its error.
            let (loaded, ready) = std::sync::mpsc::channel();
            let (bundle, name, host, queue) =
                (bundle.clone(), name.clone(), host.clone(), queue.clone());
            let node = node.to_owned();
            std::thread::Builder::new()
                .name(format!("js-vm-{n}"))
                .spawn(move || {
                    let vm = match Vm::load(&name, &bundle, host, limits) {
                        Ok((vm, registered)) => {
                            let _ = loaded.send(Ok(registered.rpcs));
                            vm
                        }
                        Err(error) => {
                            let _ = loaded.send(Err(error));
                            return;
                        }
                    };
                    serve(&vm, &queue, &node);
                })
                .map_err(ModuleError::Spawn)?;
            let registered = ready
                .recv()
                .map_err(|_| ModuleError::Load(JsError::new("a VM thread ended", 13)))?
                .map_err(ModuleError::Load)?;
            rpcs = registered;
        }
        tracing::info!(rpcs = ?rpcs, vms = config.js_vms, "JavaScript module loaded");
        Ok(Some(Arc::new(Module { jobs, rpcs })))
    }

    /// Registers every RPC of the module as a server function.
    pub fn register(self: &Arc<Self>, functions: &mut Functions) {
        for id in &self.rpcs {
            let function = JsRpc {
                id: id.clone(),
                module: self.clone(),
            };
            if let Err(error) = functions.register(id, function) {
                tracing::warn!(%error, "a JavaScript RPC could not be registered");
            }
        }
    }

    async fn call(&self, id: &str, context: Value, payload: &str) -> Result<String, JsError> {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            id: id.to_owned(),
            context,
            payload: payload.to_owned(),
            answer,
        };
        let gone = || JsError::new("the JavaScript VMs are stopped", 14);
        self.jobs.send(job).await.map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }
}

/// A VM's thread: calls from the queue until the server stops.
fn serve(vm: &Vm, queue: &Mutex<mpsc::Receiver<Job>>, node: &str) {
    loop {
        let job = queue.lock().blocking_recv();
        let Some(mut job) = job else { return };
        if let Some(context) = job.context.as_object_mut() {
            context.insert("node".into(), json!(node));
        }
        let answer = vm.call_rpc(&job.id, &job.context, &job.payload);
        let _ = job.answer.send(answer);
    }
}

/// One of the module's RPCs as a server function.
struct JsRpc {
    id: String,
    module: Arc<Module>,
}

#[async_trait::async_trait]
impl ServerFunction for JsRpc {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        // Nakama's context keys.
        let context = match call.caller {
            Some(caller) => json!({
                "executionMode": "rpc",
                "userId": caller.user_id,
                "username": caller.username,
            }),
            None => json!({ "executionMode": "rpc" }),
        };
        self.module
            .call(&self.id, context, call.payload)
            .await
            .map_err(|error| {
                tracing::debug!(rpc = %self.id, code = error.code, message = %error.message, "a JavaScript RPC failed");
                RpcError::new(code_of(error.code), error.message)
            })
    }
}

/// A gRPC code as a function's error code.
fn code_of(code: i32) -> RpcCode {
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

/// The module's `nk`: the functions Muster answers so far.
struct ServerHost {
    notifications: Arc<Notifications>,
    handle: tokio::runtime::Handle,
}

impl Host for ServerHost {
    fn names(&self) -> Vec<String> {
        vec!["uuidv4".into(), "notificationSend".into()]
    }

    fn call(&self, name: &str, args: Value) -> Result<Value, JsError> {
        let arg = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
        match name {
            "uuidv4" => Ok(json!(Uuid::new_v4().to_string())),
            // nk.notificationSend(userId, subject, content, code, senderId, persistent)
            "notificationSend" => {
                let user_id = parse_id(&arg(0), "userId")?;
                let sender_id = match arg(4) {
                    Value::Null => None,
                    Value::String(s) if s.is_empty() => None,
                    other => Some(parse_id(&other, "senderId")?),
                };
                let content = match arg(2) {
                    Value::Null => "{}".to_string(),
                    other => other.to_string(),
                };
                let notification = NewNotification {
                    user_id,
                    subject: arg(1).as_str().unwrap_or_default().to_owned(),
                    content,
                    code: arg(3).as_i64().unwrap_or(0) as i32,
                    sender_id,
                    persistent: arg(5).as_bool().unwrap_or(false),
                };
                self.handle
                    .block_on(self.notifications.send(vec![notification]))
                    .map_err(|error| {
                        let error = RpcError::from(error);
                        JsError::new(error.message, error.code.grpc())
                    })?;
                Ok(Value::Null)
            }
            other => Err(JsError::new(format!("nk.{other} is not available"), 12)),
        }
    }

    fn log(&self, level: &str, message: &str) {
        match level {
            "debug" => tracing::debug!(target: "js", "{message}"),
            "warn" => tracing::warn!(target: "js", "{message}"),
            "error" => tracing::error!(target: "js", "{message}"),
            _ => tracing::info!(target: "js", "{message}"),
        }
    }
}

fn parse_id(value: &Value, what: &str) -> Result<Uuid, JsError> {
    value
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| JsError::new(format!("{what} must be a user id"), 3))
}
