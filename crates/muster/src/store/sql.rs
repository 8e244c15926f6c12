//! One SQL statement of a server module's own (`nk.sqlExec`, `nk.sqlQuery`), run on either
//! engine: parameters as JSON values bound to `$1`, `$2`, …, rows answered as JSON objects
//! (column name → value), or the count of rows a statement changed.
//!
//! On SQLite a statement that writes runs on the writer thread, in its own savepoint of a group
//! commit (writes keep their single-writer order); a read-only one runs on a reader connection.
//! On PostgreSQL each statement runs in a transaction of its own on a pooled connection, under
//! `SET LOCAL statement_timeout`.
//!
//! Statements that would take over the connection's transaction or session (`BEGIN`, `COMMIT`,
//! `SAVEPOINT`, `SET`, `PRAGMA`, `ATTACH`, …) are refused: the writer's group commit and the
//! pool's connections are shared.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use super::{Engine, StoreError};

/// Longest statement text, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// Most parameters one statement takes.
pub const MAX_ARGS: usize = 100;
/// Most rows one query answers. A query that would answer more is refused (not truncated), so
/// a script never mistakes a cut result for a whole one: it should add a `LIMIT`.
pub const MAX_ROWS: usize = 10_000;
/// Longest a statement may run before the database stops it.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A module's statement that could not run: refused before it reached the database (bad
/// input, a bound passed), or failed in it (the database's own message).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SqlError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Database(String),
    #[error("{0}")]
    Unavailable(String),
}

impl From<StoreError> for SqlError {
    fn from(error: StoreError) -> SqlError {
        match error {
            StoreError::Unavailable(m) => SqlError::Unavailable(m),
            StoreError::Closed => SqlError::Unavailable("store is closed".into()),
            StoreError::Refused(refusal) => match refusal.downcast_ref::<SqlError>() {
                Some(error) => error.clone(),
                None => SqlError::Database(refusal.to_string()),
            },
            other => SqlError::Database(other.to_string()),
        }
    }
}

/// A row: column name → value.
pub type Row = Map<String, Value>;

impl Engine {
    /// Runs `query` (one statement) with `args` bound to `$1`, `$2`, …; answers the rows it
    /// changed.
    pub async fn sql_exec(&self, query: String, args: Vec<Value>) -> Result<u64, SqlError> {
        check(&query, &args)?;
        match self {
            Engine::Sqlite(store) => {
                let result = store
                    .write("sql_exec", move |conn| {
                        sqlite::run(conn, &query, &args, false).map_err(StoreError::refused)
                    })
                    .await?;
                Ok(result.0)
            }
            Engine::Postgres(store) => Ok(postgres::run(store, &query, &args, false).await?.0),
        }
    }

    /// Runs `query` (one statement) with `args` bound to `$1`, `$2`, …; answers its rows (at
    /// most [`MAX_ROWS`]). A statement that writes (`INSERT … RETURNING`) runs as a write.
    pub async fn sql_query(&self, query: String, args: Vec<Value>) -> Result<Vec<Row>, SqlError> {
        check(&query, &args)?;
        match self {
            Engine::Sqlite(store) => {
                let (q, a) = (query.clone(), args.clone());
                let read = store
                    .read("sql_query", move |conn| {
                        sqlite::read(conn, &q, &a).map_err(StoreError::refused)
                    })
                    .await?;
                if let Some(rows) = read {
                    return Ok(rows);
                }
                let result = store
                    .write("sql_query", move |conn| {
                        sqlite::run(conn, &query, &args, true).map_err(StoreError::refused)
                    })
                    .await?;
                Ok(result.1)
            }
            Engine::Postgres(store) => Ok(postgres::run(store, &query, &args, true).await?.1),
        }
    }
}

