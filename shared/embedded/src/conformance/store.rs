//! Store conformance cases: conditional writes, atomicity with the outbox, delivery dedupe,
//! stage logs, and deployment, chain and plan preview queries.

use gannet_domain::chain::ChainStatus;
use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ids::{ChainId, DeploymentId, PreviewId, RepoId, StageId};
use gannet_domain::ports::{
    ChainFilter, Changes, DeploymentCursor, DeploymentFilter, Expect, LogLine, Outgoing,
    PreviewFilter, Queue, QueueName, Store, StoreError, Write,
};
use gannet_domain::preview::PreviewStatus;

use super::{
    app_fixture, app_id, cases, chain_fixture, deployment_fixture, preview_fixture, repo_fixture,
    Case, Subject,
};

pub(crate) fn cases<S: Store + 'static, Q: Queue + 'static>() -> Vec<Case<S, Q>> {
    cases![
        conditional_writes,
        failed_condition_writes_nothing,
        deliveries_are_recorded_once,
        sends_commit_with_writes,
        sends_wait_for_their_delay[ClockDrivenTime],
        items_round_trip,
        stage_logs_in_order,
        deployment_filters_and_order,
        chain_filters_and_order,
        preview_filters_and_order,
    ]
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    App,
    Repo,
    Deployment,
    Chain,
    Preview,
}

/// A write of item `name` of `kind` carrying `version`, under `expect`.
fn versioned_write(kind: Kind, name: &str, version: u64, expect: Expect) -> Write {
    match kind {
        Kind::App => {
            let mut app = app_fixture(name);
            app.version = version;
            Write::PutApp {
                app: Box::new(app),
                expect,
            }
        }
        Kind::Repo => {
            let mut repo = repo_fixture(name);
            repo.version = version;
            Write::PutRepo { repo, expect }
        }
        Kind::Deployment => Write::PutDeployment {
            deployment: Box::new(deployment_fixture(name, "web").seq(version).build()),
            expect,
        },
        Kind::Chain => {
            let mut chain = chain_fixture(name, 1);
            chain.version = version;
            Write::PutChain {
                chain: Box::new(chain),
                expect,
            }
        }
        Kind::Preview => {
            let mut preview = preview_fixture(name, "demo", Some(7), 1);
            preview.version = version;
            Write::PutPreview {
                preview: Box::new(preview),
                expect,
            }
        }
    }
}

/// The version of item `name` of `kind` as stored, after checking it reads back whole.
async fn stored_version<S: Store>(store: &S, kind: Kind, name: &str) -> Option<u64> {
    match kind {
        Kind::App => {
            let app = store.app(&app_id(name)).await.expect("read app")?;
            let mut want = app_fixture(name);
            want.version = app.version;
            assert_eq!(app, want, "app {name} reads back");
            Some(app.version)
        }
        Kind::Repo => {
            let id = RepoId::parse(name).expect("valid repo id");
            let repo = store.repo(&id).await.expect("read repo")?;
            let mut want = repo_fixture(name);
            want.version = repo.version;
            assert_eq!(repo, want, "repo {name} reads back");
            Some(repo.version)
        }
        Kind::Deployment => {
            let id = DeploymentId::parse(name).expect("valid deployment id");
            let d = store.deployment(&id).await.expect("read deployment")?;
            let want = deployment_fixture(name, "web").seq(d.seq).build();
            assert_eq!(d, want, "deployment {name} reads back");
            Some(d.seq)
        }
        Kind::Chain => {
            let id = ChainId::parse(name).expect("valid chain id");
            let chain = store.chain(&id).await.expect("read chain")?;
            let mut want = chain_fixture(name, 1);
            want.version = chain.version;
            assert_eq!(chain, want, "chain {name} reads back");
            Some(chain.version)
        }
        Kind::Preview => {
            let id = PreviewId::parse(name).expect("valid preview id");
            let preview = store.preview(&id).await.expect("read preview")?;
            let mut want = preview_fixture(name, "demo", Some(7), 1);
            want.version = preview.version;
            assert_eq!(preview, want, "preview {name} reads back");
            Some(preview.version)
        }
    }
}

