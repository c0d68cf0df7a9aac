//! The diff's gates over a real SQLite store and a real git repository (a `main` branch and a
//! feature branch), with a scripted platform plugin that counts its live reads: a commit off
//! the branch is 409 for every role with no checkout and no read; a non-head commit needs the
//! deploy role; a viewer of an app whose live read runs code gets the last drift check with
//! its age, and no read; the AWS api function's checks come before it asks the drift function.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use gannet_domain::callers::Role;
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::ports::{Changes, Clock, Expect, QueueName, Receipt, Received, Store, Write};
use gannet_embedded::SqliteRuntime;
use gannet_events::Message;

use super::*;
use crate::test_support::{git, rig, store_synced, Live, Platform, Rig, TestClock};

const CONFIG: &str = "app/app.pipecd.yaml";
const LAMBDA_APP: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n";
const SECOND: u64 = 1000;

/// The AWS api function's remote diff, counting the calls that reach it.
#[derive(Default)]
struct CountingRemote {
    calls: AtomicUsize,
}

#[async_trait]
impl RemoteDiff for CountingRemote {
    async fn diff(&self, app: &AppId, commit: &CommitSha) -> Result<DiffView, ApiError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(DiffView {
            app: app.to_string(),
            commit: commit.to_string(),
            status: SyncStatus::Synced,
            reason: "remote".into(),
            drift: Vec::new(),
            live: Vec::new(),
            as_of: None,
            age_seconds: None,
        })
    }
}

/// Three commits on `main` (`first`, `second`, `head`) and one on `feature`, branched from
/// `first`; the app on record as the trigger left it.
struct Lab {
    controller: Controller,
    store: SqliteRuntime,
    clock: Arc<TestClock>,
    platform: Arc<Platform>,
    cache: tempfile::TempDir,
    _repo: tempfile::TempDir,
    id: AppId,
    first: CommitSha,
    second: CommitSha,
    head: CommitSha,
    feature: CommitSha,
}

fn commit(dir: &std::path::Path, memory: &str) -> CommitSha {
    let app = dir.join("app");
    std::fs::create_dir_all(&app).expect("app dir");
    std::fs::write(app.join("app.pipecd.yaml"), LAMBDA_APP).expect("config");
    std::fs::write(app.join("function.yaml"), format!("memory: {memory}\n")).expect("manifest");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", memory]);
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("git runs");
    CommitSha::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("sha")
}

impl Lab {
    async fn new() -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let first = commit(dir, "128");
        git(dir, &["checkout", "-q", "-b", "feature"]);
        let feature = commit(dir, "4096");
        git(dir, &["checkout", "-q", "main"]);
        let second = commit(dir, "256");
        let head = commit(dir, "512");

        let Rig {
            controller,
            store,
            clock,
            platform,
            cache,
            repo_id,
        } = rig(
            dir,
            Millis(1_000_000 * SECOND),
            Live::Drifted("spec.memory"),
        );
        let id = AppId::new(&repo_id, CONFIG);
        let app = App::new(id.clone(), "web".into(), "LambdaApp".into(), clock.now());
        store_synced(&store, app).await;
        Self {
            controller,
            store,
            clock,
            platform,
            cache,
            _repo: repo,
            id,
            first,
            second,
            head,
            feature,
        }
    }

    fn reads(&self) -> usize {
        self.platform.reads.load(Ordering::SeqCst)
    }

    /// The commits checked out so far.
    fn trees(&self) -> Vec<String> {
        let dir = self.cache.path().join("trees");
        let Ok(repos) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for repo in repos.flatten() {
            for tree in std::fs::read_dir(repo.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if tree.path().is_dir() {
                    names.push(tree.file_name().to_string_lossy().into_owned());
                }
            }
        }
        names
    }

    async fn diff_as(&self, role: Role, commit: Option<&CommitSha>) -> Result<DiffView, ApiError> {
        let caller = Caller {
            name: role.as_str().to_owned(),
            role,
        };
        let commit = commit.map(CommitSha::as_str);
        self.controller.diff("web", commit, &caller).await
    }

    /// One drift check of the app, as the drift queue delivers it.
    async fn drift_check(&self) {
        let body = Message::DriftCheck {
            app: self.id.clone(),
            head: None,
        }
        .encode();
        self.controller
            .handle(&Received {
                receipt: Receipt("r".into()),
                queue: QueueName::Drift,
                body,
                attempts: 1,
            })
            .await;
    }
}

fn refused(got: Result<DiffView, ApiError>, status: u16, words: &str) {
    match got {
        Ok(diff) => panic!("expected {status} ({words}), got {diff:?}"),
        Err(e) => {
            assert_eq!(e.status(), status, "{e}");
            let message = e.public_message();
            assert!(message.contains(words), "{message:?} lacks {words:?}");
        }
    }
}

#[tokio::test]
async fn a_commit_off_the_branch_is_409_for_every_role_with_no_checkout_and_no_read() {
    let lab = Lab::new().await;
    for role in [Role::Deployer, Role::Admin] {
        refused(
            lab.diff_as(role, Some(&lab.feature)).await,
            409,
            &format!(
                "commit {} is not on branch main of demo (it is not the head {} or an ancestor of it)",
                lab.feature.short(),
                lab.head.short()
            ),
        );
    }
    // A viewer may not ask for any commit but the head.
    refused(
        lab.diff_as(Role::Viewer, Some(&lab.feature)).await,
        403,
        "needs the role deployer or admin",
    );
    assert_eq!(lab.reads(), 0, "no live read");
    assert_eq!(lab.trees(), Vec::<String>::new(), "nothing checked out");
    // The same for the drift function answering the api function: it checks again.
    let answer = answer_diff(
        &lab.controller,
        &json!({"app": lab.id.as_str(), "commit": lab.feature.as_str()}),
    )
    .await;
    assert_eq!(answer["status"], 409, "{answer}");
    assert_eq!(lab.reads(), 0, "no live read");
    assert_eq!(lab.trees(), Vec::<String>::new(), "nothing checked out");
}

