//! The drift check over a real SQLite store and a real git repository, with a scripted
//! platform plugin standing in for the AWS API: status transitions and their events, writes
//! only on change, DEPLOYING apps left alone, INVALID_CONFIG at the head, and auto-sync as
//! `trigger.onOutOfSync` says (off by default, one deployment per drift, minWindow, a pending
//! deployment first).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use gannet_domain::deployment::Deployment;
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{Clock, Expect, Queue, QueueName, Received, Store, Write};
use gannet_embedded::SqliteRuntime;

use super::*;
use crate::test_support::{git, rig, store_synced, Live, Platform, Rig, TestClock};
use crate::Disposition;

const CONFIG: &str = "app/app.pipecd.yaml";
const LAMBDA_APP: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n";
const AUTO_SYNC: &str =
    "  trigger:\n    onOutOfSync:\n      disabled: false\n      minWindow: 5m\n";
const MINUTE: u64 = 60_000;

/// One app in a real git repository, a controller over an in-memory SQLite store, and the
/// scripted platform.
struct Lab {
    controller: Controller,
    store: SqliteRuntime,
    clock: Arc<TestClock>,
    platform: Arc<Platform>,
    repo: tempfile::TempDir,
    _cache: tempfile::TempDir,
    id: AppId,
}

impl Lab {
    /// The app's config is `config`; its function manifest is fine. The app is on record as
    /// SYNCED by a deployment that finished 10 minutes ago.
    async fn new(config: &str) -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        let Rig {
            controller,
            store,
            clock,
            platform,
            cache,
            repo_id,
        } = rig(repo.path(), Millis(100 * MINUTE), Live::InSync);
        let id = AppId::new(&repo_id, CONFIG);
        let lab = Self {
            controller,
            store,
            clock,
            platform,
            repo,
            _cache: cache,
            id,
        };
        lab.commit(config, "memory: 128");
        let mut app = App::new(lab.id.clone(), "web".into(), "LambdaApp".into(), lab.now());
        app.last_deployment_finished_at = Some(Millis(90 * MINUTE));
        store_synced(&lab.store, app).await;
        lab
    }

    fn now(&self) -> Millis {
        self.clock.now()
    }

    fn advance(&self, ms: u64) {
        self.clock.0.fetch_add(ms, Ordering::SeqCst);
    }

    fn commit(&self, config: &str, manifest: &str) {
        let dir = self.repo.path().join("app");
        std::fs::create_dir_all(&dir).expect("app dir");
        std::fs::write(dir.join("app.pipecd.yaml"), config).expect("write config");
        std::fs::write(dir.join("function.yaml"), manifest).expect("write manifest");
        git(self.repo.path(), &["add", "-A"]);
        git(self.repo.path(), &["commit", "-q", "-m", "change"]);
    }

    fn script(&self, live: Live) {
        *self.platform.live.lock().expect("script") = live;
    }

    async fn app(&self) -> App {
        self.store
            .app(&self.id)
            .await
            .expect("read")
            .expect("the app")
    }

    async fn update_app(&self, change: impl FnOnce(&mut App)) {
        let before = self.app().await;
        let mut app = before.clone();
        change(&mut app);
        app.version += 1;
        self.store
            .apply(Changes {
                writes: vec![Write::PutApp {
                    app: Box::new(app),
                    expect: Expect::Version(before.version),
                }],
                send: Vec::new(),
            })
            .await
            .expect("update the app");
    }

    /// One drift check that reads the head itself, delivered as the queue would; what became
    /// of the message.
    async fn check(&self) -> Disposition {
        self.check_at(None).await
    }

    /// One drift check against `head`, as the sweep names it.
    async fn check_at(&self, head: Option<CommitSha>) -> Disposition {
        let body = Message::DriftCheck {
            app: self.id.clone(),
            head,
        }
        .encode();
        self.controller
            .handle(&Received {
                receipt: gannet_domain::ports::Receipt("r".into()),
                queue: QueueName::Drift,
                body,
                attempts: 1,
            })
            .await
    }

    /// The messages sent to `queue` since the last look, taken off it.
    async fn take(&self, queue: QueueName) -> Vec<Message> {
        let mut out = Vec::new();
        for _ in 0..100 {
            let got = self
                .store
                .receive(queue, 10, GoDuration::from_secs(60))
                .await
                .expect("receive");
            if got.is_empty() {
                break;
            }
            for m in got {
                self.store.ack(&m.receipt).await.expect("ack");
                out.push(Message::decode(&m.body).expect("a message"));
            }
        }
        out
    }

    /// The CloudEvents types notified since the last look.
    async fn events(&self) -> Vec<String> {
        self.take(QueueName::Notify)
            .await
            .into_iter()
            .filter_map(|m| match m {
                Message::Notify { event } => Some(event.kind),
                _ => None,
            })
            .collect()
    }

    async fn deployments(&self) -> Vec<Deployment> {
        self.store
            .deployments(&DeploymentFilter::default())
            .await
            .expect("deployments")
    }
}