fn one(write: Write) -> Changes {
    Changes {
        writes: vec![write],
        send: Vec::new(),
    }
}

fn assert_conflict_names(result: Result<(), StoreError>, item: &str, context: &str) {
    match result {
        Err(StoreError::Conflict { what }) => {
            assert!(
                what.contains(item),
                "{context}: conflict {what:?} should name {item}"
            );
        }
        other => panic!("{context}: expected a conflict naming {item}, got {other:?}"),
    }
}

/// `Absent`, `Version(n)` and `Any` hold or conflict against the stored version, per item type.
pub async fn conditional_writes<S: Store, Q: Queue>(s: Subject<S, Q>) {
    use Expect::{Absent, Any, Version};
    // (condition, version written, accepted, stored version afterwards)
    let steps = [
        (Version(0), 1, false, None),
        (Absent, 0, true, Some(0)),
        (Absent, 5, false, Some(0)),
        (Version(1), 2, false, Some(0)),
        (Version(0), 1, true, Some(1)),
        (Version(0), 2, false, Some(1)),
        (Any, 7, true, Some(7)),
        (Version(7), 8, true, Some(8)),
    ];
    for (kind, name, other) in [
        (Kind::App, "web", "api"),
        (Kind::Repo, "demo", "infra"),
        (Kind::Deployment, "d-1", "d-2"),
        (Kind::Chain, "c-1", "c-2"),
        (Kind::Preview, "p-1", "p-2"),
    ] {
        for (i, (expect, version, accepted, after)) in steps.into_iter().enumerate() {
            let context = format!("{kind:?} step {i}: {expect:?} writing version {version}");
            let result = s
                .store
                .apply(one(versioned_write(kind, name, version, expect)))
                .await;
            if accepted {
                assert!(result.is_ok(), "{context}: {result:?}");
            } else {
                assert_conflict_names(result, name, &context);
            }
            assert_eq!(
                stored_version(&s.store, kind, name).await,
                after,
                "{context}"
            );
        }
        let created = s
            .store
            .apply(one(versioned_write(kind, other, 3, Any)))
            .await;
        assert!(
            created.is_ok(),
            "{kind:?}: Any creates a missing item: {created:?}"
        );
        assert_eq!(
            stored_version(&s.store, kind, other).await,
            Some(3),
            "{kind:?} {other}"
        );
    }
}

