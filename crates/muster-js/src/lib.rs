//! Muster's embedded JavaScript engine: QuickJS through `rquickjs`, built from crates.io source
//! with a C compiler only (V8's crates download prebuilt libraries at build time). It knows
//! nothing of Muster's domains: a [`Host`] answers the module's `nk` calls and takes its logs.
//!
//! A [`Vm`] evaluates Muster's prelude, then a module bundle written as Nakama's documentation
//! writes one (a global `InitModule(ctx, logger, nk, initializer)`), calls `InitModule` once
//! and keeps what it registered. Calls run with a time limit (an interrupt the script cannot
//! catch) and the VM with a memory limit. ES2020 and later syntax is accepted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Runtime, Value};

mod matches;
mod utils;

pub use matches::{Dispatch, MatchInit, MatchMessage, Presence};

const PRELUDE: &str = include_str!("prelude.js");

/// gRPC's Internal, the code of an error thrown without one.
pub const INTERNAL: i32 = 13;

/// gRPC's DeadlineExceeded: the code of a call stopped at its time limit.
pub const DEADLINE_EXCEEDED: i32 = 4;

/// What a module's `nk` calls and logs reach.
pub trait Host: Send + Sync + 'static {
    /// The `nk` functions the module may call.
    fn names(&self) -> Vec<String>;
    /// Runs `nk.<name>(...args)`: its answer, or a refusal thrown into the script.
    fn call(&self, name: &str, args: serde_json::Value) -> Result<serde_json::Value, JsError>;
    fn log(&self, level: &str, message: &str);
}

/// A VM's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest one call may run before it is interrupted.
    pub call_timeout: Duration,
    /// Most memory the VM may hold.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_timeout: Duration::from_secs(5),
            memory_bytes: 64 << 20,
        }
    }
}

/// An error a script threw (`{message, code}` as Nakama's modules throw them, or an `Error`),
/// or one of the engine's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JsError {
    pub message: String,
    /// A gRPC status code ([`INTERNAL`] when the script gave none).
    pub code: i32,
}

impl JsError {
    pub fn new(message: impl Into<String>, code: i32) -> JsError {
        JsError {
            message: message.into(),
            code,
        }
    }
}

/// What `InitModule` registered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registrations {
    pub rpcs: Vec<String>,
    pub matches: Vec<String>,
    /// API calls with a before hook, by Nakama's names (`AuthenticateDevice`, …).
    pub before: Vec<String>,
    pub after: Vec<String>,
    /// Realtime messages with a before hook, by Nakama's names (`ChannelJoin`, …).
    pub rt_before: Vec<String>,
    pub rt_after: Vec<String>,
    pub matchmaker_matched: bool,
    /// The scheduler's hooks registered: `leaderboardReset`, `tournamentEnd`,
    /// `tournamentReset`.
    pub schedule: Vec<String>,
    /// `registerEvent`'s function, when registered (its id: `event`).
    pub event: Vec<String>,
    /// `register…` calls Muster keeps but never calls (no such event here).
    pub unused: Vec<String>,
    /// Every registration by the global name of its function (JSON), so that another VM of the
    /// module takes them without running `InitModule` again — as Nakama runs it once per node.
    /// `None` when a registered function is not a global (an inline or `let`/`const` one):
    /// each VM then runs `InitModule` itself.
    pub by_name: Option<String>,
}

/// Which table of hooks a call looks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    Before,
    After,
    RtBefore,
    RtAfter,
    /// `registerMatchmakerMatched`'s function (its id: `matched`).
    MatchmakerMatched,
    /// `registerLeaderboardReset`, `registerTournamentEnd`, `registerTournamentReset` (their
    /// ids: `leaderboardReset`, `tournamentEnd`, `tournamentReset`).
    Schedule,
    /// `registerEvent`'s function (its id: `event`), called with each `nk.event`.
    Event,
}

impl Hook {
    /// The table's name (as the prelude's registry names it; in metrics and the console).
    pub fn table(self) -> &'static str {
        match self {
            Hook::Before => "before",
            Hook::After => "after",
            Hook::RtBefore => "rtBefore",
            Hook::RtAfter => "rtAfter",
            Hook::MatchmakerMatched => "matched",
            Hook::Schedule => "schedule",
            Hook::Event => "event",
        }
    }
}

