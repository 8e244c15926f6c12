//! The module's `nk`: [`ServerHost`] answers each call by name from one of the families in
//! `super::nk`, on the calling VM's thread.

use muster_js::{Host, JsError};
use serde_json::Value;

use super::nk;
use super::nk::context::Args;
pub use super::nk::context::ServerHost;

impl Host for ServerHost {
    fn names(&self) -> Vec<String> {
        nk::names().into_iter().map(str::to_owned).collect()
    }

    fn call(&self, name: &str, args: Value) -> Result<Value, JsError> {
        let args = Args(match args {
            Value::Array(list) => list,
            _ => Vec::new(),
        });
        nk::call(self, name, &args)
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