/// One failed condition anywhere in a change set: nothing is written and nothing is sent.
pub async fn failed_condition_writes_nothing<S: Store, Q: Queue>(s: Subject<S, Q>) {
    let good = || {
        vec![
            versioned_write(Kind::App, "web", 0, Expect::Absent),
            versioned_write(Kind::Repo, "demo", 0, Expect::Absent),
            versioned_write(Kind::Deployment, "d-new", 0, Expect::Absent),
            versioned_write(Kind::Preview, "p-new", 0, Expect::Absent),
            Write::RecordDelivery {
                id: "delivery-new".to_owned(),
                at: Millis(5),
            },
        ]
    };
    // Items that exist before each attempt, so each failing write below conflicts.
    let seed = Changes {
        writes: vec![
            versioned_write(Kind::Deployment, "d-old", 4, Expect::Absent),
            versioned_write(Kind::Preview, "p-old", 2, Expect::Absent),
            Write::RecordDelivery {
                id: "delivery-old".to_owned(),
                at: Millis(1),
            },
        ],
        send: Vec::new(),
    };
    s.store.apply(seed).await.expect("seed");
    let failing = [
        (
            "d-old",
            versioned_write(Kind::Deployment, "d-old", 5, Expect::Version(3)),
        ),
        (
            "d-old",
            versioned_write(Kind::Deployment, "d-old", 5, Expect::Absent),
        ),
        (
            "web-missing",
            versioned_write(Kind::App, "web-missing", 1, Expect::Version(0)),
        ),
        (
            "delivery-old",
            Write::RecordDelivery {
                id: "delivery-old".to_owned(),
                at: Millis(2),
            },
        ),
        (
            "p-old",
            versioned_write(Kind::Preview, "p-old", 3, Expect::Version(1)),
        ),
    ];
    for (at, (item, bad)) in [0, 2, 4, 1, 5].into_iter().zip(failing) {
        let mut writes = good();
        writes.insert(at, bad);
        let changes = Changes {
            writes,
            send: vec![Outgoing::now(QueueName::Plan, format!("plan-{item}"))],
        };
        let context = format!("failing write for {item} at position {at}");
        assert_conflict_names(s.store.apply(changes).await, item, &context);
        assert_eq!(
            stored_version(&s.store, Kind::App, "web").await,
            None,
            "{context}"
        );
        assert_eq!(
            stored_version(&s.store, Kind::Repo, "demo").await,
            None,
            "{context}"
        );
        assert_eq!(
            stored_version(&s.store, Kind::Deployment, "d-new").await,
            None,
            "{context}"
        );
        assert_eq!(
            stored_version(&s.store, Kind::Deployment, "d-old").await,
            Some(4),
            "{context}"
        );
        assert_eq!(
            stored_version(&s.store, Kind::Preview, "p-new").await,
            None,
            "{context}"
        );
        assert_eq!(
            stored_version(&s.store, Kind::Preview, "p-old").await,
            Some(2),
            "{context}"
        );
        let sent = s
            .queue
            .receive(QueueName::Plan, 10, GoDuration::from_secs(30))
            .await;
        assert_eq!(
            sent.expect("receive").len(),
            0,
            "{context}: no message sent"
        );
    }
    // The delivery in the rolled-back sets was never recorded.
    let delivery = Write::RecordDelivery {
        id: "delivery-new".to_owned(),
        at: Millis(9),
    };
    s.store
        .apply(one(delivery))
        .await
        .expect("delivery-new was not recorded before");
}

/// A webhook delivery id can be recorded once.
pub async fn deliveries_are_recorded_once<S: Store, Q: Queue>(s: Subject<S, Q>) {
    let record = |id: &str| {
        one(Write::RecordDelivery {
            id: id.to_owned(),
            at: Millis(10),
        })
    };
    s.store
        .apply(record("abc-1"))
        .await
        .expect("first delivery");
    assert_conflict_names(
        s.store.apply(record("abc-1")).await,
        "abc-1",
        "repeated delivery",
    );
    s.store
        .apply(record("abc-2"))
        .await
        .expect("another delivery");
}

/// Messages of a committed change set are sent; a set of sends only needs no writes.
pub async fn sends_commit_with_writes<S: Store, Q: Queue>(s: Subject<S, Q>) {
    let visibility = GoDuration::from_secs(30);
    let changes = Changes {
        writes: vec![versioned_write(Kind::Deployment, "d-1", 0, Expect::Absent)],
        send: vec![
            Outgoing::now(QueueName::Plan, "plan-d-1".to_owned()),
            Outgoing::now(QueueName::Stage, "step-d-1".to_owned()),
        ],
    };
    s.store.apply(changes).await.expect("apply");
    assert_eq!(
        stored_version(&s.store, Kind::Deployment, "d-1").await,
        Some(0)
    );
    let plan = s
        .queue
        .receive(QueueName::Plan, 10, visibility)
        .await
        .expect("receive plan");
    assert_eq!(bodies(&plan), ["plan-d-1"]);
    let stage = s
        .queue
        .receive(QueueName::Stage, 10, visibility)
        .await
        .expect("receive stage");
    assert_eq!(bodies(&stage), ["step-d-1"]);

    let only_send = Changes {
        writes: Vec::new(),
        send: vec![Outgoing::now(QueueName::Notify, "event".to_owned())],
    };
    s.store.apply(only_send).await.expect("apply sends only");
    let notify = s
        .queue
        .receive(QueueName::Notify, 10, visibility)
        .await
        .expect("receive");
    assert_eq!(bodies(&notify), ["event"]);
}

