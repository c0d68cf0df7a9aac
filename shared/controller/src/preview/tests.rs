//! Plan previews over a real SQLite store and a real git repository (pull request heads on
//! `refs/pull/<n>/head`), with the scripted platform standing in for the platform's API and a
//! recording check-run port standing in for GitHub's (the GitHub adapter is tested against
//! the GitHub fake in `gannet-git`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{BoxError, Queue, QueueName, Received};
use gannet_embedded::SqliteRuntime;
use gannet_events::github::sign;
use gannet_sdk::plugin::{Faces, Plugins};

use super::*;
use crate::test_support::{git, rig_with, Live, Platform, Rig, TestClock};
use crate::{Disposition, ForkPreviews, Secret, WebhookRequest};

const SECRET: &str = "s3cret";
const LAMBDA_APP: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: NAME\n";

/// Every check run created or updated, as the port got it.
#[derive(Default)]
struct Recorded {
    runs: Mutex<Vec<(u64, CheckRun)>>,
    requests: Mutex<Vec<(Option<u64>, CheckRun)>>,
}

#[async_trait]
impl CheckRuns for Recorded {
    async fn create(&self, _repo: &RepoId, run: &CheckRun) -> Result<u64, BoxError> {
        let mut runs = self.runs.lock().unwrap();
        let id = runs.len() as u64 + 1;
        runs.push((id, run.clone()));
        self.requests.lock().unwrap().push((None, run.clone()));
        Ok(id)
    }

    async fn update(&self, _repo: &RepoId, id: u64, run: &CheckRun) -> Result<(), BoxError> {
        let mut runs = self.runs.lock().unwrap();
        let entry = runs
            .iter_mut()
            .find(|(i, _)| *i == id)
            .ok_or("no such run")?;
        assert_eq!(entry.1.head_sha, run.head_sha, "an update keeps the head");
        entry.1 = run.clone();
        self.requests.lock().unwrap().push((Some(id), run.clone()));
        Ok(())
    }
}

impl Recorded {
    fn runs(&self) -> Vec<(u64, CheckRun)> {
        self.runs.lock().unwrap().clone()
    }
}

/// A job runner that runs nothing and records which jobs it was asked to stop (the scripted
/// platform's pending read names its job).
#[derive(Default)]
struct Cancels(Mutex<Vec<String>>);

#[async_trait]
impl gannet_sdk::jobs::JobRunner for Cancels {
    async fn start(
        &self,
        _spec: gannet_sdk::jobs::JobSpec<'_>,
    ) -> Result<(), gannet_sdk::jobs::JobError> {
        Ok(())
    }

    async fn poll(
        &self,
        key: &JobKey,
        _cursor: &str,
    ) -> Result<gannet_sdk::jobs::JobPoll, gannet_sdk::jobs::JobError> {
        Err(gannet_sdk::jobs::JobError::Unknown(key.clone()))
    }

    async fn cancel(&self, key: &JobKey) -> Result<(), gannet_sdk::jobs::JobError> {
        self.0.lock().unwrap().push(key.as_str().to_owned());
        Ok(())
    }

    async fn output(
        &self,
        key: &JobKey,
        _name: &str,
    ) -> Result<Option<Vec<u8>>, gannet_sdk::jobs::JobError> {
        Err(gannet_sdk::jobs::JobError::Unknown(key.clone()))
    }

    fn poll_interval(&self, _running_for: GoDuration) -> GoDuration {
        GoDuration::from_secs(1)
    }
}

struct Lab {
    controller: Controller,
    store: SqliteRuntime,
    clock: Arc<TestClock>,
    platform: Arc<Platform>,
    checks: Arc<Recorded>,
    jobs: Arc<Cancels>,
    repo: tempfile::TempDir,
    _cache: tempfile::TempDir,
}

impl Lab {
    /// Two apps on `main` (`apps/web`, `apps/api`), the web one previewed through a target
    /// with preview credentials; the repository is `acme/shop` on GitHub.
    fn new(live: Live, forks: ForkPreviews) -> Self {
        Self::with(live, |p| p.forks = forks)
    }

