//! Builders for the items the suites store: apps, repositories, deployments, chains and plan
//! previews.

use std::collections::BTreeMap;

use gannet_domain::app::{App, RepoState};
use gannet_domain::chain::{Chain, ChainMatcher};
use gannet_domain::deployment::{
    Commit, Deployment, DeploymentStatus, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ids::{AppId, ChainId, CommitSha, DeploymentId, PreviewId, RepoId, StageId};
use gannet_domain::preview::{AppPreview, Preview, PreviewResult, PreviewStatus};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn demo_repo() -> RepoId {
    RepoId::parse("demo").expect("`demo` is a valid repository id")
}

/// The id of app `name` in the `demo` repository: `demo:{name}/app.pipecd.yaml`.
pub fn app_id(name: &str) -> AppId {
    AppId::new(&demo_repo(), &format!("{name}/app.pipecd.yaml"))
}

/// A new app `name` in the `demo` repository, version 0.
pub fn app_fixture(name: &str) -> App {
    let mut app = App::new(
        app_id(name),
        name.to_owned(),
        "ECSApp".to_owned(),
        Millis(1),
    );
    app.labels.insert("env".to_owned(), "dev".to_owned());
    app
}

/// The state of repository `id`, version 0.
pub fn repo_fixture(id: &str) -> RepoState {
    RepoState {
        repo: RepoId::parse(id).expect("fixture repository ids are valid"),
        scanned_head: None,
        updated_at: Millis(1),
        version: 0,
    }
}

/// A RUNNING chain `id` created at `at`, version 0, started by a deployment of app `web`,
/// with one block to come (apps named `lambda`).
pub fn chain_fixture(id: &str, at: u64) -> Chain {
    let first = deployment_fixture("d-first", "web")
        .status(DeploymentStatus::Success)
        .build();
    let matcher = ChainMatcher {
        name: "lambda".to_owned(),
        ..ChainMatcher::default()
    };
    let mut chain = Chain::start(&first, &[matcher], Millis(at));
    chain.id = ChainId::parse(id).expect("fixture chain ids are valid");
    chain.version = 0;
    chain
}

/// A QUEUED plan preview `id` of pull request `pr` (`None`: asked through the API) to
/// repository `repo`, created and updated at `at`, version 0, with one app (`web`) still
/// pending.
pub fn preview_fixture(id: &str, repo: &str, pr: Option<u64>, at: u64) -> Preview {
    let repo = RepoId::parse(repo).expect("fixture repository ids are valid");
    let head = CommitSha::parse(COMMIT).expect("fixture commit is valid");
    let web = AppPreview {
        app: AppId::new(&repo, "web/app.pipecd.yaml"),
        name: "web".to_owned(),
        kind: "KUBERNETES".to_owned(),
        result: PreviewResult::Pending,
        summary: String::new(),
        pipeline: "QUICK_SYNC".to_owned(),
        why: "web/ changed".to_owned(),
        details: "--- a/deployment.yaml\n+++ b/deployment.yaml\n-  replicas: 1\n+  replicas: 2\n"
            .to_owned(),
        credentials: true,
        job: Some("preview-web-0123456789ab".to_owned()),
    };
    Preview {
        id: PreviewId::parse(id).expect("fixture preview ids are valid"),
        repo,
        pr,
        head: head.clone(),
        base_ref: "main".to_owned(),
        base: Some(head.clone()),
        merge_base: Some(head),
        author: "octocat".to_owned(),
        fork: false,
        credentials: true,
        status: PreviewStatus::Queued,
        result: PreviewResult::Pending,
        reason: String::new(),
        check_run: None,
        apps: vec![web],
        created_at: Millis(at),
        started_at: None,
        updated_at: Millis(at),
        version: 0,
    }
}

/// A PENDING deployment `id` of app `app` (a name, as for [`app_id`]), seq 0, with one stage.
pub fn deployment_fixture(id: &str, app: &str) -> DeploymentFixture {
    let sha = CommitSha::parse(COMMIT).expect("fixture commit is valid");
    let mut stage = Stage::planned(
        StageId::parse("wait").expect("fixture stage id is valid"),
        "WAIT",
        0,
        serde_json::json!({ "duration": "10s" }),
    );
    stage.metadata.insert("started".to_owned(), "1".to_owned());
    DeploymentFixture(Deployment {
        id: DeploymentId::parse(id).expect("fixture deployment ids are valid"),
        app: app_id(app),
        app_name: app.to_owned(),
        kind: "ECSApp".to_owned(),
        labels: BTreeMap::from([("team".to_owned(), "core".to_owned())]),
        commit: Commit {
            sha,
            branch: "main".to_owned(),
            message: "change".to_owned(),
            author: "dev".to_owned(),
        },
        trigger: Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        },
        status: DeploymentStatus::Pending,
        status_reason: String::new(),
        strategy: None,
        summary: String::new(),
        stages: vec![stage],
        running_commit: None,
        timeout: GoDuration::from_secs(6 * 3600),
        seq: 0,
        created_at: Millis(1_000),
        updated_at: Millis(1_000),
        planned_at: None,
        completed_at: None,
        due_at: Millis(1_000),
        cancel: None,
        blocked_by: None,
        mentions: Vec::new(),
        rollback_of: None,
        chain: None,
        chain_next: Vec::new(),
    })
}

/// A deployment under construction; see [`deployment_fixture`].
#[derive(Clone, Debug)]
pub struct DeploymentFixture(Deployment);

impl DeploymentFixture {
    pub fn status(mut self, status: DeploymentStatus) -> Self {
        self.0.status = status;
        self
    }

    pub fn created_at(mut self, at: u64) -> Self {
        self.0.created_at = Millis(at);
        self
    }

    pub fn seq(mut self, seq: u64) -> Self {
        self.0.seq = seq;
        self
    }

    pub fn summary(mut self, summary: &str) -> Self {
        self.0.summary = summary.to_owned();
        self
    }

    /// Marks the first stage running since `at`.
    pub fn running_stage(mut self, at: u64) -> Self {
        if let Some(stage) = self.0.stages.first_mut() {
            stage.status = StageStatus::Running;
            stage.started_at = Some(Millis(at));
        }
        self.0.status = DeploymentStatus::Running;
        self
    }

    pub fn build(self) -> Deployment {
        self.0
    }
}
