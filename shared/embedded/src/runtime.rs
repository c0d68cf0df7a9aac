//! The runtime: one SQLite file in WAL mode, one writer connection and a few readers, each used
//! inside `spawn_blocking` so the async workers never block on SQLite.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use gannet_domain::duration::Millis;
use gannet_domain::ports::{Clock, Outgoing, QueueName, StoreError};
use gannet_domain::GoDuration;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::Notify;

use crate::error::{DbError, OpenError};
use crate::schema;

/// How the runtime treats its file and its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// A message received this many times without being acknowledged is moved to the dead
    /// letters by the next receive instead of being delivered again. At least 1.
    pub max_attempts: u32,
    /// Read-only connections used for queries next to the one writer (file databases only).
    pub readers: usize,
    /// How long a connection waits for a lock held by another process before failing.
    pub busy_timeout: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            readers: 4,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The embedded Store and Queue: apps, deployments, logs, deliveries and every queue in one
/// SQLite file. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct SqliteRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    clock: Arc<dyn Clock>,
    max_attempts: u32,
    /// Wakes one waiting worker per message sent (see [`SqliteRuntime::signal_sent`]).
    sent: Notify,
    /// How many callers are in [`SqliteRuntime::wait_for_message`].
    waiting: AtomicUsize,
    /// Queues nobody consumes here: messages to them are dropped, not stored.
    discarded: std::sync::OnceLock<Vec<QueueName>>,
}

impl fmt::Debug for SqliteRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteRuntime")
            .field("readers", &self.inner.readers.len())
            .field("max_attempts", &self.inner.max_attempts)
            .finish_non_exhaustive()
    }
}