    fn with(live: Live, edit: impl FnOnce(&mut crate::PreviewSettings)) -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        let Rig {
            controller,
            store,
            clock,
            platform,
            cache,
            ..
        } = rig_with(repo.path(), Millis(1_000_000), live, |s| {
            s.webhook_secret = Some(Secret::new(SECRET.into()));
            s.repos[0].github = Some("acme/shop".into());
            edit(&mut s.repos[0].plan_preview);
        });
        let checks = Arc::new(Recorded::default());
        let previews = Previews::new(
            Plugins::new(vec![Faces::platform(platform.clone())]),
            [("scripted", &["t"][..], &["t"][..])],
        );
        let jobs = Arc::new(Cancels::default());
        let controller = controller
            .with_jobs(jobs.clone())
            .with_previews(previews)
            .with_check_runs(checks.clone())
            .with_console_url("http://127.0.0.1:8080/");
        let lab = Self {
            controller,
            store,
            clock,
            platform,
            checks,
            jobs,
            repo,
            _cache: cache,
        };
        lab.write("apps/web", "web", "memory: 128");
        lab.write("apps/api", "api", "memory: 128");
        git(lab.repo.path(), &["add", "-A"]);
        git(lab.repo.path(), &["commit", "-q", "-m", "base"]);
        lab
    }

    fn write(&self, dir: &str, name: &str, manifest: &str) {
        let dir = self.repo.path().join(dir);
        std::fs::create_dir_all(&dir).expect("app dir");
        std::fs::write(
            dir.join("app.pipecd.yaml"),
            LAMBDA_APP.replace("NAME", name),
        )
        .expect("config");
        std::fs::write(dir.join("function.yaml"), manifest).expect("manifest");
    }

    fn head(&self) -> String {
        let out = std::process::Command::new("git")
            .args(["-C"])
            .arg(self.repo.path())
            .args(["rev-parse", "HEAD"])
            .output()
            .expect("git");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Commits `manifest` as the web app's on pull request `pr`'s branch (made from `main`
    /// the first time), points `refs/pull/<pr>/head` at it, and returns its sha. `main`
    /// stays checked out.
    fn push_pr(&self, pr: u64, manifest: &str) -> String {
        let branch = format!("pr-{pr}");
        let dir = self.repo.path();
        let exists = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "--verify", "-q", &branch])
            .output()
            .expect("git")
            .status
            .success();
        if exists {
            git(dir, &["checkout", "-q", &branch]);
        } else {
            git(dir, &["checkout", "-q", "-b", &branch]);
        }
        self.write("apps/web", "web", manifest);
        git(dir, &["add", "-A"]);
        git(
            dir,
            &["commit", "-q", "-m", &format!("pr {pr}: {manifest}")],
        );
        let sha = self.head();
        git(dir, &["update-ref", &format!("refs/pull/{pr}/head"), &sha]);
        git(dir, &["checkout", "-q", "main"]);
        sha
    }

    /// A signed `pull_request` delivery.
    async fn deliver(&self, delivery: &str, body: serde_json::Value) -> WebhookResponse {
        let body = serde_json::to_vec(&body).unwrap();
        self.controller
            .webhook(WebhookRequest {
                event: Some("pull_request".into()),
                delivery: Some(delivery.into()),
                signature: Some(sign(SECRET.as_bytes(), &body)),
                body,
            })
            .await
            .expect("webhook")
    }

    /// Handles the drift queue's messages that are due until none is, at most `rounds`
    /// receives; returns how many it handled.
    async fn drain(&self, rounds: usize) -> usize {
        let mut handled = 0;
        for _ in 0..rounds {
            let got = self
                .store
                .receive(QueueName::Drift, 10, GoDuration::from_secs(60))
                .await
                .expect("receive");
            if got.is_empty() {
                return handled;
            }
            for message in got {
                handled += 1;
                self.settle(&message).await;
            }
        }
        handled
    }

    async fn settle(&self, message: &Received) {
        match self.controller.handle(message).await {
            Disposition::Ack => self.store.ack(&message.receipt).await.expect("ack"),
            other => panic!("{other:?} for {}", message.body),
        }
    }

    fn advance(&self, ms: u64) {
        self.clock.0.fetch_add(ms, Ordering::SeqCst);
    }

    async fn preview(&self, id: &str) -> Preview {
        self.controller.get_preview(id).await.expect("preview")
    }
}