/// One JavaScript VM with a module loaded.
pub struct Vm {
    /// Kept for the context's lifetime (the context holds the runtime too).
    _runtime: Runtime,
    context: Context,
    /// When the running call must stop: ms since `epoch`, 0 for none.
    deadline: Arc<AtomicU64>,
    epoch: Instant,
    limits: Limits,
    /// What a match's handlers asked of the dispatcher during the last calls.
    dispatches: matches::Dispatches,
}

impl Vm {
    /// A VM that ran `bundle` (named `name` in errors) and its `InitModule`.
    pub fn load(
        name: &str,
        bundle: &str,
        host: Arc<dyn Host>,
        limits: Limits,
    ) -> Result<(Vm, Registrations), JsError> {
        let (vm, registered) = Vm::boot(name, bundle, host, limits, None)?;
        Ok((vm, registered.unwrap_or_default()))
    }

    /// Another VM of a module one VM already loaded (`registered` is what that one's
    /// `InitModule` registered): the bundle runs, but `InitModule` does not when every
    /// registered function can be found again by its global name.
    pub fn load_again(
        name: &str,
        bundle: &str,
        host: Arc<dyn Host>,
        limits: Limits,
        registered: &Registrations,
    ) -> Result<Vm, JsError> {
        Vm::boot(name, bundle, host, limits, registered.by_name.as_deref()).map(|(vm, _)| vm)
    }