/// A delayed message of a committed change set waits for its delay.
pub async fn sends_wait_for_their_delay<S: Store, Q: Queue>(s: Subject<S, Q>) {
    let visibility = GoDuration::from_secs(30);
    let mut later = Outgoing::now(QueueName::Stage, "step-later".to_owned());
    later.delay = GoDuration::from_secs(5);
    let changes = Changes {
        writes: vec![versioned_write(Kind::Deployment, "d-1", 0, Expect::Absent)],
        send: vec![later],
    };
    s.store.apply(changes).await.expect("apply");
    let stage = s
        .queue
        .receive(QueueName::Stage, 10, visibility)
        .await
        .expect("receive stage");
    assert!(stage.is_empty(), "the delayed message waits: {stage:?}");
    s.clock.advance(GoDuration::from_millis(4_999));
    let stage = s
        .queue
        .receive(QueueName::Stage, 10, visibility)
        .await
        .expect("receive stage");
    assert!(stage.is_empty(), "1 ms before the delay: {stage:?}");
    s.clock.advance(GoDuration::from_millis(1));
    let stage = s
        .queue
        .receive(QueueName::Stage, 10, visibility)
        .await
        .expect("receive stage");
    assert_eq!(bodies(&stage), ["step-later"]);
}

fn bodies(received: &[gannet_domain::ports::Received]) -> Vec<&str> {
    received.iter().map(|r| r.body.as_str()).collect()
}

/// Items read back as written; missing items are `None`; `apps()` is ordered by id.
pub async fn items_round_trip<S: Store, Q: Queue>(s: Subject<S, Q>) {
    assert_eq!(s.store.app(&app_id("nope")).await.expect("app"), None);
    assert_eq!(
        s.store
            .repo(&RepoId::parse("nope").expect("id"))
            .await
            .expect("repo"),
        None
    );
    let missing = DeploymentId::parse("d-nope").expect("id");
    assert_eq!(
        s.store.deployment(&missing).await.expect("deployment"),
        None
    );
    assert!(s.store.apps().await.expect("apps").is_empty());

    let mut writes: Vec<Write> = ["zeta", "alpha", "mid"]
        .into_iter()
        .map(|name| Write::PutApp {
            app: Box::new(app_fixture(name)),
            expect: Expect::Absent,
        })
        .collect();
    let mut repo = repo_fixture("demo");
    repo.scanned_head = Some(deployment_fixture("d-x", "web").build().commit.sha);
    writes.push(Write::PutRepo {
        repo: repo.clone(),
        expect: Expect::Absent,
    });
    let deployment = deployment_fixture("d-1", "web")
        .running_stage(1_500)
        .summary("go")
        .build();
    writes.push(Write::PutDeployment {
        deployment: Box::new(deployment.clone()),
        expect: Expect::Absent,
    });
    s.store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await
        .expect("apply");

    let apps = s.store.apps().await.expect("apps");
    let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["alpha", "mid", "zeta"], "apps ordered by id");
    assert_eq!(apps[0], app_fixture("alpha"));
    assert_eq!(
        s.store.app(&app_id("mid")).await.expect("app"),
        Some(app_fixture("mid"))
    );
    assert_eq!(s.store.repo(&repo.repo).await.expect("repo"), Some(repo));
    assert_eq!(
        s.store.deployment(&deployment.id).await.expect("get"),
        Some(deployment)
    );
}