fn check(query: &str, args: &[Value]) -> Result<(), SqlError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(SqlError::Invalid(format!(
            "query is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    if args.len() > MAX_ARGS {
        return Err(SqlError::Invalid(format!(
            "at most {MAX_ARGS} query params are allowed"
        )));
    }
    if let Some(word) = refused_keyword(query) {
        return Err(SqlError::Invalid(format!(
            "{word} statements are not allowed: each statement runs in a transaction of the \
             server's own"
        )));
    }
    Ok(())
}

/// The statement's first keyword, when it is one that would take over the shared connection's
/// transaction or session.
fn refused_keyword(query: &str) -> Option<String> {
    const REFUSED: &[&str] = &[
        "BEGIN",
        "START",
        "COMMIT",
        "END",
        "ROLLBACK",
        "ABORT",
        "SAVEPOINT",
        "RELEASE",
        "PREPARE",
        "SET",
        "RESET",
        "DISCARD",
        "LISTEN",
        "UNLISTEN",
        "PRAGMA",
        "ATTACH",
        "DETACH",
        "VACUUM",
    ];
    let mut rest = query;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    let word: String = rest
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase();
    REFUSED.contains(&word.as_str()).then_some(word)
}

/// The index into `args` of placeholder `$N` (or `?N`).
fn arg_index(name: &str, args: usize) -> Result<usize, SqlError> {
    let n: usize = name
        .get(1..)
        .and_then(|digits| digits.parse().ok())
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            SqlError::Invalid(format!(
                "placeholder {name} is not supported: use $1, $2, …"
            ))
        })?;
    if n > args {
        return Err(SqlError::Invalid(format!(
            "query uses {name} but {args} params were given"
        )));
    }
    Ok(n - 1)
}

fn too_many_rows() -> SqlError {
    SqlError::Invalid(format!(
        "query answers more than {MAX_ROWS} rows: add a LIMIT"
    ))
}

/// A JSON number as an integer, when it is one (`3.0` is `3`, as JavaScript sees it).
fn integer(number: &Number) -> Option<i64> {
    number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
            .map(|f| f as i64)
    })
}

