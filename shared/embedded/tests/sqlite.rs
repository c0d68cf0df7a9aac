//! What only the SQLite runtime promises: the file survives restarts, its schema is
//! versioned, poison messages are dead-lettered with a set reason, and idle workers sleep
//! until a message is sent or due.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gannet_domain::duration::GoDuration;
use gannet_domain::ids::DeploymentId;
use gannet_domain::ports::{
    Changes, Clock, Expect, Outgoing, PreviewFilter, Queue, QueueName, Store, StoreError, Write,
};
use gannet_embedded::conformance::{
    chain_fixture, deployment_fixture, preview_fixture, ManualClock,
};
use gannet_embedded::{OpenError, RuntimeOptions, SqliteRuntime};
use rusqlite::Connection;

struct Db {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
}

impl Db {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
            clock: Arc::default(),
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("gannet.sqlite")
    }

    fn open(&self) -> SqliteRuntime {
        self.open_with(RuntimeOptions::default())
    }

    fn open_with(&self, options: RuntimeOptions) -> SqliteRuntime {
        SqliteRuntime::open_with(self.path(), Arc::clone(&self.clock) as _, options).expect("open")
    }

    fn raw(&self) -> Connection {
        Connection::open(self.path()).expect("raw connection")
    }
}

const LEASE: GoDuration = GoDuration::from_secs(30);

#[tokio::test]
async fn state_and_messages_survive_a_restart() {
    let db = Db::new();
    let d = deployment_fixture("d-1", "web").running_stage(5).build();
    {
        let rt = db.open();
        let write = Write::PutDeployment {
            deployment: Box::new(d.clone()),
            expect: Expect::Absent,
        };
        let send = vec![Outgoing::now(QueueName::Stage, "step d-1".to_owned())];
        rt.apply(Changes {
            writes: vec![write],
            send,
        })
        .await
        .expect("apply");
        let got = rt
            .receive(QueueName::Stage, 1, LEASE)
            .await
            .expect("receive");
        assert_eq!(got.len(), 1, "leased before the crash");
    }
    let rt = db.open();
    assert_eq!(rt.deployment(&d.id).await.expect("read"), Some(d));
    db.clock.advance(LEASE);
    let again = rt
        .receive(QueueName::Stage, 1, LEASE)
        .await
        .expect("receive");
    let seen: Vec<(&str, u32)> = again
        .iter()
        .map(|m| (m.body.as_str(), m.attempts))
        .collect();
    assert_eq!(seen, [("step d-1", 2)], "redelivered after the restart");
}

#[tokio::test]
async fn release_leases_redelivers_at_once_after_a_crash() {
    let db = Db::new();
    {
        let rt = db.open();
        rt.send(vec![
            Outgoing::now(QueueName::Stage, "leased".to_owned()),
            Outgoing::now(QueueName::Stage, "waiting".to_owned()),
        ])
        .await
        .expect("send");
        let got = rt
            .receive(QueueName::Stage, 1, LEASE)
            .await
            .expect("receive");
        assert_eq!(got.len(), 1, "one message leased by the process that dies");
    }
    let rt = db.open();
    assert!(
        rt.receive(QueueName::Stage, 2, LEASE)
            .await
            .expect("receive")
            .len()
            == 1,
        "before the release only the unleased message is visible"
    );
    // Two leases are now held: the dead process's and the one just taken.
    assert_eq!(rt.release_leases().await.expect("release"), 2);
    let again = rt
        .receive(QueueName::Stage, 2, LEASE)
        .await
        .expect("receive");
    let mut bodies: Vec<(&str, u32)> = again
        .iter()
        .map(|m| (m.body.as_str(), m.attempts))
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [("leased", 2), ("waiting", 2)],
        "attempts stand across the release"
    );
    assert_eq!(rt.release_leases().await.expect("release"), 2);
    let none = rt.release_leases().await.expect("release");
    assert_eq!(none, 0, "nothing left leased");
}