fn pull_request(
    action: &str,
    number: u64,
    head: &str,
    head_repo: Option<&str>,
    author: &str,
) -> serde_json::Value {
    json!({
        "action": action,
        "number": number,
        "pull_request": {
            "head": {"sha": head, "ref": "change", "repo": head_repo.map(|r| json!({"full_name": r}))},
            "base": {"ref": "main", "sha": "0000000000000000000000000000000000000000", "repo": {"full_name": "acme/shop"}},
            "user": {"login": author},
            "author_association": "CONTRIBUTOR",
            "draft": false
        },
        "repository": {"full_name": "acme/shop", "clone_url": "https://github.com/acme/shop.git", "html_url": "https://github.com/acme/shop"}
    })
}

fn id_of(answer: &WebhookResponse) -> String {
    answer.body["preview"]
        .as_str()
        .expect("a preview id")
        .to_owned()
}

#[tokio::test]
async fn a_pull_request_is_previewed_at_its_head_in_one_check_run() {
    let lab = Lab::new(Live::Drifted("spec.memory"), ForkPreviews::default());
    let head = lab.push_pr(1, "memory: 512");
    let answer = lab
        .deliver(
            "d-1",
            pull_request("opened", 1, &head, Some("acme/shop"), "dev"),
        )
        .await;
    assert_eq!(answer.status, 202, "{:?}", answer.body);
    let id = id_of(&answer);

    // The same delivery again, and another delivery for the same head: nothing new.
    let again = lab
        .deliver(
            "d-1",
            pull_request("opened", 1, &head, Some("acme/shop"), "dev"),
        )
        .await;
    assert_eq!(
        (again.status, again.body["status"].as_str()),
        (200, Some("duplicate"))
    );
    let reopened = lab
        .deliver(
            "d-2",
            pull_request("reopened", 1, &head, Some("acme/shop"), "dev"),
        )
        .await;
    assert_eq!(
        (reopened.status, reopened.body["preview"].as_str()),
        (200, Some(id.as_str()))
    );

    lab.drain(5).await;
    let preview = lab.preview(&id).await;
    assert_eq!(preview.status, PreviewStatus::Done, "{preview:?}");
    assert_eq!(preview.result, PreviewResult::Changes);
    assert!(preview.merge_base.is_some() && preview.base.is_some());
    // Only the app the pull request touches, read once with the preview plugins.
    assert_eq!(preview.apps.len(), 1, "{:?}", preview.apps);
    let web = &preview.apps[0];
    assert_eq!(
        (web.name.as_str(), web.result),
        ("web", PreviewResult::Changes)
    );
    assert!(web.credentials);
    assert_eq!(web.summary, "1 change: spec.memory");
    assert!(
        web.details.contains("@@ spec.memory @@\n-1024\n+128"),
        "{}",
        web.details
    );
    assert!(web.why.contains("apps/web"), "{}", web.why);
    // The planner's word on the pipeline (the scripted plugin has no quick sync stages).
    assert!(
        web.pipeline
            .contains("the scripted plugin has no quick sync stages"),
        "{}",
        web.pipeline
    );
    assert_eq!(lab.platform.reads.load(Ordering::SeqCst), 1);

    let runs = lab.checks.runs();
    assert_eq!(runs.len(), 1, "one check run for the head");
    let (run_id, run) = &runs[0];
    assert_eq!(preview.check_run, Some(*run_id));
    assert_eq!(run.name, CHECK_NAME);
    assert_eq!(run.head_sha.as_str(), head);
    assert_eq!(
        (run.status, run.conclusion),
        (CheckStatus::Completed, Some(CheckConclusion::Success))
    );
    assert_eq!(run.title, "1 app: 1 with changes, 0 unchanged");
    assert!(
        run.summary
            .contains("| web | LambdaApp | CHANGES | 1 change: spec.memory |"),
        "{}",
        run.summary
    );
    assert!(run.text.contains("### web (LambdaApp)"), "{}", run.text);
    assert_eq!(
        run.details_url.as_deref(),
        Some(format!("http://127.0.0.1:8080/previews/{id}").as_str())
    );

    // A duplicate of the message finds the preview done and changes nothing.
    let message = Message::Preview {
        preview: PreviewId::parse(&id).unwrap(),
    }
    .outgoing();
    lab.store.send(vec![message]).await.expect("send");
    lab.drain(2).await;
    assert_eq!(
        lab.checks.requests.lock().unwrap().len(),
        2,
        "created, then completed once"
    );
    assert_eq!(lab.preview(&id).await, preview);
}