/// Log lines get positions 1.. per stage, in order; `after` skips what was read.
pub async fn stage_logs_in_order<S: Store, Q: Queue>(s: Subject<S, Q>) {
    let d1 = DeploymentId::parse("d-1").expect("id");
    let d2 = DeploymentId::parse("d-2").expect("id");
    let build = StageId::parse("build").expect("id");
    let test = StageId::parse("test").expect("id");
    let lines = |texts: &[&str]| texts.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
    let append = [
        (&d1, &build, 10, lines(&["one", "two"])),
        (&d1, &test, 11, lines(&["t-one"])),
        (&d1, &build, 12, lines(&[])),
        (&d1, &build, 13, lines(&["three"])),
        (&d2, &build, 14, lines(&["other"])),
    ];
    for (deployment, stage, at, texts) in append {
        s.store
            .append_log(deployment, stage, Millis(at), &texts)
            .await
            .expect("append");
    }
    let line = |seq, at, text: &str| LogLine {
        seq,
        at: Millis(at),
        text: text.to_owned(),
        stderr: false,
    };
    let all = usize::MAX;
    let reads = [
        (
            &d1,
            &build,
            0,
            all,
            vec![line(1, 10, "one"), line(2, 10, "two"), line(3, 13, "three")],
        ),
        (&d1, &build, 2, all, vec![line(3, 13, "three")]),
        (&d1, &build, 3, all, vec![]),
        // A page: at most `limit` lines, the next page after its last.
        (
            &d1,
            &build,
            0,
            2,
            vec![line(1, 10, "one"), line(2, 10, "two")],
        ),
        (&d1, &build, 2, 2, vec![line(3, 13, "three")]),
        (&d1, &build, 0, 0, vec![]),
        (&d1, &test, 0, all, vec![line(1, 11, "t-one")]),
        (&d2, &build, 0, all, vec![line(1, 14, "other")]),
        (&d2, &test, 0, all, vec![]),
    ];
    for (deployment, stage, after, limit, want) in reads {
        let got = s
            .store
            .logs(deployment, stage, after, limit)
            .await
            .expect("logs");
        assert_eq!(
            got, want,
            "logs of {deployment}/{stage} after {after}, at most {limit}"
        );
    }
}

/// Filters by app and status, newest first by created_at then id, limited.
pub async fn deployment_filters_and_order<S: Store, Q: Queue>(s: Subject<S, Q>) {
    use DeploymentStatus::{Failure, Pending, Running, Success};
    let fixtures = [
        ("d1", "a", 100, Running),
        ("d2", "a", 300, Success),
        ("d3", "b", 200, Pending),
        ("d4", "b", 300, Running),
        ("d5", "a", 50, Failure),
    ];
    let writes = fixtures
        .iter()
        .map(|&(id, app, at, status)| Write::PutDeployment {
            deployment: Box::new(
                deployment_fixture(id, app)
                    .created_at(at)
                    .status(status)
                    .build(),
            ),
            expect: Expect::Absent,
        })
        .collect();
    s.store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await
        .expect("apply");

    let filter =
        |app: Option<&str>, statuses: &[DeploymentStatus], limit: Option<usize>| DeploymentFilter {
            app: app.map(app_id),
            statuses: statuses.to_vec(),
            limit,
            before: None,
        };
    let queries = [
        (filter(None, &[], None), vec!["d4", "d2", "d3", "d1", "d5"]),
        (filter(Some("a"), &[], None), vec!["d2", "d1", "d5"]),
        (filter(None, &[Running], None), vec!["d4", "d1"]),
        (
            filter(None, &[Running, Pending], None),
            vec!["d4", "d3", "d1"],
        ),
        (filter(Some("b"), &[Running], None), vec!["d4"]),
        (filter(None, &[], Some(2)), vec!["d4", "d2"]),
        (filter(Some("a"), &[], Some(1)), vec!["d2"]),
        (filter(None, &[], Some(0)), vec![]),
        (filter(Some("c"), &[], None), vec![]),
    ];
    for (filter, want) in &queries {
        check_deployments(&s.store, filter, want).await;
    }

    // Pages: after a cursor, the older ones in the same order; d4 and d2 share a millisecond,
    // so the id breaks the tie.
    let page =
        |app: Option<&str>, statuses: &[DeploymentStatus], at: u64, id: &str| DeploymentFilter {
            before: Some(DeploymentCursor {
                created_at: Millis(at),
                id: DeploymentId::parse(id).expect("id"),
            }),
            ..filter(app, statuses, Some(2))
        };
    check_deployments(&s.store, &page(None, &[], 300, "d4"), &["d2", "d3"]).await;
    check_deployments(&s.store, &page(None, &[], 200, "d3"), &["d1", "d5"]).await;
    check_deployments(&s.store, &page(Some("a"), &[], 300, "d2"), &["d1", "d5"]).await;
    check_deployments(&s.store, &page(None, &[Running], 300, "d4"), &["d1"]).await;
    check_deployments(&s.store, &page(None, &[], 50, "d5"), &[]).await;

    // The indexed columns follow updates.
    let done = deployment_fixture("d1", "a")
        .created_at(100)
        .status(Success)
        .seq(1)
        .build();
    let update = Write::PutDeployment {
        deployment: Box::new(done),
        expect: Expect::Version(0),
    };
    s.store.apply(one(update)).await.expect("update d1");
    check_deployments(&s.store, &filter(None, &[Running], None), &["d4"]).await;
    check_deployments(&s.store, &filter(None, &[Success], None), &["d2", "d1"]).await;
}