fn float_value(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

mod sqlite {
    use rusqlite::types::{Value as SqlValue, ValueRef};
    use rusqlite::{Connection, Statement};

    use super::*;

    fn error(error: rusqlite::Error) -> SqlError {
        match &error {
            rusqlite::Error::SqliteFailure(failure, _)
                if failure.code == rusqlite::ErrorCode::OperationInterrupted =>
            {
                SqlError::Database(format!(
                    "statement ran longer than {}s",
                    STATEMENT_TIMEOUT.as_secs()
                ))
            }
            rusqlite::Error::SqliteFailure(_, Some(message)) => SqlError::Database(message.clone()),
            _ => SqlError::Database(error.to_string()),
        }
    }

    fn value(value: &Value) -> SqlValue {
        match value {
            Value::Null => SqlValue::Null,
            Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
            Value::Number(n) => match integer(n) {
                Some(i) => SqlValue::Integer(i),
                None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => SqlValue::Text(s.clone()),
            other => SqlValue::Text(other.to_string()),
        }
    }

    fn bind(statement: &mut Statement<'_>, args: &[Value]) -> Result<(), SqlError> {
        for i in 1..=statement.parameter_count() {
            let at = match statement.parameter_name(i) {
                // A bare `?`: by position.
                None if i <= args.len() => i - 1,
                None => {
                    return Err(SqlError::Invalid(format!(
                        "query has more placeholders than the {} params given",
                        args.len()
                    )))
                }
                Some(name) => arg_index(name, args.len())?,
            };
            statement
                .raw_bind_parameter(i, value(&args[at]))
                .map_err(error)?;
        }
        Ok(())
    }

    fn json(value: ValueRef<'_>) -> Value {
        match value {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::from(i),
            ValueRef::Real(f) => float_value(f),
            ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => base64(b),
        }
    }

    /// Runs the statement under the deadline; answers (rows changed, rows).
    fn execute(
        conn: &Connection,
        statement: &mut Statement<'_>,
        args: &[Value],
        want_rows: bool,
    ) -> Result<(u64, Vec<Row>), SqlError> {
        bind(statement, args)?;
        let before = conn.total_changes();
        let deadline = Instant::now() + STATEMENT_TIMEOUT;
        conn.progress_handler(10_000, Some(move || Instant::now() > deadline));
        let result = collect(statement, want_rows);
        conn.progress_handler(0, None::<fn() -> bool>);
        // `changes()` keeps the last INSERT/UPDATE/DELETE's count even after other statements;
        // the total's difference is this statement's own (0 for DDL).
        Ok((conn.total_changes().saturating_sub(before), result?))
    }

    fn collect(statement: &mut Statement<'_>, want_rows: bool) -> Result<Vec<Row>, SqlError> {
        let names: Vec<String> = statement
            .column_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut out = Vec::new();
        let mut rows = statement.raw_query();
        while let Some(row) = rows.next().map_err(error)? {
            if !want_rows {
                continue;
            }
            if out.len() == MAX_ROWS {
                return Err(too_many_rows());
            }
            let mut object = Map::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                object.insert(name.clone(), json(row.get_ref(i).map_err(error)?));
            }
            out.push(object);
        }
        Ok(out)
    }

    /// Runs the statement on the writer's connection.
    pub(super) fn run(
        conn: &Connection,
        query: &str,
        args: &[Value],
        want_rows: bool,
    ) -> Result<(u64, Vec<Row>), SqlError> {
        let mut statement = conn.prepare(query).map_err(error)?;
        execute(conn, &mut statement, args, want_rows)
    }

    /// Runs the statement on a reader's connection when it only reads (`None`: it writes).
    pub(super) fn read(
        conn: &Connection,
        query: &str,
        args: &[Value],
    ) -> Result<Option<Vec<Row>>, SqlError> {
        let mut statement = conn.prepare(query).map_err(error)?;
        if !statement.readonly() {
            return Ok(None);
        }
        Ok(Some(execute(conn, &mut statement, args, true)?.1))
    }
}

mod postgres {
    use std::error::Error;

    use bytes::BytesMut;
    use futures_util::TryStreamExt;
    use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, Kind, ToSql, Type};

    use super::*;
    use crate::store::postgres::{is_connection_error, PostgresStore};

    type BoxError = Box<dyn Error + Sync + Send>;

    fn error(error: tokio_postgres::Error) -> SqlError {
        if is_connection_error(&error) {
            return SqlError::Unavailable(format!("PostgreSQL: {error}"));
        }
        match error.as_db_error() {
            Some(db) => {
                SqlError::Database(format!("{} (SQLSTATE {})", db.message(), db.code().code()))
            }
            // A value that could not be read or bound: its own message.
            None => SqlError::Database(
                error
                    .source()
                    .map_or_else(|| error.to_string(), ToString::to_string),
            ),
        }
    }

    /// Runs the statement in a transaction of its own; answers (rows changed, rows).
    pub(super) async fn run(
        store: &PostgresStore,
        query: &str,
        args: &[Value],
        want_rows: bool,
    ) -> Result<(u64, Vec<Row>), SqlError> {
        let started = Instant::now();
        let mut client = store.client().await?;
        let tx = client.transaction().await.map_err(error)?;
        tx.batch_execute(&format!(
            "SET LOCAL statement_timeout = {}",
            STATEMENT_TIMEOUT.as_millis()
        ))
        .await
        .map_err(error)?;
        // Not `prepare_cached`: a module's statements would fill each connection's cache.
        let statement = tx.prepare(query).await.map_err(error)?;
        let params = statement
            .params()
            .iter()
            .enumerate()
            .map(|(i, ty)| match args.get(i) {
                Some(value) => param(i + 1, ty, value),
                None => Err(SqlError::Invalid(format!(
                    "query uses ${} but {} params were given",
                    i + 1,
                    args.len()
                ))),
            })
            .collect::<Result<Vec<Param>, SqlError>>()?;
        let names: Vec<String> = statement
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        let stream = tx
            .query_raw(&statement, params.iter())
            .await
            .map_err(error)?;
        futures_util::pin_mut!(stream);
        let mut out = Vec::new();
        while let Some(row) = stream.try_next().await.map_err(error)? {
            if !want_rows {
                continue;
            }
            if out.len() == MAX_ROWS {
                return Err(too_many_rows());
            }
            let mut object = Map::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                let cell: Cell = row.try_get(i).map_err(error)?;
                object.insert(name.clone(), cell.0);
            }
            out.push(object);
        }
        let changed = stream.rows_affected().unwrap_or(0);
        tx.commit().await.map_err(error)?;
        store.metrics.observe_db(
            if want_rows { "sql_query" } else { "sql_exec" },
            started.elapsed(),
        );
        Ok((changed, out))
    }

    /// A parameter, converted to the type PostgreSQL inferred for its placeholder.
    #[derive(Debug)]
    enum Param {
        Null,
        Bool(bool),
        I16(i16),
        I32(i32),
        I64(i64),
        F32(f32),
        F64(f64),
        Text(String),
        Bytes(Vec<u8>),
        Uuid(uuid::Uuid),
        Json(Value),
        TimeTz(chrono::DateTime<chrono::Utc>),
        Time(chrono::NaiveDateTime),
        Numeric(rust_decimal::Decimal),
    }

    impl ToSql for Param {
        fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
            match self {
                Param::Null => Ok(IsNull::Yes),
                Param::Bool(v) => v.to_sql(ty, out),
                Param::I16(v) => v.to_sql(ty, out),
                Param::I32(v) => v.to_sql(ty, out),
                Param::I64(v) => v.to_sql(ty, out),
                Param::F32(v) => v.to_sql(ty, out),
                Param::F64(v) => v.to_sql(ty, out),
                Param::Text(v) => v.to_sql(ty, out),
                Param::Bytes(v) => v.to_sql(ty, out),
                Param::Uuid(v) => v.to_sql(ty, out),
                Param::Json(v) => v.to_sql(ty, out),
                Param::TimeTz(v) => v.to_sql(ty, out),
                Param::Time(v) => v.to_sql(ty, out),
                Param::Numeric(v) => v.to_sql(ty, out),
            }
        }

        fn accepts(_: &Type) -> bool {
            true
        }

        to_sql_checked!();
    }

    fn param(n: usize, ty: &Type, value: &Value) -> Result<Param, SqlError> {
        let bad = |what: &str| {
            SqlError::Invalid(format!(
                "param ${n} must be {what} (its placeholder has type {ty})"
            ))
        };
        let int = || match value {
            Value::Number(number) => integer(number),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let float = || match value {
            Value::Number(number) => number.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        if value.is_null() {
            return Ok(Param::Null);
        }
        Ok(match *ty {
            Type::BOOL => Param::Bool(value.as_bool().ok_or_else(|| bad("a boolean"))?),
            Type::INT2 => Param::I16(
                int()
                    .and_then(|i| i.try_into().ok())
                    .ok_or_else(|| bad("a 16-bit integer"))?,
            ),
            Type::INT4 => Param::I32(
                int()
                    .and_then(|i| i.try_into().ok())
                    .ok_or_else(|| bad("a 32-bit integer"))?,
            ),
            Type::INT8 => Param::I64(int().ok_or_else(|| bad("an integer"))?),
            Type::FLOAT4 => Param::F32(float().ok_or_else(|| bad("a number"))? as f32),
            Type::FLOAT8 => Param::F64(float().ok_or_else(|| bad("a number"))?),
            Type::NUMERIC => {
                let text = match value {
                    Value::Number(number) => number.to_string(),
                    Value::String(s) => s.trim().to_owned(),
                    _ => return Err(bad("a number")),
                };
                Param::Numeric(text.parse().map_err(|_| bad("a decimal number"))?)
            }
            Type::UUID => Param::Uuid(
                value
                    .as_str()
                    .and_then(|s| uuid::Uuid::parse_str(s).ok())
                    .ok_or_else(|| bad("a UUID"))?,
            ),
            Type::JSON | Type::JSONB => Param::Json(match value {
                Value::String(s) => serde_json::from_str(s).map_err(|_| bad("JSON"))?,
                other => other.clone(),
            }),
            Type::BYTEA => Param::Bytes(
                value
                    .as_str()
                    .ok_or_else(|| bad("a string (its UTF-8 bytes)"))?
                    .as_bytes()
                    .to_vec(),
            ),
            Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                let time = value
                    .as_str()
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                    .ok_or_else(|| bad("an RFC 3339 time"))?
                    .with_timezone(&chrono::Utc);
                if *ty == Type::TIMESTAMPTZ {
                    Param::TimeTz(time)
                } else {
                    Param::Time(time.naive_utc())
                }
            }
            ref other if <String as ToSql>::accepts(other) => Param::Text(match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            _ => {
                return Err(SqlError::Invalid(format!(
                    "param ${n} has type {ty}, which cannot be bound: cast the placeholder \
                     (e.g. ${n}::text)"
                )))
            }
        })
    }

    /// A `numeric`'s special values (which a decimal cannot hold), by the sign word of its
    /// binary form.
    fn numeric_special(raw: &[u8]) -> Option<&'static str> {
        match raw.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]])) {
            Some(0xC000) => Some("NaN"),
            Some(0xD000) => Some("Infinity"),
            Some(0xF000) => Some("-Infinity"),
            _ => None,
        }
    }

    /// A timestamp's `infinity` or `-infinity` (which chrono cannot hold).
    fn time_special(raw: &[u8]) -> Result<Option<Value>, BoxError> {
        Ok(match i64::from_sql(&Type::INT8, raw)? {
            i64::MAX => Some(Value::String("infinity".into())),
            i64::MIN => Some(Value::String("-infinity".into())),
            _ => None,
        })
    }

    /// A column's value as JSON, read by the column's type.
    struct Cell(Value);

    impl<'a> FromSql<'a> for Cell {
        fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, BoxError> {
            Ok(Cell(match *ty {
                Type::BOOL => Value::Bool(bool::from_sql(ty, raw)?),
                Type::INT2 => Value::from(i16::from_sql(ty, raw)?),
                Type::INT4 => Value::from(i32::from_sql(ty, raw)?),
                Type::INT8 => Value::from(i64::from_sql(ty, raw)?),
                Type::OID => Value::from(u32::from_sql(ty, raw)?),
                Type::FLOAT4 => float_value(f64::from(f32::from_sql(ty, raw)?)),
                Type::FLOAT8 => float_value(f64::from_sql(ty, raw)?),
                Type::NUMERIC => match numeric_special(raw) {
                    Some(special) => Value::String(special.into()),
                    None => {
                        let text = rust_decimal::Decimal::from_sql(ty, raw)?.to_string();
                        match text.parse::<f64>().ok().and_then(Number::from_f64) {
                            Some(number) => Value::Number(number),
                            None => Value::String(text),
                        }
                    }
                },
                Type::UUID => Value::String(uuid::Uuid::from_sql(ty, raw)?.to_string()),
                Type::JSON | Type::JSONB => Value::from_sql(ty, raw)?,
                Type::BYTEA => base64(raw),
                Type::TIMESTAMPTZ | Type::TIMESTAMP => match time_special(raw)? {
                    Some(special) => special,
                    None => {
                        let time = if *ty == Type::TIMESTAMPTZ {
                            chrono::DateTime::<chrono::Utc>::from_sql(ty, raw)?
                        } else {
                            chrono::NaiveDateTime::from_sql(ty, raw)?.and_utc()
                        };
                        let text = time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
                        Value::String(if *ty == Type::TIMESTAMPTZ {
                            text
                        } else {
                            text.trim_end_matches('Z').to_owned()
                        })
                    }
                },
                Type::DATE => Value::String(
                    chrono::NaiveDate::from_sql(ty, raw)?
                        .format("%Y-%m-%d")
                        .to_string(),
                ),
                ref other if <String as FromSql>::accepts(other) => {
                    Value::String(String::from_sql(other, raw)?)
                }
                ref other if matches!(other.kind(), Kind::Enum(_)) => {
                    Value::String(std::str::from_utf8(raw)?.to_owned())
                }
                ref other => {
                    return Err(format!(
                        "a column of type {other} cannot be read: cast it in the query (e.g. \
                         ::text)"
                    )
                    .into())
                }
            }))
        }

        fn from_sql_null(_: &Type) -> Result<Cell, BoxError> {
            Ok(Cell(Value::Null))
        }

        fn accepts(_: &Type) -> bool {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_that_take_over_the_connection_are_refused() {
        for query in [
            "BEGIN",
            "  commit;",
            "-- note\nROLLBACK TO job",
            "/* x */ pragma synchronous = OFF",
            "SET statement_timeout = 0",
            "attach 'x' as y",
        ] {
            assert!(refused_keyword(query).is_some(), "{query}");
        }
        for query in [
            "SELECT 1",
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "WITH x AS (SELECT 1) SELECT * FROM x",
        ] {
            assert!(refused_keyword(query).is_none(), "{query}");
        }
    }

    #[test]
    fn placeholders_name_params_by_number() {
        assert_eq!(arg_index("$1", 2).unwrap(), 0);
        assert_eq!(arg_index("?2", 2).unwrap(), 1);
        assert!(arg_index("$3", 2).is_err());
        assert!(arg_index(":name", 2).is_err());
        assert!(arg_index("$0", 2).is_err());
    }
}