#[tokio::test]
async fn a_newer_head_supersedes_the_older_preview_and_a_burst_waits_its_interval() {
    let lab = Lab::with(Live::Pending, |p| {
        p.min_interval = GoDuration::from_secs(60)
    });
    let first = lab.push_pr(2, "memory: 256");
    let a = id_of(
        &lab.deliver(
            "d-a",
            pull_request("opened", 2, &first, Some("acme/shop"), "dev"),
        )
        .await,
    );
    lab.drain(1).await;
    // The read is a job still running: the preview waits, its check run in progress.
    let running = lab.preview(&a).await;
    assert_eq!(running.status, PreviewStatus::Running);
    assert_eq!(lab.checks.runs()[0].1.status, CheckStatus::InProgress);

    let second = lab.push_pr(2, "memory: 512");
    lab.advance(100);
    let b = id_of(
        &lab.deliver(
            "d-b",
            pull_request("synchronize", 2, &second, Some("acme/shop"), "dev"),
        )
        .await,
    );
    // The older preview's next look finds the newer head; the newer one waits out the
    // interval since the older one started.
    lab.advance(5_000);
    lab.drain(3).await;
    let superseded = lab.preview(&a).await;
    assert_eq!(superseded.status, PreviewStatus::Superseded);
    assert!(
        superseded
            .reason
            .contains(&format!("superseded by head {}", &second[..7])),
        "{}",
        superseded.reason
    );
    let runs = lab.checks.runs();
    assert_eq!(
        (runs[0].1.status, runs[0].1.conclusion),
        (CheckStatus::Completed, Some(CheckConclusion::Cancelled))
    );
    // The superseded read's job is stopped, and the record no longer names it.
    let key = JobKey::of(&[("preview-read", 12)]);
    assert_eq!(*lab.jobs.0.lock().unwrap(), [key.as_str().to_owned()]);
    assert_eq!(superseded.apps[0].job, None);
    assert_eq!(
        lab.preview(&b).await.status,
        PreviewStatus::Queued,
        "within minInterval"
    );

    *lab.platform.live.lock().unwrap() = Live::InSync;
    lab.advance(60_000);
    lab.drain(5).await;
    let done = lab.preview(&b).await;
    assert_eq!(
        (done.status, done.result),
        (PreviewStatus::Done, PreviewResult::NoChanges),
        "{done:?}"
    );
    let runs = lab.checks.runs();
    assert_eq!(runs.len(), 2, "one run per head");
    assert_eq!(runs[1].1.head_sha.as_str(), second);
    assert_eq!(runs[1].1.conclusion, Some(CheckConclusion::Neutral));
}

