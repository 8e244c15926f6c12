//! Schema migrations, embedded in the binary. Each slice keeps its own in its `migrations/`
//! folder, both engines' forms side by side (`NNNN_name.sqlite.sql`, `NNNN_name.postgres.sql`),
//! and lists them with [`migration!`](crate::migration); the [`Schema`] is every slice's, in
//! version order (one sequence of versions across slices, as databases already record them).
//! Migrations are applied in order, each in its own transaction, recorded in
//! `muster_migrations`. A database whose schema is newer than this binary knows is refused
//! rather than guessed at.

/// One schema change, in each engine's SQL.
#[derive(Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// A slice's migration `NNNN_name` from its two files beside the slice's module:
/// `migrations/NNNN_name.sqlite.sql` and `migrations/NNNN_name.postgres.sql`.
#[macro_export]
macro_rules! migration {
    ($version:literal, $name:literal, $file:literal) => {
        $crate::store::migrations::Migration {
            version: $version,
            name: $name,
            sqlite: include_str!(concat!("migrations/", $file, ".sqlite.sql")),
            postgres: include_str!(concat!("migrations/", $file, ".postgres.sql")),
        }
    };
}

/// Every slice's migrations, in version order.
#[derive(Debug, Clone)]
pub struct Schema {
    migrations: Vec<&'static Migration>,
}

impl Schema {
    /// The schema of `parts` (each slice's migrations). Versions must run 1, 2, 3, … with no
    /// gap and none twice: a slice's new migration takes the next free version.
    pub fn new(parts: &[&'static [Migration]]) -> Schema {
        let mut migrations: Vec<&'static Migration> = parts.iter().flat_map(|p| p.iter()).collect();
        migrations.sort_by_key(|m| m.version);
        for (i, m) in migrations.iter().enumerate() {
            assert_eq!(
                m.version,
                i as i64 + 1,
                "migration {} ({}) is out of sequence: versions run 1, 2, 3, … across slices",
                m.version,
                m.name
            );
        }
        Schema { migrations }
    }

    /// The newest version this schema knows.
    pub fn latest(&self) -> i64 {
        self.migrations.last().map_or(0, |m| m.version)
    }
}

/// The highest applied version; the same SQL works on both engines.
pub const APPLIED_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM muster_migrations";

/// The table recording applied migrations; the same SQL works on both engines.
pub const LEDGER_TABLE: &str = "CREATE TABLE IF NOT EXISTS muster_migrations (
    version BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL
)";

/// The migrations to apply on a database whose highest applied version is `applied`: refused
/// when the schema is newer than this binary, or when some are pending and applying them at
/// start is off (`database.migrate_on_start = false`: run `muster migrate`). Both engines run
/// what this returns, in order, each in its transaction, recording each in [`LEDGER_TABLE`].
pub fn plan(schema: &Schema, applied: i64, allowed: bool) -> anyhow::Result<&[&'static Migration]> {
    let pending = pending(schema, applied)?;
    if !pending.is_empty() && !allowed {
        anyhow::bail!(
            "the database schema is at version {applied} and {} migration(s) are pending; run `muster migrate`",
            pending.len()
        );
    }
    Ok(pending)
}

/// Logs one applied migration.
pub fn applied(migration: &Migration) {
    tracing::info!(
        version = migration.version,
        name = migration.name,
        "applied migration"
    );
}

/// What to do given the highest applied version.
pub fn pending(schema: &Schema, applied: i64) -> anyhow::Result<&[&'static Migration]> {
    let migrations = &schema.migrations;
    let latest = schema.latest();
    if applied > latest {
        anyhow::bail!(
            "the database schema is at version {applied}, newer than this binary knows ({latest}); \
             run a newer muster"
        );
    }
    let start = migrations
        .iter()
        .position(|m| m.version > applied)
        .unwrap_or(migrations.len());
    Ok(&migrations[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &[Migration] = &[
        Migration {
            version: 1,
            name: "one",
            sqlite: "",
            postgres: "",
        },
        Migration {
            version: 3,
            name: "three",
            sqlite: "",
            postgres: "",
        },
    ];
    const SECOND: &[Migration] = &[Migration {
        version: 2,
        name: "two",
        sqlite: "",
        postgres: "",
    }];

    #[test]
    fn slices_migrations_make_one_sequence() {
        let schema = Schema::new(&[FIRST, SECOND]);
        let names: Vec<&str> = schema.migrations.iter().map(|m| m.name).collect();
        assert_eq!(names, ["one", "two", "three"]);
        assert_eq!(schema.latest(), 3);
    }

    #[test]
    #[should_panic(expected = "out of sequence")]
    fn a_gap_in_the_versions_is_refused() {
        Schema::new(&[FIRST]);
    }

    #[test]
    fn pending_migrations_wait_for_muster_migrate_when_told_to() {
        let schema = Schema::new(&[FIRST, SECOND]);
        assert!(plan(&schema, 0, false).is_err());
        assert_eq!(plan(&schema, 0, true).expect("ok").len(), 3);
        assert!(plan(&schema, 3, false).expect("up to date").is_empty());
        assert_eq!(plan(&schema, 1, true).expect("ok")[0].name, "two");
    }

    #[test]
    fn newer_schema_is_refused() {
        let schema = Schema::new(&[FIRST, SECOND]);
        assert!(pending(&schema, 99).is_err());
        assert!(pending(&schema, 3).expect("ok").is_empty());
    }
}
