//! Invite links on SQLite: every write goes through the group-commit writer, so concurrent
//! creates of one URL are serialized there and the reverse lookup needs no retry.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::links::store::{ClickCount, Fallbacks, LinkRecord, LinkStore};
use crate::store::sqlite::{db_error, SqliteStore};
use crate::store::StoreError;

const COLUMNS: &str = "code, url, owner, reusable, ios_url, android_url, desktop_url, \
                       expires_at_ms, max_visits, visits, disabled_at_ms, create_time_ms";

fn record(row: &Row) -> rusqlite::Result<LinkRecord> {
    Ok(LinkRecord {
        code: row.get(0)?,
        url: row.get(1)?,
        owner: row.get(2)?,
        reusable: row.get(3)?,
        fallbacks: Fallbacks {
            ios: row.get(4)?,
            android: row.get(5)?,
            desktop: row.get(6)?,
        },
        expires_at_ms: row.get(7)?,
        max_visits: row.get(8)?,
        visits: row.get(9)?,
        disabled: row.get::<_, Option<i64>>(10)?.is_some(),
        create_time_ms: row.get(11)?,
    })
}

fn find(conn: &Connection, code: &str) -> Result<Option<LinkRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM links WHERE code = ?1"))
        .and_then(|mut s| s.query_row([code], record).optional())
        .map_err(db_error)
}

fn create(conn: &Connection, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError> {
    if link.reusable {
        let existing = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM links WHERE owner = ?1 AND url = ?2 AND reusable = 1"
            ))
            .and_then(|mut s| s.query_row([&link.owner, &link.url], record).optional())
            .map_err(db_error)?;
        if let Some(existing) = existing {
            return Ok((existing, false));
        }
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO links (code, url, owner, reusable, ios_url, android_url, desktop_url,
                                expires_at_ms, max_visits, visits, create_time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10)
             ON CONFLICT (code) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                link.code,
                link.url,
                link.owner,
                link.reusable,
                link.fallbacks.ios,
                link.fallbacks.android,
                link.fallbacks.desktop,
                link.expires_at_ms,
                link.max_visits,
                link.create_time_ms
            ])
        })
        .map_err(db_error)?;
    if inserted == 0 {
        return Err(StoreError::CodeTaken);
    }
    Ok((link, true))
}

fn add_day_clicks(conn: &Connection, code: &str, day: i32, count: i64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO link_clicks (day, code, count) VALUES (?2, ?1, ?3)
         ON CONFLICT (day, code) DO UPDATE SET count = count + excluded.count",
    )
    .and_then(|mut s| s.execute(params![code, day, count]))
    .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl LinkStore for SqliteStore {
    async fn create_link(&self, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError> {
        self.write("create_link", move |conn| create(conn, link))
            .await
    }

    async fn link(&self, code: &str) -> Result<Option<LinkRecord>, StoreError> {
        let code = code.to_owned();
        self.read("link", move |conn| find(conn, &code)).await
    }

    async fn take_visit(&self, code: &str, day: i32) -> Result<Option<i64>, StoreError> {
        let code = code.to_owned();
        self.write("take_visit", move |conn| {
            let visits: Option<i64> = conn
                .prepare_cached(
                    "UPDATE links SET visits = visits + 1
                     WHERE code = ?1 AND disabled_at_ms IS NULL
                       AND (max_visits IS NULL OR visits < max_visits)
                     RETURNING visits",
                )
                .and_then(|mut s| s.query_row([&code], |r| r.get(0)).optional())
                .map_err(db_error)?;
            if visits.is_some() {
                add_day_clicks(conn, &code, day, 1)?;
            }
            Ok(visits)
        })
        .await
    }

    async fn add_clicks(&self, clicks: Vec<ClickCount>) -> Result<(), StoreError> {
        self.write("add_clicks", move |conn| {
            for click in &clicks {
                add_day_clicks(conn, &click.code, click.day, click.count)?;
            }
            Ok(())
        })
        .await
    }

    async fn link_clicks(&self, code: &str, days: Vec<i32>) -> Result<Vec<(i32, i64)>, StoreError> {
        let code = code.to_owned();
        self.read("link_clicks", move |conn| {
            // One seek per day (the key is (day, code)); `days` is bounded by the caller.
            let mut statement = conn
                .prepare_cached("SELECT count FROM link_clicks WHERE day = ?1 AND code = ?2")
                .map_err(db_error)?;
            let mut clicks = Vec::new();
            for day in days {
                let count: Option<i64> = statement
                    .query_row(params![day, code], |r| r.get(0))
                    .optional()
                    .map_err(db_error)?;
                if let Some(count) = count {
                    clicks.push((day, count));
                }
            }
            clicks.sort_unstable();
            Ok(clicks)
        })
        .await
    }

    async fn disable_link(&self, code: &str, now_ms: i64) -> Result<(), StoreError> {
        let code = code.to_owned();
        self.write("disable_link", move |conn| {
            // No longer reusable either: the owner's next request for its URL gets a new code.
            let changed = conn
                .prepare_cached(
                    "UPDATE links SET disabled_at_ms = COALESCE(disabled_at_ms, ?2), reusable = 0
                     WHERE code = ?1",
                )
                .and_then(|mut s| s.execute(params![code, now_ms]))
                .map_err(db_error)?;
            if changed == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        })
        .await
    }
}