#[tokio::test]
async fn a_fork_is_previewed_without_credentials_unless_its_author_is_listed() {
    let listed = ForkPreviews {
        credentials: true,
        authors: vec!["Trusted".into()],
    };
    let lab = Lab::new(Live::Drifted("spec.memory"), listed);
    let head = lab.push_pr(3, "memory: 2048");
    let fork = id_of(
        &lab.deliver(
            "d-f",
            pull_request("opened", 3, &head, Some("stranger/shop"), "stranger"),
        )
        .await,
    );
    lab.drain(3).await;
    let preview = lab.preview(&fork).await;
    assert!(preview.fork && !preview.credentials, "{preview:?}");
    assert_eq!(
        lab.platform.reads.load(Ordering::SeqCst),
        0,
        "nothing read with credentials"
    );
    let web = &preview.apps[0];
    assert_eq!(
        (web.result, web.credentials),
        (PreviewResult::Changes, false)
    );
    assert!(
        web.details
            .contains("its author stranger is not in planPreview.forks.authors"),
        "{}",
        web.details
    );
    assert!(
        web.details
            .contains("+++ b/apps/web/function.yaml\n@@ -1 +1 @@\n-memory: 128"),
        "{}",
        web.details
    );
    assert!(web.details.contains("+memory: 2048"), "{}", web.details);
    assert!(lab.checks.runs()[0].1.summary.contains("comes from a fork"));

    // A deleted fork (no head repository) counts as a fork; a listed author gets credentials.
    let second = lab.push_pr(4, "memory: 4096");
    let trusted = id_of(
        &lab.deliver("d-t", pull_request("opened", 4, &second, None, "trusted"))
            .await,
    );
    lab.drain(3).await;
    let preview = lab.preview(&trusted).await;
    assert!(preview.fork && preview.credentials, "{preview:?}");
    assert_eq!(lab.platform.reads.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_broken_config_fails_the_check_naming_file_and_line() {
    let lab = Lab::new(Live::InSync, ForkPreviews::default());
    let head = lab.push_pr(5, "bad: 1");
    let id = id_of(
        &lab.deliver(
            "d-x",
            pull_request("opened", 5, &head, Some("acme/shop"), "dev"),
        )
        .await,
    );
    lab.drain(3).await;
    let preview = lab.preview(&id).await;
    assert_eq!(
        (preview.status, preview.result),
        (PreviewStatus::Done, PreviewResult::Error)
    );
    let web = &preview.apps[0];
    assert_eq!(web.result, PreviewResult::Error);
    assert!(
        web.summary.contains("apps/web/app.pipecd.yaml") && web.summary.contains("spec.memory"),
        "{}",
        web.summary
    );
    assert_eq!(
        lab.checks.runs()[0].1.conclusion,
        Some(CheckConclusion::Failure)
    );
}

#[tokio::test]
async fn deliveries_that_ask_for_no_preview_are_ignored_and_write_nothing() {
    let lab = Lab::new(Live::InSync, ForkPreviews::default());
    let head = lab.push_pr(6, "memory: 64");
    let closed = lab
        .deliver(
            "d-c",
            pull_request("closed", 6, &head, Some("acme/shop"), "dev"),
        )
        .await;
    assert_eq!(
        (closed.status, closed.body["status"].as_str()),
        (202, Some("ignored"))
    );
    let mut other_branch = pull_request("opened", 6, &head, Some("acme/shop"), "dev");
    other_branch["pull_request"]["base"]["ref"] = json!("release");
    let ignored = lab.deliver("d-o", other_branch).await;
    assert_eq!(ignored.status, 202);
    assert!(ignored.body["reason"]
        .as_str()
        .unwrap()
        .contains("is to branch release"));
    let mut unknown = pull_request("opened", 6, &head, Some("acme/shop"), "dev");
    unknown["repository"]["full_name"] = json!("acme/other");
    assert_eq!(lab.deliver("d-u", unknown).await.body["status"], "ignored");
    let bad = WebhookRequest {
        event: Some("pull_request".into()),
        delivery: Some("d-s".into()),
        signature: Some("sha256=00".into()),
        body: serde_json::to_vec(&pull_request("opened", 6, &head, Some("acme/shop"), "dev"))
            .unwrap(),
    };
    assert_eq!(lab.controller.webhook(bad).await.unwrap().status, 401);
    assert!(lab
        .controller
        .list_previews(None, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(lab.drain(2).await, 0);
}

#[tokio::test]
async fn a_pull_request_past_its_day_is_told_so_and_reads_nothing() {
    let lab = Lab::with(Live::InSync, |p| {
        p.max_per_day = 1;
        p.min_interval = GoDuration::from_secs(1);
    });
    let first = lab.push_pr(7, "memory: 256");
    lab.deliver(
        "d-1",
        pull_request("opened", 7, &first, Some("acme/shop"), "dev"),
    )
    .await;
    lab.drain(3).await;
    lab.advance(5_000);
    let second = lab.push_pr(7, "memory: 512");
    let id = id_of(
        &lab.deliver(
            "d-2",
            pull_request("synchronize", 7, &second, Some("acme/shop"), "dev"),
        )
        .await,
    );
    lab.drain(3).await;
    let capped = lab.preview(&id).await;
    assert_eq!(capped.status, PreviewStatus::Done);
    assert!(
        capped.started_at.is_none() && capped.apps.is_empty(),
        "{capped:?}"
    );
    assert!(
        capped.reason.contains("planPreview.maxPerDay: 1"),
        "{}",
        capped.reason
    );
    assert_eq!(
        lab.platform.reads.load(Ordering::SeqCst),
        1,
        "only the first head read"
    );
    let run = &lab.checks.runs()[1].1;
    assert_eq!(run.head_sha.as_str(), second);
    assert_eq!(run.conclusion, Some(CheckConclusion::Neutral));
    assert!(
        run.title
            .starts_with("Not previewed: pull request #7 had 1 previews in the last day"),
        "{}",
        run.title
    );
}