#[tokio::test]
async fn an_ancestor_of_the_head_needs_the_deploy_role_and_a_deployed_commit_counts_as_on_the_branch(
) {
    let lab = Lab::new().await;
    refused(
        lab.diff_as(Role::Viewer, Some(&lab.second)).await,
        403,
        &format!(
            "viewer has the role viewer; a diff at a commit other than the branch head ({}) needs the role deployer or admin",
            lab.head.short()
        ),
    );
    assert_eq!(lab.reads(), 0);
    for (role, commit) in [(Role::Deployer, &lab.second), (Role::Admin, &lab.first)] {
        let diff = lab.diff_as(role, Some(commit)).await.expect("a diff");
        assert_eq!(diff.commit, commit.as_str());
        assert_eq!(diff.status, SyncStatus::OutOfSync);
        assert_eq!(diff.as_of, None, "read now");
    }
    assert_eq!(lab.reads(), 2);
    assert_eq!(lab.trees().len(), 2);

    // A commit gannet deployed (say the branch was force-pushed since) is not refused.
    let mut deployed = Deployment::test().with_status(DeploymentStatus::Success);
    deployed.app = lab.id.clone();
    deployed.commit.sha = lab.feature.clone();
    lab.store
        .apply(Changes {
            writes: vec![Write::PutDeployment {
                deployment: Box::new(deployed),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("store the deployment");
    let diff = lab
        .diff_as(Role::Deployer, Some(&lab.feature))
        .await
        .expect("a diff at a deployed commit");
    assert_eq!(diff.commit, lab.feature.as_str());
    refused(
        lab.diff_as(Role::Viewer, Some(&lab.feature)).await,
        403,
        "needs the role deployer or admin",
    );
}

#[tokio::test]
async fn a_viewer_of_an_app_whose_live_read_runs_code_gets_the_last_drift_check_and_its_age() {
    let lab = Lab::new().await;
    lab.platform.runs_code.store(true, Ordering::SeqCst);
    // No check has compared anything yet: said so, and nothing is read.
    refused(
        lab.diff_as(Role::Viewer, None).await,
        409,
        "no drift check has compared web with its live state yet",
    );
    // Naming the head is the same as naming nothing.
    refused(
        lab.diff_as(Role::Viewer, Some(&lab.head)).await,
        409,
        "no drift check has compared web",
    );
    assert_eq!(lab.reads(), 0);
    assert_eq!(lab.trees(), Vec::<String>::new(), "nothing checked out");

    lab.drift_check().await;
    assert_eq!(lab.reads(), 1, "the drift check read the live state");
    let checked_at = lab.clock.now();
    lab.clock.0.fetch_add(90 * SECOND, Ordering::SeqCst);
    let diff = lab
        .diff_as(Role::Viewer, None)
        .await
        .expect("the last check");
    assert_eq!(lab.reads(), 1, "a viewer's diff reads nothing");
    assert_eq!(diff.status, SyncStatus::OutOfSync);
    assert_eq!(diff.commit, lab.head.as_str());
    assert_eq!(diff.drift[0].field, "spec.memory");
    assert!(diff.reason.contains(lab.head.short()), "{}", diff.reason);
    assert_eq!(diff.as_of, Some(checked_at));
    assert_eq!(diff.age_seconds, Some(90));

    // A deployer's diff reads it now.
    let diff = lab.diff_as(Role::Deployer, None).await.expect("a read");
    assert_eq!(lab.reads(), 2);
    assert_eq!((diff.as_of, diff.age_seconds), (None, None));

    // An app whose live read runs no code is read now for a viewer too.
    lab.platform.runs_code.store(false, Ordering::SeqCst);
    let diff = lab.diff_as(Role::Viewer, None).await.expect("a read");
    assert_eq!(lab.reads(), 3);
    assert_eq!(diff.as_of, None);
}

/// The AWS api function: the role and the branch are checked before the drift function is
/// asked, and a viewer's diff of an app whose live read runs code never reaches it.
#[tokio::test]
async fn the_api_function_checks_before_it_asks_the_drift_function() {
    let lab = Lab::new().await;
    let remote = Arc::new(CountingRemote::default());
    let api = lab.controller.clone().with_remote_diff(remote.clone());
    let caller = |role: Role| Caller {
        name: role.as_str().to_owned(),
        role,
    };
    let feature = Some(lab.feature.as_str());
    refused(
        api.diff("web", feature, &caller(Role::Admin)).await,
        409,
        "is not on branch main",
    );
    refused(
        api.diff("web", feature, &caller(Role::Viewer)).await,
        403,
        "needs the role deployer or admin",
    );
    lab.platform.runs_code.store(true, Ordering::SeqCst);
    refused(
        api.diff("web", None, &caller(Role::Viewer)).await,
        409,
        "no drift check has compared web",
    );
    assert_eq!(remote.calls.load(Ordering::SeqCst), 0);

    let diff = api
        .diff("web", Some(lab.second.as_str()), &caller(Role::Deployer))
        .await
        .expect("asked remotely");
    assert_eq!(diff.reason, "remote");
    assert_eq!(remote.calls.load(Ordering::SeqCst), 1);
    assert_eq!(lab.reads(), 0, "nothing read here");
    assert_eq!(
        lab.trees(),
        Vec::<String>::new(),
        "nothing checked out here"
    );
}