    /// A VM that ran the prelude and `bundle`, then `InitModule` (and what it registered) — or,
    /// given `by_name`, took the registrations it names instead (`None`: nothing to read back,
    /// the caller has them).
    fn boot(
        name: &str,
        bundle: &str,
        host: Arc<dyn Host>,
        limits: Limits,
        by_name: Option<&str>,
    ) -> Result<(Vm, Option<Registrations>), JsError> {
        let runtime = Runtime::new().map_err(engine)?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(1 << 20);
        let deadline = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let watched = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            let at = watched.load(Ordering::Relaxed);
            at != 0 && epoch.elapsed().as_millis() as u64 >= at
        })));
        let context = Context::full(&runtime).map_err(engine)?;
        let vm = Vm {
            _runtime: runtime,
            context,
            deadline,
            epoch,
            limits,
            dispatches: Default::default(),
        };
        let registrations = vm.with_deadline(|| {
            vm.context.with(|ctx| {
                install_host(&ctx, host).map_err(engine)?;
                utils::install(&ctx).map_err(engine)?;
                matches::install(&ctx, vm.dispatches.clone()).map_err(engine)?;
                ctx.eval::<(), _>(PRELUDE)
                    .catch(&ctx)
                    .map_err(|e| thrown(e, "the prelude"))?;
                ctx.eval::<(), _>(bundle)
                    .catch(&ctx)
                    .map_err(|e| thrown(e, name))?;
                let globals = ctx.globals();
                if let Some(names) = by_name {
                    let restore: Function = globals.get("__muster_restore").map_err(engine)?;
                    restore
                        .call::<_, ()>((names,))
                        .catch(&ctx)
                        .map_err(|e| thrown(e, &format!("{name}: the registrations")))?;
                    return Ok(None);
                }
                let init: Function = globals.get("InitModule").map_err(|_| {
                    JsError::new(format!("{name}: no global function InitModule"), INTERNAL)
                })?;
                let context_object = ctx.json_parse("{}").map_err(engine)?;
                let logger: Value = globals.get("__muster_logger").map_err(engine)?;
                let nk: Value = globals.get("__muster_nk").map_err(engine)?;
                let initializer: Value = globals.get("__muster_initializer").map_err(engine)?;
                init.call::<_, ()>((context_object, logger, nk, initializer))
                    .catch(&ctx)
                    .map_err(|e| thrown(e, &format!("{name}: InitModule")))?;
                registrations(&ctx).map(Some).map_err(engine)
            })
        })?;
        Ok((vm, registrations))
    }

    /// Calls the RPC `id` with the call's context (a JSON object: user id, username, vars, …)
    /// and its payload; the string it returns.
    pub fn call_rpc(
        &self,
        id: &str,
        context: &serde_json::Value,
        payload: &str,
    ) -> Result<String, JsError> {
        self.with_deadline(|| {
            self.context.with(|ctx| {
                let registry: Object = ctx.globals().get("__muster_registry").map_err(engine)?;
                let rpcs: Object = registry.get("rpc").map_err(engine)?;
                let function: Option<Function> = rpcs.get(id).map_err(engine)?;
                let function = function
                    .ok_or_else(|| JsError::new(format!("RPC function not found: {id}"), 5))?;
                let context_object = ctx.json_parse(context.to_string()).map_err(engine)?;
                let globals = ctx.globals();
                let logger: Value = globals.get("__muster_logger").map_err(engine)?;
                let nk: Value = globals.get("__muster_nk").map_err(engine)?;
                let answer: Value = function
                    .call((context_object, logger, nk, payload))
                    .catch(&ctx)
                    .map_err(thrown_to_caller)?;
                Ok(if answer.is_undefined() || answer.is_null() {
                    String::new()
                } else if let Some(text) = answer.as_string() {
                    text.to_string().map_err(engine)?
                } else {
                    ctx.json_stringify(answer)
                        .map_err(engine)?
                        .map(|s| s.to_string())
                        .transpose()
                        .map_err(engine)?
                        .unwrap_or_default()
                })
            })
        })
    }

    /// Calls the `hook` registered for `id` with `(ctx, logger, nk, ...args)`, each argument
    /// given as JSON: what it answered (JSON), `None` when it answered nothing (a before
    /// hook's "reject"). `NotFound` when no such hook is registered.
    pub fn call_hook(
        &self,
        hook: Hook,
        id: &str,
        context: &serde_json::Value,
        args: &[serde_json::Value],
    ) -> Result<Option<serde_json::Value>, JsError> {
        self.with_deadline(|| {
            self.context.with(|ctx| {
                let registry: Object = ctx.globals().get("__muster_registry").map_err(engine)?;
                let table: Object = registry.get(hook.table()).map_err(engine)?;
                let function: Option<Function> = table.get(id).map_err(engine)?;
                let function = function
                    .ok_or_else(|| JsError::new(format!("no {} hook for {id}", hook.table()), 5))?;
                let globals = ctx.globals();
                let logger: Value = globals.get("__muster_logger").map_err(engine)?;
                let nk: Value = globals.get("__muster_nk").map_err(engine)?;
                let parse = |v: &serde_json::Value| ctx.json_parse(v.to_string()).map_err(engine);
                let context_object = parse(context)?;
                let rest = args.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
                let answer: Value = function
                    .call((context_object, logger, nk, rquickjs::function::Rest(rest)))
                    .catch(&ctx)
                    .map_err(thrown_to_caller)?;
                if answer.is_null() || answer.is_undefined() {
                    return Ok(None);
                }
                let text = ctx
                    .json_stringify(answer)
                    .map_err(engine)?
                    .map(|s| s.to_string())
                    .transpose()
                    .map_err(engine)?
                    .unwrap_or_default();
                Ok(serde_json::from_str(&text).ok())
            })
        })
    }

    /// Runs `f` with the call's deadline armed.
    fn with_deadline<T>(&self, f: impl FnOnce() -> Result<T, JsError>) -> Result<T, JsError> {
        // In whole milliseconds, as the interrupt handler compares them.
        let at = ((self.epoch.elapsed() + self.limits.call_timeout).as_millis() as u64).max(1);
        self.deadline.store(at, Ordering::Relaxed);
        let result = f();
        let late = self.epoch.elapsed().as_millis() as u64 >= at;
        self.deadline.store(0, Ordering::Relaxed);
        match result {
            Err(error) if late => Err(JsError::new(
                format!(
                    "interrupted: the call ran past its {} ms limit ({})",
                    self.limits.call_timeout.as_millis(),
                    error.message
                ),
                DEADLINE_EXCEEDED,
            )),
            other => other,
        }
    }
}

/// `__muster_host` and `__muster_log`, answering from `host`.
fn install_host(ctx: &Ctx<'_>, host: Arc<dyn Host>) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let caller = host.clone();
    let call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'_>, name: String, args: String| -> rquickjs::Result<String> {
            if name == "__names" {
                return Ok(serde_json::to_string(&caller.names()).unwrap_or_default());
            }
            let args: serde_json::Value = serde_json::from_str(&args).unwrap_or_default();
            match caller.call(&name, args) {
                Ok(serde_json::Value::Null) => Ok(String::new()),
                Ok(answer) => Ok(answer.to_string()),
                Err(error) => {
                    let thrown =
                        serde_json::json!({ "message": error.message, "code": error.code });
                    let value = ctx.json_parse(thrown.to_string())?;
                    Err(ctx.throw(value))
                }
            }
        },
    )?;
    globals.set("__muster_host", call)?;
    let log = Function::new(ctx.clone(), move |level: String, message: String| {
        host.log(&level, &message);
    })?;
    globals.set("__muster_log", log)?;
    Ok(())
}