const SYNCED: &str = "dev.gannet.application.synced";
const OUT_OF_SYNC: &str = "dev.gannet.application.out-of-sync";
const TRIGGERED: &str = "dev.gannet.deployment.triggered";

#[tokio::test]
async fn status_changes_raise_one_event_and_a_steady_app_is_not_written() {
    let lab = Lab::new(LAMBDA_APP).await;
    // (what the platform shows, status after the check, events, written)
    let cases = [
        (Live::InSync, SyncStatus::Synced, vec![], true),
        (Live::InSync, SyncStatus::Synced, vec![], false),
        (
            Live::Drifted("spec.memory"),
            SyncStatus::OutOfSync,
            vec![OUT_OF_SYNC],
            true,
        ),
        (
            Live::Drifted("spec.memory"),
            SyncStatus::OutOfSync,
            vec![],
            false,
        ),
        (
            Live::Drifted("spec.timeout"),
            SyncStatus::OutOfSync,
            vec![],
            true,
        ),
        (Live::InSync, SyncStatus::Synced, vec![SYNCED], true),
        // A plugin without a live-state face leaves the status alone.
        (Live::NotSupported, SyncStatus::Synced, vec![], false),
        // Nor does a check whose job has not ended: the next sweep looks again.
        (Live::Pending, SyncStatus::Synced, vec![], false),
        (Live::Refused, SyncStatus::Unknown, vec![], true),
        (Live::InSync, SyncStatus::Synced, vec![SYNCED], true),
        (Live::Refused, SyncStatus::Unknown, vec![], true),
        (Live::Refused, SyncStatus::Unknown, vec![], false),
    ];
    for (i, (live, status, events, written)) in cases.into_iter().enumerate() {
        let before = lab.app().await;
        lab.advance(1000);
        lab.script(live.clone());
        assert_eq!(lab.check().await, Disposition::Ack, "case {i}");
        let after = lab.app().await;
        assert_eq!(after.sync_status, status, "case {i} {live:?}: {after:#?}");
        assert_eq!(lab.events().await, events, "case {i} {live:?}");
        assert_eq!(
            after.version != before.version,
            written,
            "case {i} {live:?}"
        );
        if written {
            assert_eq!(after.drift_changed_at, Some(lab.now()), "case {i}");
        } else {
            assert_eq!(after, before, "case {i}");
        }
        match live {
            Live::Drifted(field) => {
                assert_eq!(after.drift.len(), 1);
                assert_eq!(after.drift[0].field, field);
                assert!(after.sync_reason.contains(field), "{}", after.sync_reason);
                assert_eq!(after.live.len(), 1);
            }
            Live::InSync => {
                assert!(after.drift.is_empty());
                assert!(
                    after.sync_reason.contains("matches Git"),
                    "{}",
                    after.sync_reason
                );
            }
            Live::Refused => {
                assert!(after.live.is_empty() && after.drift.is_empty());
                assert!(
                    after.sync_reason.contains("AccessDeniedException"),
                    "{}",
                    after.sync_reason
                );
            }
            _ => {}
        }
    }
    assert!(
        lab.deployments().await.is_empty(),
        "auto-sync is off by default"
    );
}

