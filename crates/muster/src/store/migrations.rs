//! Schema migrations, embedded in the binary: one folder per engine, files named
//! `NNNN_name.sql`, applied in order, each in its own transaction, recorded in `muster_migrations`.
//! A database whose schema is newer than this binary knows is refused rather than guessed at.

/// One schema change.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "accounts",
        sql: include_str!("migrations/sqlite/0001_accounts.sql"),
    },
    Migration {
        version: 2,
        name: "channel_messages",
        sql: include_str!("migrations/sqlite/0002_channel_messages.sql"),
    },
    Migration {
        version: 3,
        name: "economy",
        sql: include_str!("migrations/sqlite/0003_economy.sql"),
    },
    Migration {
        version: 4,
        name: "economy_account_keys",
        sql: include_str!("migrations/sqlite/0004_economy_account_keys.sql"),
    },
    Migration {
        version: 5,
        name: "links",
        sql: include_str!("migrations/sqlite/0005_links.sql"),
    },
    Migration {
        version: 6,
        name: "cluster_matchmaker",
        sql: include_str!("migrations/sqlite/0006_cluster_matchmaker.sql"),
    },
    Migration {
        version: 7,
        name: "revocation_changes",
        sql: include_str!("migrations/sqlite/0007_revocation_changes.sql"),
    },
    Migration {
        version: 8,
        name: "matchmaker_ticket_users",
        sql: include_str!("migrations/sqlite/0008_matchmaker_ticket_users.sql"),
    },
    Migration {
        version: 9,
        name: "storage_objects",
        sql: include_str!("migrations/sqlite/0009_storage_objects.sql"),
    },
    Migration {
        version: 10,
        name: "leaderboards",
        sql: include_str!("migrations/sqlite/0010_leaderboards.sql"),
    },
    Migration {
        version: 11,
        name: "tournaments",
        sql: include_str!("migrations/sqlite/0011_tournaments.sql"),
    },
    Migration {
        version: 12,
        name: "banned_users",
        sql: include_str!("migrations/sqlite/0012_banned_users.sql"),
    },
    Migration {
        version: 13,
        name: "deleted_users",
        sql: include_str!("migrations/sqlite/0013_deleted_users.sql"),
    },
    Migration {
        version: 14,
        name: "notifications",
        sql: include_str!("migrations/sqlite/0014_notifications.sql"),
    },
    Migration {
        version: 15,
        name: "friends",
        sql: include_str!("migrations/sqlite/0015_friends.sql"),
    },
    Migration {
        version: 16,
        name: "groups",
        sql: include_str!("migrations/sqlite/0016_groups.sql"),
    },
    Migration {
        version: 17,
        name: "leaderboard_events",
        sql: include_str!("migrations/sqlite/0017_leaderboard_events.sql"),
    },
    Migration {
        version: 18,
        name: "console",
        sql: include_str!("migrations/sqlite/0018_console.sql"),
    },
    Migration {
        version: 19,
        name: "player_views",
        sql: include_str!("migrations/sqlite/0019_player_views.sql"),
    },
    Migration {
        version: 20,
        name: "world_leases",
        sql: include_str!("migrations/sqlite/0020_world_leases.sql"),
    },
];

pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "accounts",
        sql: include_str!("migrations/postgres/0001_accounts.sql"),
    },
    Migration {
        version: 2,
        name: "channel_messages",
        sql: include_str!("migrations/postgres/0002_channel_messages.sql"),
    },
    Migration {
        version: 3,
        name: "economy",
        sql: include_str!("migrations/postgres/0003_economy.sql"),
    },
    Migration {
        version: 4,
        name: "economy_account_keys",
        sql: include_str!("migrations/postgres/0004_economy_account_keys.sql"),
    },
    Migration {
        version: 5,
        name: "links",
        sql: include_str!("migrations/postgres/0005_links.sql"),
    },
    Migration {
        version: 6,
        name: "cluster_matchmaker",
        sql: include_str!("migrations/postgres/0006_cluster_matchmaker.sql"),
    },
    Migration {
        version: 7,
        name: "revocation_changes",
        sql: include_str!("migrations/postgres/0007_revocation_changes.sql"),
    },
    Migration {
        version: 8,
        name: "matchmaker_ticket_users",
        sql: include_str!("migrations/postgres/0008_matchmaker_ticket_users.sql"),
    },
    Migration {
        version: 9,
        name: "storage_objects",
        sql: include_str!("migrations/postgres/0009_storage_objects.sql"),
    },
    Migration {
        version: 10,
        name: "leaderboards",
        sql: include_str!("migrations/postgres/0010_leaderboards.sql"),
    },
    Migration {
        version: 11,
        name: "tournaments",
        sql: include_str!("migrations/postgres/0011_tournaments.sql"),
    },
    Migration {
        version: 12,
        name: "banned_users",
        sql: include_str!("migrations/postgres/0012_banned_users.sql"),
    },
    Migration {
        version: 13,
        name: "deleted_users",
        sql: include_str!("migrations/postgres/0013_deleted_users.sql"),
    },
    Migration {
        version: 14,
        name: "notifications",
        sql: include_str!("migrations/postgres/0014_notifications.sql"),
    },
    Migration {
        version: 15,
        name: "friends",
        sql: include_str!("migrations/postgres/0015_friends.sql"),
    },
    Migration {
        version: 16,
        name: "groups",
        sql: include_str!("migrations/postgres/0016_groups.sql"),
    },
    Migration {
        version: 17,
        name: "leaderboard_events",
        sql: include_str!("migrations/postgres/0017_leaderboard_events.sql"),
    },
    Migration {
        version: 18,
        name: "console",
        sql: include_str!("migrations/postgres/0018_console.sql"),
    },
    Migration {
        version: 19,
        name: "player_views",
        sql: include_str!("migrations/postgres/0019_player_views.sql"),
    },
    Migration {
        version: 20,
        name: "world_leases",
        sql: include_str!("migrations/postgres/0020_world_leases.sql"),
    },
];

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
pub fn plan(
    migrations: &'static [Migration],
    applied: i64,
    allowed: bool,
) -> anyhow::Result<&'static [Migration]> {
    let pending = pending(migrations, applied)?;
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
pub fn pending(
    migrations: &'static [Migration],
    applied: i64,
) -> anyhow::Result<&'static [Migration]> {
    let latest = migrations.last().map_or(0, |m| m.version);
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

    #[test]
    fn versions_are_increasing_and_engines_agree() {
        for set in [SQLITE, POSTGRES] {
            for (i, m) in set.iter().enumerate() {
                assert_eq!(m.version, i as i64 + 1, "{} out of order", m.name);
            }
        }
        let names = |set: &[Migration]| set.iter().map(|m| m.name).collect::<Vec<_>>();
        assert_eq!(names(SQLITE), names(POSTGRES));
    }

    #[test]
    fn pending_migrations_wait_for_muster_migrate_when_told_to() {
        assert!(plan(SQLITE, 0, false).is_err());
        assert_eq!(plan(SQLITE, 0, true).expect("ok").len(), SQLITE.len());
        let latest = SQLITE.len() as i64;
        assert!(plan(SQLITE, latest, false).expect("up to date").is_empty());
    }

    #[test]
    fn newer_schema_is_refused() {
        assert!(pending(SQLITE, 99).is_err());
        assert_eq!(pending(SQLITE, 0).expect("ok").len(), SQLITE.len());
        assert!(pending(SQLITE, SQLITE.len() as i64).expect("ok").is_empty());
    }
}
