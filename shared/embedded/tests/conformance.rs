//! Runs the port conformance suites against the SQLite adapter, on files and in memory.

use std::future::ready;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gannet_embedded::conformance::{queue_suite, store_suite, ManualClock, Subject};
use gannet_embedded::{RuntimeOptions, SqliteRuntime};
use tempfile::TempDir;

type SqliteSubject = Subject<SqliteRuntime, SqliteRuntime>;

fn subject(runtime: impl FnOnce(Arc<ManualClock>) -> SqliteRuntime) -> SqliteSubject {
    let clock = Arc::new(ManualClock::default());
    let runtime = runtime(Arc::clone(&clock) as _);
    Subject {
        store: runtime.clone(),
        queue: runtime,
        clock,
        max_attempts: RuntimeOptions::default().max_attempts,
        lacks: Vec::new(),
    }
}

/// A fresh database file per case, in one temporary directory.
struct Files {
    dir: TempDir,
    next: AtomicUsize,
}

impl Files {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
            next: AtomicUsize::new(0),
        }
    }

    fn subject(&self) -> SqliteSubject {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("case-{n}.sqlite"));
        subject(|clock| SqliteRuntime::open(path, clock).expect("open database"))
    }
}

fn in_memory() -> SqliteSubject {
    subject(|clock| {
        SqliteRuntime::open_in_memory(clock, RuntimeOptions::default()).expect("open in memory")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_conformance_on_file() {
    let files = Files::new();
    let skipped = store_suite(|| ready(files.subject())).await;
    assert!(skipped.is_empty(), "SQLite runs every case: {skipped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_conformance_on_file() {
    let files = Files::new();
    let skipped = queue_suite(|| ready(files.subject())).await;
    assert!(skipped.is_empty(), "SQLite runs every case: {skipped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_in_memory() {
    let skipped = store_suite(|| ready(in_memory())).await;
    assert!(skipped.is_empty(), "SQLite runs every case: {skipped:?}");
    // A queue adapter needs no store to run the queue suite.
    let queue_only = || {
        let Subject {
            queue,
            clock,
            max_attempts,
            lacks,
            ..
        } = in_memory();
        ready(Subject {
            store: (),
            queue,
            clock,
            max_attempts,
            lacks,
        })
    };
    let skipped = queue_suite(queue_only).await;
    assert!(skipped.is_empty(), "SQLite runs every case: {skipped:?}");
}