#[tokio::test]
async fn a_version_1_file_gains_the_chains_table_and_keeps_its_deployments() {
    let db = Db::new();
    let store = db.open();
    let d = deployment_fixture("d-1", "web").build();
    store
        .apply(Changes {
            writes: vec![Write::PutDeployment {
                deployment: Box::new(d.clone()),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("write");
    drop(store);
    let raw = db.raw();
    raw.execute_batch("DROP TABLE chains; PRAGMA user_version = 1;")
        .expect("make it a version 1 file");
    drop(raw);
    let store = db.open();
    assert_eq!(store.deployment(&d.id).await.expect("read"), Some(d));
    let chains = store.chains(&Default::default()).await.expect("chains");
    assert!(chains.is_empty());
}

#[tokio::test]
async fn a_version_2_file_gains_the_previews_table_and_keeps_its_chains() {
    let db = Db::new();
    let store = db.open();
    let chain = chain_fixture("c-1", 10);
    store
        .apply(Changes {
            writes: vec![Write::PutChain {
                chain: Box::new(chain.clone()),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("write");
    drop(store);
    let raw = db.raw();
    raw.execute_batch("DROP TABLE previews; PRAGMA user_version = 2;")
        .expect("make it a version 2 file");
    drop(raw);
    let store = db.open();
    assert_eq!(store.chain(&chain.id).await.expect("read"), Some(chain));
    let filter = PreviewFilter::default();
    assert!(store.previews(&filter).await.expect("previews").is_empty());
    let preview = preview_fixture("p-1", "demo", Some(7), 20);
    store
        .apply(Changes {
            writes: vec![Write::PutPreview {
                preview: Box::new(preview.clone()),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("write a preview");
    assert_eq!(store.previews(&filter).await.expect("previews"), [preview]);
    let version: i64 = db
        .raw()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, 3);
}

#[tokio::test]
async fn file_is_wal_with_a_schema_version() {
    let db = Db::new();
    drop(db.open());
    let raw = db.raw();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!((mode.as_str(), version), ("wal", 3));

    raw.pragma_update(None, "user_version", 7)
        .expect("set version");
    drop(raw);
    let opened = SqliteRuntime::open(db.path(), Arc::clone(&db.clock) as _);
    assert!(
        matches!(
            opened,
            Err(OpenError::SchemaTooNew {
                found: 7,
                supported: 3
            })
        ),
        "{opened:?}"
    );
}

#[tokio::test]
async fn open_names_the_path_it_cannot_open() {
    let db = Db::new();
    let path = db.dir.path().join("missing-dir").join("gannet.sqlite");
    match SqliteRuntime::open(&path, Arc::clone(&db.clock) as _) {
        Err(OpenError::Open { path: named, .. }) => assert_eq!(named, path),
        other => panic!("expected an open error, got {other:?}"),
    }
}

#[tokio::test]
async fn undecodable_item_is_reported_as_corrupt() {
    let db = Db::new();
    let rt = db.open();
    let d = deployment_fixture("d-1", "web").build();
    let write = Write::PutDeployment {
        deployment: Box::new(d.clone()),
        expect: Expect::Absent,
    };
    rt.apply(Changes {
        writes: vec![write],
        send: Vec::new(),
    })
    .await
    .expect("apply");
    db.raw()
        .execute("UPDATE deployments SET body = '{\"id\":1}'", [])
        .expect("corrupt it");
    match rt
        .deployment(&DeploymentId::parse("d-1").expect("id"))
        .await
    {
        Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "deployment d-1"),
        other => panic!("expected a corrupt item, got {other:?}"),
    }
}

#[tokio::test]
async fn receive_dead_letters_after_max_attempts() {
    let db = Db::new();
    let rt = db.open_with(RuntimeOptions {
        max_attempts: 2,
        ..RuntimeOptions::default()
    });
    rt.send(vec![Outgoing::now(QueueName::Plan, "poison".to_owned())])
        .await
        .expect("send");
    for attempt in 1..=2 {
        let got = rt
            .receive(QueueName::Plan, 1, LEASE)
            .await
            .expect("receive");
        assert_eq!(
            got.iter().map(|m| m.attempts).collect::<Vec<_>>(),
            [attempt]
        );
        db.clock.advance(LEASE);
    }
    assert!(rt
        .receive(QueueName::Plan, 1, LEASE)
        .await
        .expect("receive")
        .is_empty());
    let letters = rt
        .dead_letters(QueueName::Plan)
        .await
        .expect("dead letters");
    let seen: Vec<(&str, &str, u32)> = letters
        .iter()
        .map(|l| (l.body.as_str(), l.reason.as_str(), l.attempts))
        .collect();
    assert_eq!(
        seen,
        [("poison", "received 2 times without being acknowledged", 2)]
    );
}

enum Setup {
    Nothing,
    Visible,
    DueIn(u64),
    SentWhileWaiting,
    OtherQueueSent,
}

/// Waits on the stage queue with a 1 s timeout after `setup`; returns (woken, elapsed).
async fn check_wait(setup: Setup) -> (bool, Duration) {
    let db = Db::new();
    let rt = db.open();
    let send = |queue, delay| Outgoing {
        delay: GoDuration::from_millis(delay),
        ..Outgoing::now(queue, "m".to_owned())
    };
    let mut sender = None;
    match setup {
        Setup::Nothing => {}
        Setup::Visible => rt
            .send(vec![send(QueueName::Stage, 0)])
            .await
            .expect("send"),
        Setup::DueIn(ms) => rt
            .send(vec![send(QueueName::Stage, ms)])
            .await
            .expect("send"),
        Setup::SentWhileWaiting | Setup::OtherQueueSent => {
            let queue = match setup {
                Setup::SentWhileWaiting => QueueName::Stage,
                _ => QueueName::Plan,
            };
            let rt = rt.clone();
            sender = Some(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                rt.send(vec![send(queue, 0)]).await.expect("send");
            }));
        }
    }
    let start = Instant::now();
    let woken = rt
        .wait_for_message(&[QueueName::Stage], Duration::from_secs(1))
        .await
        .expect("wait");
    if let Some(sender) = sender {
        sender.await.expect("sender");
    }
    (woken, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_message_sleeps_until_sent_or_due() {
    let fast = Duration::from_millis(800);
    let (woken, took) = check_wait(Setup::Visible).await;
    assert!(
        woken && took < Duration::from_millis(500),
        "visible: {woken} after {took:?}"
    );
    let (woken, took) = check_wait(Setup::DueIn(200)).await;
    assert!(
        woken && took >= Duration::from_millis(150) && took < fast,
        "due: {woken} {took:?}"
    );
    let (woken, took) = check_wait(Setup::SentWhileWaiting).await;
    assert!(woken && took < fast, "sent: {woken} after {took:?}");
    // Any send wakes a waiter (it may be for it); nothing at all waits out the timeout.
    let (woken, took) = check_wait(Setup::OtherQueueSent).await;
    assert!(woken && took < fast, "other queue: {woken} after {took:?}");
    let (woken, took) = check_wait(Setup::Nothing).await;
    assert!(
        !woken && took >= Duration::from_secs(1),
        "nothing: {woken} after {took:?}"
    );
}

#[tokio::test]
async fn deliveries_older_than_the_window_are_pruned_and_recent_ones_kept() {
    let db = Db::new();
    let store = db.open();
    let record = |id: &str| Changes {
        writes: vec![Write::RecordDelivery {
            id: id.to_owned(),
            at: db.clock.now(),
        }],
        send: Vec::new(),
    };
    store.apply(record("old")).await.expect("old");
    db.clock.advance(GoDuration::from_secs(6 * 24 * 3600));
    store.apply(record("recent")).await.expect("recent");
    db.clock.advance(GoDuration::from_secs(2 * 24 * 3600));
    let week = GoDuration::from_secs(7 * 24 * 3600);
    assert_eq!(store.prune_deliveries(week).await.expect("prune"), 1);
    let left: Vec<String> = db
        .raw()
        .prepare("SELECT id FROM deliveries ORDER BY id")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(left, ["recent"]);
    // The recent one still deduplicates; the pruned one may be recorded again.
    assert!(matches!(
        store.apply(record("recent")).await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .apply(record("old"))
        .await
        .expect("a pruned id is new again");
}

#[tokio::test]
async fn receive_first_takes_one_message_from_the_first_queue_in_order_that_has_one() {
    let db = Db::new();
    let rt = db.open_with(RuntimeOptions {
        max_attempts: 2,
        ..RuntimeOptions::default()
    });
    let order = [QueueName::Stage, QueueName::Plan, QueueName::Trigger];
    assert!(rt
        .receive_first(&order, LEASE)
        .await
        .expect("receive")
        .is_none());
    rt.send(vec![
        Outgoing::now(QueueName::Trigger, "t1".to_owned()),
        Outgoing::now(QueueName::Plan, "p1".to_owned()),
        Outgoing::now(QueueName::Plan, "p2".to_owned()),
        Outgoing {
            delay: GoDuration::from_secs(60),
            ..Outgoing::now(QueueName::Stage, "later".to_owned())
        },
    ])
    .await
    .expect("send");
    let mut taken = Vec::new();
    while let Some(m) = rt.receive_first(&order, LEASE).await.expect("receive") {
        taken.push((m.queue, m.body, m.attempts));
    }
    assert_eq!(
        taken,
        [
            (QueueName::Plan, "p1".to_owned(), 1),
            (QueueName::Plan, "p2".to_owned(), 1),
            (QueueName::Trigger, "t1".to_owned(), 1),
        ],
        "queues in the order given, oldest first within one, one message per look; a delayed one waits"
    );
    // A message at its last attempt goes to the dead letters, and the look goes on to the next.
    db.clock.advance(LEASE);
    let again = rt.receive_first(&order, LEASE).await.expect("receive");
    assert_eq!(
        again.map(|m| (m.body, m.attempts)),
        Some(("p1".to_owned(), 2))
    );
    db.clock.advance(LEASE);
    db.clock.advance(GoDuration::from_secs(1));
    let next = rt.receive_first(&order, LEASE).await.expect("receive");
    assert_eq!(
        next.map(|m| (m.queue, m.body)),
        Some((QueueName::Stage, "later".to_owned())),
        "the first queue in the order is looked at first, now that its message is due"
    );
    let mut rest = Vec::new();
    while let Some(m) = rt.receive_first(&order, LEASE).await.expect("receive") {
        rest.push((m.body, m.attempts));
    }
    assert_eq!(
        rest,
        [("p2".to_owned(), 2), ("t1".to_owned(), 2)],
        "p1, at its last attempt, went to the dead letters and the look went on"
    );
    let letters = rt.dead_letters(QueueName::Plan).await.expect("letters");
    assert_eq!(
        letters.iter().map(|l| l.body.as_str()).collect::<Vec<_>>(),
        ["p1"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_message_sent_wakes_one_waiting_worker_not_all() {
    let db = Db::new();
    let rt = db.open();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let rt = rt.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let woken = rt
                    .wait_for_message(&[QueueName::Stage], Duration::from_secs(2))
                    .await
                    .expect("wait");
                (woken, start.elapsed())
            })
        })
        .collect();
    // Let every waiter register and look (nothing is there yet).
    tokio::time::sleep(Duration::from_millis(300)).await;
    rt.send(vec![Outgoing::now(QueueName::Stage, "one".to_owned())])
        .await
        .expect("send");
    let mut woken_early = 0;
    for waiter in waiters {
        let (woken, took) = waiter.await.expect("waiter");
        if took < Duration::from_millis(1500) {
            assert!(woken, "a waiter that returned early was woken by the send");
            woken_early += 1;
        }
    }
    assert_eq!(
        woken_early, 1,
        "one send wakes one waiter; the others sleep on"
    );
}

#[tokio::test]
async fn messages_to_a_discarded_queue_are_not_kept_and_the_rest_are() {
    let db = Db::new();
    let rt = db.open();
    rt.discard(vec![QueueName::Notify]);
    let d = deployment_fixture("d-1", "web").build();
    rt.apply(Changes {
        writes: vec![Write::PutDeployment {
            deployment: Box::new(d.clone()),
            expect: Expect::Absent,
        }],
        send: vec![
            Outgoing::now(QueueName::Notify, "event".to_owned()),
            Outgoing::now(QueueName::Stage, "step".to_owned()),
        ],
    })
    .await
    .expect("apply");
    rt.send(vec![Outgoing::now(QueueName::Notify, "another".to_owned())])
        .await
        .expect("send");
    assert_eq!(rt.deployment(&d.id).await.expect("read"), Some(d));
    let kept: Vec<(String, String)> = db
        .raw()
        .prepare("SELECT queue, body FROM messages ORDER BY id")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(kept, [("stage".to_owned(), "step".to_owned())]);
}
