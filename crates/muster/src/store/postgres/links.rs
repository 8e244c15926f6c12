//! Invite links on PostgreSQL. A create is one `INSERT … ON CONFLICT DO NOTHING`: the partial
//! unique index on (owner, url) makes concurrent creates of one URL agree on one link (the
//! losers find the winner's row once it commits), the primary key refuses a taken code.

use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{db_error, PostgresStore};
use crate::store::{ClickCount, Fallbacks, LinkRecord, LinkStore, StoreError};

const COLUMNS: &str = "code, url, owner, reusable, ios_url, android_url, desktop_url, \
                       expires_at_ms, max_visits, visits, disabled_at_ms, create_time_ms";

fn record(row: &Row) -> LinkRecord {
    LinkRecord {
        code: row.get(0),
        url: row.get(1),
        owner: row.get(2),
        reusable: row.get(3),
        fallbacks: Fallbacks {
            ios: row.get(4),
            android: row.get(5),
            desktop: row.get(6),
        },
        expires_at_ms: row.get(7),
        max_visits: row.get(8),
        visits: row.get(9),
        disabled: row.get::<_, Option<i64>>(10).is_some(),
        create_time_ms: row.get(11),
    }
}

#[async_trait]
impl LinkStore for PostgresStore {
    async fn create_link(&self, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let insert = client
            .prepare_cached(
                "INSERT INTO links (code, url, owner, reusable, ios_url, android_url, desktop_url,
                                    expires_at_ms, max_visits, visits, create_time_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10)
                 ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(db_error)?;
        // A conflict on the reverse index whose row is disabled before we read it leaves
        // neither; the next pass inserts.
        for _ in 0..3 {
            let inserted = client
                .execute(
                    &insert,
                    &[
                        &link.code,
                        &link.url,
                        &link.owner,
                        &link.reusable,
                        &link.fallbacks.ios,
                        &link.fallbacks.android,
                        &link.fallbacks.desktop,
                        &link.expires_at_ms,
                        &link.max_visits,
                        &link.create_time_ms,
                    ],
                )
                .await
                .map_err(db_error)?;
            if inserted == 1 {
                self.metrics.observe_db("create_link", started.elapsed());
                return Ok((link, true));
            }
            if link.reusable {
                let existing = client
                    .query_opt(
                        &format!(
                            "SELECT {COLUMNS} FROM links WHERE owner = $1 AND url = $2 AND reusable"
                        ),
                        &[&link.owner, &link.url],
                    )
                    .await
                    .map_err(db_error)?;
                if let Some(existing) = existing {
                    self.metrics.observe_db("create_link", started.elapsed());
                    return Ok((record(&existing), false));
                }
            }
            let taken = client
                .query_opt("SELECT 1 FROM links WHERE code = $1", &[&link.code])
                .await
                .map_err(db_error)?;
            if taken.is_some() {
                return Err(StoreError::CodeTaken);
            }
        }
        Err(StoreError::Database(
            "creating the link kept conflicting; try again".into(),
        ))
    }

    async fn link(&self, code: &str) -> Result<Option<LinkRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let statement = client
            .prepare_cached(&format!("SELECT {COLUMNS} FROM links WHERE code = $1"))
            .await
            .map_err(db_error)?;
        let row = client
            .query_opt(&statement, &[&code])
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("link", started.elapsed());
        Ok(row.as_ref().map(record))
    }

    async fn take_visit(&self, code: &str, day: i32) -> Result<Option<i64>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        // One statement, so one transaction: the visit and its day's click count together.
        let row = client
            .query_opt(
                "WITH visit AS (
                    UPDATE links SET visits = visits + 1
                    WHERE code = $1 AND disabled_at_ms IS NULL
                      AND (max_visits IS NULL OR visits < max_visits)
                    RETURNING visits
                 ),
                 counted AS (
                    INSERT INTO link_clicks (day, code, count) SELECT $2, $1, 1 FROM visit
                    ON CONFLICT (day, code) DO UPDATE SET count = link_clicks.count + 1
                 )
                 SELECT visits FROM visit",
                &[&code, &day],
            )
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("take_visit", started.elapsed());
        Ok(row.map(|r| r.get(0)))
    }

    async fn add_clicks(&self, mut clicks: Vec<ClickCount>) -> Result<(), StoreError> {
        let started = Instant::now();
        // Rows locked in one order by every node: two flushes cannot deadlock.
        clicks.sort_by(|a, b| (a.day, &a.code).cmp(&(b.day, &b.code)));
        let codes: Vec<&str> = clicks.iter().map(|c| c.code.as_str()).collect();
        let days: Vec<i32> = clicks.iter().map(|c| c.day).collect();
        let counts: Vec<i64> = clicks.iter().map(|c| c.count).collect();
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO link_clicks (day, code, count)
                 SELECT day, code, SUM(count)::int8
                 FROM unnest($1::text[], $2::int4[], $3::int8[]) AS t (code, day, count)
                 GROUP BY day, code ORDER BY day, code
                 ON CONFLICT (day, code) DO UPDATE SET count = link_clicks.count + EXCLUDED.count",
                &[&codes, &days, &counts],
            )
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("add_clicks", started.elapsed());
        Ok(())
    }

    async fn link_clicks(&self, code: &str, days: Vec<i32>) -> Result<Vec<(i32, i64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT day, count FROM link_clicks WHERE day = ANY ($2) AND code = $1 ORDER BY day",
                &[&code, &days],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn disable_link(&self, code: &str, now_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        // No longer reusable either: the owner's next request for its URL gets a new code.
        let changed = client
            .execute(
                "UPDATE links SET disabled_at_ms = COALESCE(disabled_at_ms, $2), reusable = false
                 WHERE code = $1",
                &[&code, &now_ms],
            )
            .await
            .map_err(db_error)?;
        if changed == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
