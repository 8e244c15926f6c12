//! Invite links on PostgreSQL. A create and a counted visit are [`Write`]s, committed in batches
//! by the writers. A create is one statement ([`CREATE`]): an `INSERT … ON CONFLICT DO NOTHING`
//! that also reads what it conflicted with. The partial unique index on (owner, url) makes
//! concurrent creates of one URL agree on one link, the primary key refuses a taken code.
//! Creates are keyed by (owner, url), so two of the same URL run in order on one writer and the
//! second sees the first's row.

use std::sync::LazyLock;
use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use crate::links::store::{ClickCount, Fallbacks, LinkRecord, LinkStore};
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

const COLUMNS: &str = "code, url, owner, reusable, ios_url, android_url, desktop_url, \
                       expires_at_ms, max_visits, visits, disabled_at_ms, create_time_ms";

/// A link by its code: the redirect's one read, its text built once (not on every visit).
static LINK_BY_CODE: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {COLUMNS} FROM links WHERE code = $1"));

fn record(row: &Row) -> LinkRecord {
    record_at(row, 0)
}

/// The link whose [`COLUMNS`] start at column `at` of `row`.
fn record_at(row: &Row, at: usize) -> LinkRecord {
    LinkRecord {
        code: row.get(at),
        url: row.get(at + 1),
        owner: row.get(at + 2),
        reusable: row.get(at + 3),
        fallbacks: Fallbacks {
            ios: row.get(at + 4),
            android: row.get(at + 5),
            desktop: row.get(at + 6),
        },
        expires_at_ms: row.get(at + 7),
        max_visits: row.get(at + 8),
        visits: row.get(at + 9),
        disabled: row.get::<_, Option<i64>>(at + 10).is_some(),
        create_time_ms: row.get(at + 11),
    }
}

/// Inserts a link unless its code or (for a reusable one) its owner and URL are taken. One row:
/// whether it was inserted, whether the code was already taken, then the owner's reusable link
/// to the URL when there was one (its [`COLUMNS`], NULL otherwise). The reads see the state
/// before this statement: the earlier writes of the batch included.
const CREATE: &str = "
WITH inserted AS (
    INSERT INTO links (code, url, owner, reusable, ios_url, android_url, desktop_url,
                       expires_at_ms, max_visits, visits, create_time_ms)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM inserted), EXISTS (SELECT 1 FROM links WHERE code = $1),
       e.code, e.url, e.owner, e.reusable, e.ios_url, e.android_url, e.desktop_url,
       e.expires_at_ms, e.max_visits, e.visits, e.disabled_at_ms, e.create_time_ms
FROM (SELECT 1) AS one
LEFT JOIN links AS e ON $4 AND e.owner = $3 AND e.url = $2 AND e.reusable";

/// What a [`CREATE`] found.
enum Created {
    Inserted,
    Existing(LinkRecord),
    CodeTaken,
    /// It conflicted with a row committed after the statement began (another node's): not seen
    /// yet, so run it again.
    Unseen,
}

struct CreateLink(LinkRecord);

impl Write for CreateLink {
    type Output = Created;
    const PATH: &'static str = "create_link";
    const SQL: &'static str = CREATE;
    const TYPES: &'static [Type] = &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BOOL,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let link = &self.0;
        vec![
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
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Created, StoreError> {
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("create_link returned no row".into()))?;
        Ok(if row.get(0) {
            Created::Inserted
        } else if row.get::<_, Option<String>>(2).is_some() {
            Created::Existing(record_at(row, 2))
        } else if row.get(1) {
            Created::CodeTaken
        } else {
            Created::Unseen
        })
    }
}

/// Counts a visit unless the link is disabled or used up; answers the visits so far, or None.
/// The visit and its day's click count change together.
struct TakeVisit {
    code: String,
    day: i32,
}

impl Write for TakeVisit {
    type Output = Option<i64>;
    const PATH: &'static str = "take_visit";
    const SQL: &'static str = "
        WITH visit AS (
            UPDATE links SET visits = visits + 1
            WHERE code = $1 AND disabled_at_ms IS NULL
              AND (max_visits IS NULL OR visits < max_visits)
            RETURNING visits
        ),
        counted AS (
            INSERT INTO link_clicks (day, code, count) SELECT $2, $1, 1 FROM visit
            ON CONFLICT (day, code) DO UPDATE SET count = link_clicks.count + 1
        )
        SELECT visits FROM visit";
    const TYPES: &'static [Type] = &[Type::TEXT, Type::INT4];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.code, &self.day]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Option<i64>, StoreError> {
        Ok(rows.first().map(|r| r.get(0)))
    }
}

#[async_trait]
impl LinkStore for PostgresStore {
    async fn create_link(&self, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError> {
        // One owner's creates of one URL take one writer: they run in order.
        let key = key_of((&link.owner, &link.url));
        for _ in 0..3 {
            match self.writers.write(key, CreateLink(link.clone())).await? {
                Created::Inserted => return Ok((link, true)),
                Created::Existing(existing) => return Ok((existing, false)),
                Created::CodeTaken => return Err(StoreError::CodeTaken),
                Created::Unseen => continue,
            }
        }
        Err(StoreError::Database(
            "creating the link kept conflicting; try again".into(),
        ))
    }

    async fn link(&self, code: &str) -> Result<Option<LinkRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let statement = prepared(&client, &LINK_BY_CODE).await?;
        let row = client
            .query_opt(&statement, &[&code])
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("link", started.elapsed());
        Ok(row.as_ref().map(record))
    }

    async fn take_visit(&self, code: &str, day: i32) -> Result<Option<i64>, StoreError> {
        let write = TakeVisit {
            code: code.to_owned(),
            day,
        };
        self.writers.write(key_of(code), write).await
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
