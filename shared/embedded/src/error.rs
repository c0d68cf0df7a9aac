//! Errors: opening the database (public), and failures inside one database call (crate-only),
//! which are mapped onto the ports' `StoreError` and `QueueError`.

use std::path::PathBuf;

use gannet_domain::ports::{QueueError, StoreError};

/// Opening or preparing the SQLite file failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open SQLite database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot configure SQLite connection ({setting})")]
    Configure {
        setting: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create or migrate the schema")]
    Migrate {
        #[source]
        source: rusqlite::Error,
    },
    #[error("database schema version {found} is newer than this gannet supports ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
}

/// What went wrong inside one database call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    /// A write condition did not hold; the transaction was rolled back.
    #[error("conflicting write: {0}")]
    Conflict(String),
    /// The receipt does not name a message currently held under it.
    #[error("stale receipt {0}")]
    StaleReceipt(String),
    #[error("corrupt item {key}")]
    Corrupt {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode {key}")]
    Encode {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("database task did not finish")]
    Join(#[from] tokio::task::JoinError),
}

impl DbError {
    pub(crate) fn into_store(self, operation: &'static str) -> StoreError {
        match self {
            Self::Conflict(what) => StoreError::Conflict { what },
            Self::Corrupt { key, source } => StoreError::Corrupt {
                key,
                source: Box::new(source),
            },
            other => StoreError::Unavailable {
                operation,
                source: Box::new(other),
            },
        }
    }

    pub(crate) fn into_queue(self, operation: &'static str) -> QueueError {
        match self {
            Self::StaleReceipt(receipt) => QueueError::StaleReceipt(receipt),
            other => QueueError::Unavailable {
                operation,
                source: Box::new(other),
            },
        }
    }
}