fn registrations(ctx: &Ctx<'_>) -> rquickjs::Result<Registrations> {
    let registry: Object = ctx.globals().get("__muster_registry")?;
    let keys = |table: &str| -> rquickjs::Result<Vec<String>> {
        let object: Object = registry.get(table)?;
        let mut keys: Vec<String> = object.keys::<String>().collect::<rquickjs::Result<_>>()?;
        keys.sort();
        Ok(keys)
    };
    let matched: Value = registry.get("matchmakerMatched")?;
    let unused: Vec<String> = registry.get("unused")?;
    let by_name: Function = ctx.globals().get("__muster_registry_names")?;
    let by_name: Option<String> = by_name.call(())?;
    Ok(Registrations {
        rpcs: keys("rpc")?,
        matches: keys("match")?,
        before: keys("before")?,
        after: keys("after")?,
        rt_before: keys("rtBefore")?,
        rt_after: keys("rtAfter")?,
        matchmaker_matched: matched.is_function(),
        schedule: keys("schedule")?,
        event: keys("event")?,
        unused,
        by_name,
    })
}

fn engine(error: rquickjs::Error) -> JsError {
    JsError::new(format!("javascript engine: {error}"), INTERNAL)
}

/// What an RPC or hook threw, as its caller is told it — Nakama's words: `{message, code}`
/// objects as they are; an `Error` (code 13) as `Error: its message at where (file:line:col)`,
/// as Nakama's JavaScript engine prints an uncaught exception.
fn thrown_to_caller(error: CaughtError<'_>) -> JsError {
    match error {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            let object: &Object = exception.as_object();
            let name = object
                .get::<_, Option<String>>("name")
                .ok()
                .flatten()
                .unwrap_or_else(|| "Error".to_owned());
            let code = object.get::<_, Option<i32>>("code").ok().flatten();
            let at = exception
                .stack()
                .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
                .unwrap_or_default();
            let shown = if message.is_empty() {
                name
            } else {
                format!("{name}: {message}")
            };
            let text = if at.is_empty() {
                shown
            } else {
                format!("{shown} {at}")
            };
            JsError::new(text, code.unwrap_or(INTERNAL))
        }
        other => thrown(other, "the function"),
    }
}

/// What a script threw, as a [`JsError`]: `{message, code}` objects keep their code; an
/// `Error` gives its message and where it was thrown.
fn thrown(error: CaughtError<'_>, origin: &str) -> JsError {
    match error {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            let at = exception
                .stack()
                .and_then(|s| s.lines().next().map(|l| l.trim().to_owned()))
                .unwrap_or_default();
            let object: &Object = exception.as_object();
            let code = object.get::<_, Option<i32>>("code").ok().flatten();
            let text = if at.is_empty() {
                format!("{origin}: {message}")
            } else {
                format!("{origin}: {message} ({at})")
            };
            JsError::new(text, code.unwrap_or(INTERNAL))
        }
        CaughtError::Value(value) => {
            let object = value.as_object();
            let code = object
                .and_then(|o| o.get::<_, Option<i32>>("code").ok().flatten())
                .unwrap_or(INTERNAL);
            // `{message, code}`, as Nakama's modules throw: the message as it is.
            if let Some(message) =
                object.and_then(|o| o.get::<_, Option<String>>("message").ok().flatten())
            {
                return JsError::new(message, code);
            }
            // QuickJS throws null when it runs out of memory even for its "out of memory"
            // error (it cannot allocate that either): a null thrown is most likely the memory
            // limit reached.
            if value.is_null() {
                return JsError::new(
                    format!("{origin}: out of memory (the VM's memory limit; or null thrown)"),
                    code,
                );
            }
            // A string, a number, anything else thrown: as JavaScript prints it.
            let shown = value
                .as_string()
                .and_then(|s| s.to_string().ok())
                .or_else(|| {
                    value
                        .ctx()
                        .json_stringify(value.clone())
                        .ok()
                        .flatten()
                        .and_then(|s| s.to_string().ok())
                })
                .unwrap_or_else(|| "a value that cannot be shown".to_owned());
            JsError::new(format!("{origin}: {shown}"), code)
        }
        CaughtError::Error(error) => engine(error),
    }
}

#[cfg(test)]
mod tests;