async fn check_deployments<S: Store>(store: &S, filter: &DeploymentFilter, want: &[&str]) {
    let got = store.deployments(filter).await.expect("deployments");
    let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, want, "deployments({filter:?})");
}

/// Chains list newest first (the id breaking a tie), by status, up to a limit; the status
/// a query selects by follows an update.
pub async fn chain_filters_and_order<S: Store, Q: Queue>(s: Subject<S, Q>) {
    use ChainStatus::{Failure, Running, Success};
    let fixtures = [
        ("c1", 100, Running),
        ("c2", 300, Success),
        ("c3", 200, Failure),
        ("c4", 300, Running),
    ];
    let writes = fixtures
        .iter()
        .map(|&(id, at, status)| {
            let mut chain = chain_fixture(id, at);
            chain.status = status;
            Write::PutChain {
                chain: Box::new(chain),
                expect: Expect::Absent,
            }
        })
        .collect();
    s.store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await
        .expect("apply");
    let ids = |statuses: &[ChainStatus], limit: Option<usize>| {
        let filter = ChainFilter {
            statuses: statuses.to_vec(),
            limit,
        };
        let store = &s.store;
        async move {
            let found = store.chains(&filter).await.expect("list chains");
            found
                .into_iter()
                .map(|c| c.id.as_str().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(ids(&[], None).await, ["c4", "c2", "c3", "c1"]);
    assert_eq!(ids(&[Running], None).await, ["c4", "c1"]);
    assert_eq!(ids(&[Running, Failure], None).await, ["c4", "c3", "c1"]);
    assert_eq!(ids(&[], Some(2)).await, ["c4", "c2"]);
    assert!(ids(&[], Some(0)).await.is_empty());
    assert!(ids(&[ChainStatus::Cancelled], None).await.is_empty());

    let mut done = chain_fixture("c1", 100);
    done.status = Success;
    done.version = 1;
    let update = Write::PutChain {
        chain: Box::new(done),
        expect: Expect::Version(0),
    };
    s.store.apply(one(update)).await.expect("update c1");
    assert_eq!(ids(&[Running], None).await, ["c4"]);
    assert_eq!(ids(&[Success], None).await, ["c2", "c1"]);
}

/// Plan previews list newest first (the id breaking a tie): all of them, a repository's, one
/// pull request's, by status, up to a limit; the status a query selects by follows an update.
pub async fn preview_filters_and_order<S: Store, Q: Queue>(s: Subject<S, Q>) {
    use PreviewStatus::{Done, Failed, Queued, Running, Superseded};
    let fixtures = [
        ("p1", "demo", Some(7), 100, Superseded),
        ("p2", "demo", Some(7), 300, Running),
        ("p3", "demo", Some(8), 200, Done),
        ("p4", "infra", Some(7), 300, Queued),
        ("p5", "demo", None, 250, Failed),
        ("p6", "demo", Some(70), 400, Queued),
    ];
    let writes = fixtures
        .iter()
        .map(|&(id, repo, pr, at, status)| {
            let mut preview = preview_fixture(id, repo, pr, at);
            preview.status = status;
            Write::PutPreview {
                preview: Box::new(preview),
                expect: Expect::Absent,
            }
        })
        .collect();
    s.store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await
        .expect("apply");
    let ids = |repo: Option<&str>, pr: Option<u64>, statuses: &[PreviewStatus], limit| {
        let filter = PreviewFilter {
            repo: repo.map(|r| RepoId::parse(r).expect("valid repository id")),
            pr,
            statuses: statuses.to_vec(),
            limit,
        };
        let store = &s.store;
        async move {
            let found = store.previews(&filter).await.expect("list previews");
            found
                .into_iter()
                .map(|p| p.id.as_str().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids(None, None, &[], None).await,
        ["p6", "p4", "p2", "p5", "p3", "p1"]
    );
    assert_eq!(ids(None, None, &[], Some(3)).await, ["p6", "p4", "p2"]);
    assert!(ids(None, None, &[], Some(0)).await.is_empty());
    assert_eq!(ids(None, None, &[Queued], None).await, ["p6", "p4"]);
    assert_eq!(
        ids(None, None, &[Running, Done, Superseded], Some(2)).await,
        ["p2", "p3"]
    );
    assert_eq!(
        ids(Some("demo"), None, &[], None).await,
        ["p6", "p2", "p5", "p3", "p1"]
    );
    assert_eq!(ids(Some("demo"), None, &[], Some(2)).await, ["p6", "p2"]);
    assert_eq!(
        ids(Some("demo"), None, &[Failed, Done], None).await,
        ["p5", "p3"]
    );
    assert_eq!(ids(Some("infra"), None, &[], None).await, ["p4"]);
    assert!(ids(Some("other"), None, &[], None).await.is_empty());
    // Pull request 7 is not 70, and another repository's pull request 7 is not this one's.
    assert_eq!(ids(Some("demo"), Some(7), &[], None).await, ["p2", "p1"]);
    assert_eq!(ids(Some("demo"), Some(7), &[], Some(1)).await, ["p2"]);
    assert_eq!(
        ids(Some("demo"), Some(7), &[Queued, Running], None).await,
        ["p2"]
    );
    assert!(ids(Some("demo"), Some(7), &[Done], None).await.is_empty());
    assert_eq!(ids(Some("demo"), Some(70), &[], None).await, ["p6"]);
    assert!(ids(Some("demo"), Some(9), &[], None).await.is_empty());
    // The port asks for a repository with a pull request; without one, every repository's.
    assert_eq!(ids(None, Some(7), &[], None).await, ["p4", "p2", "p1"]);
    assert_eq!(ids(None, Some(7), &[Superseded], Some(1)).await, ["p1"]);

    let mut done = preview_fixture("p2", "demo", Some(7), 300);
    done.status = Done;
    done.version = 1;
    let update = Write::PutPreview {
        preview: Box::new(done),
        expect: Expect::Version(0),
    };
    s.store.apply(one(update)).await.expect("update p2");
    assert!(ids(None, None, &[Running], None).await.is_empty());
    assert_eq!(ids(None, None, &[Done], None).await, ["p2", "p3"]);
    assert_eq!(ids(Some("demo"), Some(7), &[Done], None).await, ["p2"]);
    assert!(ids(Some("demo"), Some(7), &[Running], None)
        .await
        .is_empty());
}