/// One caller in [`SqliteRuntime::wait_for_message`]; counted out when dropped.
pub(crate) struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SqliteRuntime {
    /// Opens (creating if needed) the database file at `path` with default options.
    /// Blocking: call it once at startup.
    pub fn open(path: impl AsRef<Path>, clock: Arc<dyn Clock>) -> Result<Self, OpenError> {
        Self::open_with(path, clock, RuntimeOptions::default())
    }

    /// Opens (creating if needed) the database file at `path`. Blocking: call it once at startup.
    pub fn open_with(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
        options: RuntimeOptions,
    ) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let open = |path: &Path| {
            Connection::open(path).map_err(|source| OpenError::Open {
                path: path.to_owned(),
                source,
            })
        };
        let mut writer = open(path)?;
        configure(&writer, &options)?;
        let mode: String = writer
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|source| OpenError::Configure {
                setting: "journal_mode",
                source,
            })?;
        tracing::debug!(path = %path.display(), journal_mode = %mode, "opened SQLite database");
        schema::migrate(&mut writer)?;
        let mut readers = Vec::with_capacity(options.readers);
        for _ in 0..options.readers {
            let reader = open(path)?;
            configure(&reader, &options)?;
            reader
                .pragma_update(None, "query_only", true)
                .map_err(|source| OpenError::Configure {
                    setting: "query_only",
                    source,
                })?;
            readers.push(Mutex::new(reader));
        }
        Ok(Self::new(writer, readers, clock, &options))
    }

    /// A private database in memory, gone when the runtime is dropped. For quick tests only:
    /// every call goes through the single connection.
    pub fn open_in_memory(
        clock: Arc<dyn Clock>,
        options: RuntimeOptions,
    ) -> Result<Self, OpenError> {
        let mut conn = Connection::open_in_memory().map_err(|source| OpenError::Open {
            path: ":memory:".into(),
            source,
        })?;
        configure(&conn, &options)?;
        schema::migrate(&mut conn)?;
        Ok(Self::new(conn, Vec::new(), clock, &options))
    }

    fn new(
        writer: Connection,
        readers: Vec<Mutex<Connection>>,
        clock: Arc<dyn Clock>,
        options: &RuntimeOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                readers,
                next_reader: AtomicUsize::new(0),
                clock,
                max_attempts: options.max_attempts.max(1),
                sent: Notify::new(),
                waiting: AtomicUsize::new(0),
                discarded: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Drops, from now on, every message sent to `queues` instead of storing it: for a queue
    /// whose handler would do nothing with them (the notify queue when no event reaches anyone;
    /// see `Controller::hears_events`). Set once; a later call changes nothing.
    pub fn discard(&self, queues: Vec<QueueName>) {
        for queue in &queues {
            tracing::debug!(
                queue = queue.as_str(),
                "messages to this queue are not kept: nobody here consumes them"
            );
        }
        let _ = self.inner.discarded.set(queues);
    }

    /// `messages` without those to discarded queues.
    pub(crate) fn kept(&self, mut messages: Vec<Outgoing>) -> Vec<Outgoing> {
        if let Some(discarded) = self.inner.discarded.get() {
            messages.retain(|m| !discarded.contains(&m.queue));
        }
        messages
    }

    pub(crate) fn now(&self) -> Millis {
        self.inner.clock.now()
    }

    /// Forgets webhook deliveries recorded more than `keep` ago (GitHub lets a delivery be
    /// redelivered for 3 days; a redelivery after that is judged again, which is harmless, as
    /// the trigger reads the branch head itself). Returns how many went.
    pub async fn prune_deliveries(&self, keep: GoDuration) -> Result<usize, StoreError> {
        let before = i64::try_from(self.now().0.saturating_sub(keep.as_millis())).unwrap_or(0);
        self.write(move |tx| {
            Ok(tx
                .prepare_cached("DELETE FROM deliveries WHERE at < ?1")?
                .execute(rusqlite::params![before])?)
        })
        .await
        .map_err(|e| e.into_store("prune deliveries"))
    }

    pub(crate) fn max_attempts(&self) -> u32 {
        self.inner.max_attempts
    }

    /// Wakes one waiting worker for each of `messages` that a committed change sent (or gave
    /// back), not every worker: a woken worker that finds nothing to take goes back to sleep, so
    /// waking all of them for one message costs each a look at every queue. Nobody is woken
    /// when nobody waits: a worker that is not waiting looks at the queues before it waits, and
    /// sees what was committed (see [`SqliteRuntime::wait_for_message`]).
    pub(crate) fn signal_sent(&self, messages: usize) {
        let waiting = self.inner.waiting.load(Ordering::SeqCst);
        for _ in 0..messages.min(waiting) {
            self.inner.sent.notify_one();
        }
    }

    /// What [`SqliteRuntime::wait_for_message`] waits on, counted as waiting until the guard
    /// is dropped.
    pub(crate) fn sent_signal(&self) -> (&Notify, Waiting<'_>) {
        self.inner.waiting.fetch_add(1, Ordering::SeqCst);
        (&self.inner.sent, Waiting(&self.inner.waiting))
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer; commits if it returns `Ok`,
    /// rolls back otherwise.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = lock(&inner.writer);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await?
    }

    /// Runs the query `f` on a reader (the writer when there are none).
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let conn = inner.reader();
            f(&conn)
        })
        .await?
    }
}

impl Inner {
    /// A free reader if there is one, else waits for the next one in turn.
    fn reader(&self) -> MutexGuard<'_, Connection> {
        let count = self.readers.len();
        if count == 0 {
            return lock(&self.writer);
        }
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..count {
            if let Ok(conn) = self.readers[(start + i) % count].try_lock() {
                return conn;
            }
        }
        lock(&self.readers[start % count])
    }
}

/// A panic while the lock was held dropped its transaction, which rolled back, so the
/// connection is still usable.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

fn configure(conn: &Connection, options: &RuntimeOptions) -> Result<(), OpenError> {
    conn.busy_timeout(options.busy_timeout)
        .map_err(|source| OpenError::Configure {
            setting: "busy_timeout",
            source,
        })?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|source| OpenError::Configure {
            setting: "synchronous",
            source,
        })?;
    conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)
        .map_err(|source| OpenError::Configure {
            setting: "cache_size",
            source,
        })?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Each connection's page cache, in KiB (SQLite's default is 2,000, so five connections could
/// hold 10 MB of pages). A page not in it is read from the operating system's file cache,
/// where the file's hot pages stay whatever this is: the cache saves a copy and a system call
/// per page, not a disk read.
const PAGE_CACHE_KIB: i64 = 512;
