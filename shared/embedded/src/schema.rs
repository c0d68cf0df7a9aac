//! The tables, their indexes, and the schema version kept in `PRAGMA user_version`.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::OpenError;

/// The schema this code writes. Bump it, and add a step to [`migrate`], when a table changes.
pub(crate) const SCHEMA_VERSION: i64 = 3;

const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS apps (
    id      TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    body    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS repos (
    id      TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    body    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deployments (
    id         TEXT PRIMARY KEY,
    app        TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deployments_newest ON deployments (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS deployments_by_app ON deployments (app, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS deployments_by_status ON deployments (status, created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS stage_logs (
    deployment TEXT NOT NULL,
    stage      TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (deployment, stage, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    queue      TEXT NOT NULL,
    body       TEXT NOT NULL,
    visible_at INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    receipt    TEXT,
    dedupe_key TEXT,
    sent_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_due ON messages (queue, visible_at, id);
-- At most one never-received message per queue and dedupe key.
CREATE UNIQUE INDEX IF NOT EXISTS messages_dedupe ON messages (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND attempts = 0;
CREATE TABLE IF NOT EXISTS dead_letters (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    queue    TEXT NOT NULL,
    body     TEXT NOT NULL,
    reason   TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_by_queue ON dead_letters (queue, id);
";

/// Version 2: deployment chains.
const SCHEMA_V2: &str = "
CREATE TABLE IF NOT EXISTS chains (
    id         TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chains_newest ON chains (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS chains_by_status ON chains (status, created_at DESC, id DESC);
";

/// Version 3: plan previews. `pr` is NULL for a preview asked through the API or CLI.
const SCHEMA_V3: &str = "
CREATE TABLE IF NOT EXISTS previews (
    id         TEXT PRIMARY KEY,
    repo       TEXT NOT NULL,
    pr         INTEGER,
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS previews_newest ON previews (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS previews_by_repo ON previews (repo, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS previews_by_pr ON previews (repo, pr, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS previews_by_status ON previews (status, created_at DESC, id DESC);
";

/// Creates the tables, or brings an older file up to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), OpenError> {
    let migrate_err = |source| OpenError::Migrate { source };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(migrate_err)?;
    let found: i64 = tx
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(migrate_err)?;
    if found > SCHEMA_VERSION {
        return Err(OpenError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    tx.execute_batch(SCHEMA_V1).map_err(migrate_err)?;
    tx.execute_batch(SCHEMA_V2).map_err(migrate_err)?;
    tx.execute_batch(SCHEMA_V3).map_err(migrate_err)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(migrate_err)?;
    tx.commit().map_err(migrate_err)
}

/// A stored integer for a `u64` (versions, times), saturating at `i64::MAX`.
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The `u64` a stored integer stands for; negative values (never written) read as 0.
pub(crate) fn uint(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
