//! `sqlExec(query, args?)` → `{ rowsAffected }` and `sqlQuery(query, args?)` → `[{ column:
//! value }]`: one statement of the module's own on the server's database, with `args` bound to
//! `$1`, `$2`, … (see `store::sql` for the engines' conversions and bounds).
//!
//! A statement the database refuses throws `failed to exec db query: <its message>` with code
//! 13, as Nakama's does (a Go error there, which an RPC answers as Internal); bad arguments or a
//! bound passed throw code 3; an unreachable database code 14.

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, Args, ServerHost};
use crate::store::sql::SqlError;

pub(super) const NAMES: &[&str] = &["sqlExec", "sqlQuery"];

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let query = args.string(0, "query")?;
    let params = match args.get(1) {
        Value::Null => Vec::new(),
        Value::Array(list) => list.clone(),
        _ => return Err(invalid("expects array of query params")),
    };
    let engine = host.services.stores.engine.clone();
    match name {
        "sqlExec" => {
            let changed = host.wait(engine.sql_exec(query, params))?.map_err(thrown)?;
            Ok(json!({ "rowsAffected": changed }))
        }
        "sqlQuery" => {
            let rows = host
                .wait(engine.sql_query(query, params))?
                .map_err(thrown)?;
            Ok(Value::Array(rows.into_iter().map(Value::Object).collect()))
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

fn thrown(error: SqlError) -> JsError {
    match error {
        SqlError::Invalid(message) => invalid(message),
        SqlError::Database(message) => {
            JsError::new(format!("failed to exec db query: {message}"), 13)
        }
        SqlError::Unavailable(message) => JsError::new(message, 14),
    }
}