/// A deployment that ends SUCCESS puts Git's state back: releasing its lock clears the drift on
/// record and announces APPLICATION_SYNCED once, so the app never reads SYNCED with stale
/// fields; the next check that finds the platform in sync says nothing more, and a change by
/// hand after it is OUT_OF_SYNC again, once.
#[tokio::test]
async fn a_deployment_that_ends_clears_the_drift_and_announces_synced_once() {
    let lab = Lab::new(LAMBDA_APP).await;
    lab.script(Live::Drifted("spec.memory"));
    lab.check().await;
    assert_eq!(lab.events().await, [OUT_OF_SYNC]);
    // A deployment of the app ended SUCCESS, holding the app's lock: the plan handler
    // releases it.
    let mut d = Deployment::test();
    d.app = lab.id.clone();
    d.status = gannet_domain::deployment::DeploymentStatus::Success;
    d.completed_at = Some(lab.now());
    lab.store
        .apply(Changes {
            writes: vec![Write::PutDeployment {
                deployment: Box::new(d.clone()),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("store the deployment");
    lab.update_app(|a| {
        a.active_deployment = Some(d.id.clone());
        a.sync_status = SyncStatus::Deploying;
    })
    .await;
    for _ in 0..2 {
        // Delivered twice: the second finds the lock released and announces nothing.
        lab.controller.plan(&lab.id).await.expect("plan");
    }
    let app = lab.app().await;
    assert_eq!(app.sync_status, SyncStatus::Synced);
    assert!(app.drift.is_empty(), "no stale drift: {:?}", app.drift);
    assert_eq!(lab.events().await, [SYNCED]);
    lab.script(Live::InSync);
    lab.check().await;
    assert_eq!(lab.events().await, Vec::<String>::new());
    lab.script(Live::Drifted("spec.memory"));
    lab.check().await;
    assert_eq!(lab.events().await, [OUT_OF_SYNC]);
}

#[tokio::test]
async fn deploying_apps_are_left_alone() {
    let lab = Lab::new(LAMBDA_APP).await;
    lab.update_app(|a| {
        a.sync_status = SyncStatus::Deploying;
        a.active_deployment = Some(gannet_domain::DeploymentId::parse("d-1").expect("id"));
    })
    .await;
    let before = lab.app().await;
    lab.script(Live::Drifted("spec.memory"));
    assert_eq!(lab.check().await, Disposition::Ack);
    assert_eq!(lab.app().await, before);
    assert_eq!(lab.platform.reads.load(Ordering::SeqCst), 0);
    assert!(lab.events().await.is_empty());
}

#[tokio::test]
async fn an_invalid_config_or_manifest_at_the_head_is_invalid_config() {
    let lab = Lab::new(LAMBDA_APP).await;
    lab.script(Live::Drifted("spec.memory"));
    // (config, manifest, words the reason must hold)
    let cases = [
        ("kind: LambdaApp\nspec: [", "memory: 128", CONFIG),
        (
            LAMBDA_APP,
            "memory: bad",
            "function.yaml:1: spec.memory: bad value",
        ),
    ];
    for (config, manifest, reason) in cases {
        lab.commit(config, manifest);
        lab.advance(1000);
        assert_eq!(lab.check().await, Disposition::Ack);
        let app = lab.app().await;
        assert_eq!(app.sync_status, SyncStatus::InvalidConfig, "{app:#?}");
        assert!(app.sync_reason.contains(reason), "{}", app.sync_reason);
        assert!(app.drift.is_empty());
    }
    assert_eq!(lab.platform.reads.load(Ordering::SeqCst), 0);
    // Fixed at the head: checked again.
    lab.commit(LAMBDA_APP, "memory: 128");
    lab.check().await;
    assert_eq!(lab.app().await.sync_status, SyncStatus::OutOfSync);
}

#[tokio::test]
async fn auto_sync_starts_one_deployment_per_drift_even_when_the_check_is_delivered_twice() {
    let lab = Lab::new(&format!("{LAMBDA_APP}{AUTO_SYNC}")).await;
    lab.script(Live::Drifted("spec.memory"));
    lab.check().await;
    lab.check().await; // the same message again
    let deployments = lab.deployments().await;
    assert_eq!(deployments.len(), 1, "{deployments:#?}");
    let d = &deployments[0];
    assert_eq!(d.trigger.kind, TriggerKind::OnOutOfSync);
    assert_eq!(d.status, DeploymentStatus::Pending);
    let app = lab.app().await;
    assert_eq!(app.sync_status, SyncStatus::OutOfSync);
    assert!(
        app.sync_reason
            .ends_with(&format!("auto-sync started deployment {}", d.id)),
        "{}",
        app.sync_reason
    );
    let plans: Vec<Message> = lab.take(QueueName::Plan).await;
    assert_eq!(
        plans,
        [Message::Plan {
            app: lab.id.clone()
        }]
    );
    assert_eq!(lab.events().await, [OUT_OF_SYNC, TRIGGERED]);
}

#[tokio::test]
async fn auto_sync_waits_for_min_window_and_for_a_pending_deployment() {
    let lab = Lab::new(&format!("{LAMBDA_APP}{AUTO_SYNC}")).await;
    lab.update_app(|a| a.last_deployment_finished_at = Some(lab.now()))
        .await;
    lab.script(Live::Drifted("spec.memory"));
    // (minutes passed since the last deployment finished, deployments after the check)
    for (minutes, expected) in [(1, 0), (4, 0), (5, 1)] {
        let finished = lab
            .app()
            .await
            .last_deployment_finished_at
            .expect("finished");
        lab.clock
            .0
            .store(finished.0 + minutes * MINUTE, Ordering::SeqCst);
        lab.check().await;
        assert_eq!(lab.deployments().await.len(), expected, "{minutes} min");
    }

    // A deployment is already waiting (a push): none is added, the reason names it.
    let other = Lab::new(&format!("{LAMBDA_APP}{AUTO_SYNC}")).await;
    let app = other.app().await;
    let head = other
        .controller
        .inner
        .git
        .head(&app.repo, "main")
        .await
        .expect("head");
    let cfg = deployable_config(
        CONFIG,
        &format!("{LAMBDA_APP}{AUTO_SYNC}"),
        &other.controller.inner.plugins,
    )
    .expect("config");
    let pushed = pending_deployment(
        &app,
        &cfg,
        &head,
        "main",
        Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        },
        "ON_COMMIT",
        other.now(),
    );
    other
        .store
        .apply(Changes {
            writes: vec![Write::PutDeployment {
                deployment: Box::new(pushed.clone()),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("store the deployment");
    other.script(Live::Drifted("spec.memory"));
    other.check().await;
    let ids: Vec<_> = other
        .deployments()
        .await
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(ids, std::slice::from_ref(&pushed.id));
    let reason = other.app().await.sync_reason;
    assert!(
        reason.ends_with(&format!("deployment {} is pending", pushed.id)),
        "{reason}"
    );
}

#[tokio::test]
async fn transient_errors_retry_and_change_nothing() {
    let lab = Lab::new(LAMBDA_APP).await;
    let before = lab.app().await;
    lab.script(Live::Throttled);
    match lab.check().await {
        Disposition::Retry { reason, .. } => {
            assert!(reason.contains("TooManyRequestsException"), "{reason}")
        }
        other => panic!("a throttled read is retried, got {other:?}"),
    }
    assert_eq!(lab.app().await, before);
    assert!(lab.events().await.is_empty());
}

impl Lab {
    async fn head(&self) -> CommitSha {
        self.controller
            .inner
            .git
            .head(&self.id.repo(), "main")
            .await
            .expect("head")
            .sha
    }
}

#[tokio::test]
async fn the_sweep_queues_one_check_per_app_once_naming_the_head() {
    let lab = Lab::new(LAMBDA_APP).await;
    let head = lab.head().await;
    assert_eq!(lab.controller.drift_sweep().await.expect("sweep"), 1);
    // A second sweep while the first check still waits adds nothing (dedupe key).
    assert_eq!(lab.controller.drift_sweep().await.expect("sweep"), 1);
    let checks = lab.take(QueueName::Drift).await;
    assert_eq!(
        checks,
        [Message::DriftCheck {
            app: lab.id.clone(),
            head: Some(head),
        }]
    );
}

#[tokio::test]
async fn a_check_compares_with_the_head_the_sweep_read_and_never_auto_syncs_an_older_one() {
    let lab = Lab::new(&format!("{LAMBDA_APP}{AUTO_SYNC}")).await;
    let swept = lab.head().await;
    // The branch moves on (its config breaks) after the sweep read the head.
    lab.commit("kind: LambdaApp\nspec: [", "memory: 128");
    lab.script(Live::Drifted("spec.memory"));
    lab.check_at(Some(swept.clone())).await;
    let app = lab.app().await;
    assert_eq!(app.sync_status, SyncStatus::OutOfSync, "{app:#?}");
    assert!(app
        .sync_reason
        .starts_with(&format!("at {}:", swept.short())));
    assert!(
        lab.deployments().await.is_empty(),
        "no deployment of a commit the branch has left"
    );
    // The next check, at the new head, sees the broken config.
    lab.check_at(Some(lab.head().await)).await;
    assert_eq!(lab.app().await.sync_status, SyncStatus::InvalidConfig);
}
