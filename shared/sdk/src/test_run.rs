//! A driver for platform plugins' tests (feature `test-util`): commits as directories, unique
//! names, and a run of a deployment through the core's planner and state machine one plugin
//! step at a time, optionally running every step twice in a row and checking the second changed
//! nothing on the platform.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::fixture::RecordingIo as Recorder;
use crate::planner::{self, PlanInput};
use crate::plugin::{
    Faces, LiveContext, Plugins, StageResult, StepContext, StepError, StepOutcome,
};
use gannet_config::parse_app_config;
use gannet_domain::deployment::{
    CancelMode, CancelRequest, Deployment, SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::duration::Millis;
use gannet_domain::machine::{self, Action};
use gannet_domain::{AppId, CommitSha, DeploymentId};

/// The app every run deploys.
pub const APP: &str = "demo:app/app.pipecd.yaml";

/// A name no other test (or an earlier run against the same server) uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id() % 100_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// One commit of the app's repository: `app/app.pipecd.yaml` and the app's other files, in a
/// directory of their own.
pub struct Commit {
    pub sha: CommitSha,
    dir: tempfile::TempDir,
}

impl Commit {
    /// A commit whose sha is `sha_digit` 40 times, holding `files` (paths under `app/`).
    pub fn with_files(sha_digit: char, app_yaml: &str, files: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let app = dir.path().join("app");
        std::fs::create_dir_all(&app).expect("app dir");
        std::fs::write(app.join("app.pipecd.yaml"), app_yaml).expect("write app config");
        for (name, bytes) in files {
            std::fs::write(app.join(name), bytes).expect("write an app file");
        }
        Self {
            sha: CommitSha::parse(&sha_digit.to_string().repeat(40)).expect("sha"),
            dir,
        }
    }

    pub fn app_dir(&self) -> PathBuf {
        self.dir.path().join("app")
    }
}

/// The directories of the deployment's commit and of the running commit.
pub struct Commits<'a> {
    pub target: &'a Commit,
    pub running: Option<&'a Commit>,
}

/// How each step is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Once,
    /// Every step runs again at once (a duplicate message), and must leave the same state.
    Twice,
}

/// What a plugin's tests deploy through: the plugins that run the stages, and the platform's
/// state a repeated step must leave as it was.
pub trait Platform {
    /// The deployment's `kind` (`ECSApp`, `KubernetesApp`).
    const KIND: &'static str;
    type State: PartialEq + Debug;

    fn plugins(this: &Arc<Self>) -> Vec<Faces>;

    /// A deployment id of its own for each run (when the platform's resources are named
    /// after it), or the fixture's.
    fn deployment_id(&self, _commit: &CommitSha) -> Option<DeploymentId> {
        None
    }

    fn state(&self, deployment: &Deployment) -> impl Future<Output = Self::State>;

    /// Runs after every step: a platform whose controllers act on their own (the fake
    /// Kubernetes API server's Deployment controller) gives them a moment here.
    fn after_step(&self) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

/// What a live-state check gets, for `app` (at `dir`, the branch head `head`).
pub fn live_context<'a>(
    app_id: &'a AppId,
    app: &'a gannet_config::AppConfig,
    dir: &'a Path,
    head: &'a CommitSha,
) -> LiveContext<'a> {
    LiveContext {
        app_id,
        app,
        app_dir: dir,
        head,
        last_deployed: None,
        now: Millis(1),
        jobs: &crate::jobs::NoJobs,
        preview: false,
    }
}

/// A deployment being driven, with the stage logs so far.
pub struct Run<P> {
    pub deployment: Deployment,
    pub logs: BTreeMap<String, Vec<String>>,
    plugins: Plugins,
    platform: Arc<P>,
    now: u64,
    /// Where steps run jobs ([`Run::with_jobs`]); none by default.
    jobs: Arc<dyn crate::jobs::JobRunner>,
}

impl<P: Platform> Run<P> {
    /// Plans `commit` (with `running` live) through the core planner and the platform's plugins.
    pub fn plan(platform: P, commit: &Commit, running: Option<&Commit>) -> Self {
        Self::try_plan(platform, commit, running).expect("the deployment plans")
    }

    /// [`Run::plan`], or why the planner refused it.
    pub fn try_plan(
        platform: P,
        commit: &Commit,
        running: Option<&Commit>,
    ) -> Result<Self, planner::PlanError> {
        let text =
            std::fs::read_to_string(commit.app_dir().join("app.pipecd.yaml")).expect("read config");
        let app = parse_app_config("app/app.pipecd.yaml", &text).expect("valid app config");
        let trigger = Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        };
        let platform = Arc::new(platform);
        let plugins = Plugins::new(P::plugins(&platform));
        let running_sha = running.map(|c| c.sha.clone());
        let app_dir = commit.app_dir();
        let running_app_dir = running.map(Commit::app_dir);
        let read = |rel: &str| std::fs::read_to_string(app_dir.join(rel)).ok();
        let plan = planner::plan(&PlanInput {
            app: &app,
            trigger: &trigger,
            commit_message: "change",
            changed_files: &[],
            running_commit: running_sha.as_ref(),
            plugins: &plugins,
            read: &read,
            lifecycle: None,
            app_dir: Some(&app_dir),
            running_app_dir: running_app_dir.as_deref(),
            config_path: Some("app.pipecd.yaml"),
        })?;
        let mut deployment = Deployment::test().with_stages(plan.stages);
        deployment.app = AppId::parse(APP).expect("app id");
        deployment.kind = P::KIND.into();
        deployment.commit.sha = commit.sha.clone();
        if let Some(id) = platform.deployment_id(&commit.sha) {
            deployment.id = id;
        }
        deployment.running_commit = running_sha;
        deployment.strategy = Some(plan.strategy);
        Ok(Self {
            deployment,
            logs: BTreeMap::new(),
            plugins,
            platform,
            now: 10_000,
            jobs: Arc::new(crate::jobs::NoJobs),
        })
    }

    /// The planned stage names, hidden ones included.
    pub fn stage_names(&self) -> Vec<&str> {
        self.deployment
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Runs until the stage now running (or next to run) has finished, or the deployment has;
    /// returns that stage's index. With [`Delivery::Twice`] every step runs again at once and
    /// must leave the platform's state as the first run left it.
    pub async fn run_stage(&mut self, commits: &Commits<'_>, delivery: Delivery) -> Option<usize> {
        let mut current = None;
        for _ in 0..50 {
            self.now += 1000;
            match machine::next_action(&self.deployment, Millis(self.now)) {
                Action::Nothing => return current,
                Action::Transition(t) => {
                    self.deployment = t.deployment;
                    if current.is_some_and(|i| self.deployment.stages[i].status.is_finished()) {
                        return current;
                    }
                }
                Action::Run { index } => {
                    if current.is_some_and(|i| i != index) {
                        return current;
                    }
                    current = Some(index);
                    self.deployment =
                        machine::start_stage(&self.deployment, index, Millis(self.now));
                    let outcome = self.step(index, commits).await;
                    if delivery == Delivery::Twice {
                        let before = self.platform.state(&self.deployment).await;
                        let again = self.step(index, commits).await;
                        let after = self.platform.state(&self.deployment).await;
                        let id = &self.deployment.stages[index].id;
                        assert_eq!(
                            before, after,
                            "a repeated step of stage {id} changed the platform's state"
                        );
                        assert_eq!(
                            again, outcome,
                            "a repeated step of stage {id} answered differently"
                        );
                    }
                    self.platform.after_step().await;
                    let t =
                        machine::apply_outcome(&self.deployment, index, &outcome, Millis(self.now));
                    self.deployment = t.deployment;
                    if self.deployment.stages[index].status.is_finished() {
                        return current;
                    }
                }
            }
        }
        panic!(
            "stage did not finish within 50 steps: {:#?}",
            self.deployment.stages
        );
    }

    /// Runs every remaining stage.
    pub async fn run_all(&mut self, commits: &Commits<'_>, delivery: Delivery) {
        for _ in 0..20 {
            if self.deployment.status.is_terminal() {
                return;
            }
            self.run_stage(commits, delivery).await;
        }
        panic!("deployment did not finish: {:#?}", self.deployment);
    }

    /// Asks for a cancel, as the API would.
    pub fn cancel(&mut self, mode: CancelMode) {
        self.deployment.cancel = Some(CancelRequest {
            mode,
            by: "tester".into(),
            at: Millis(self.now),
        });
    }

    /// One step of planned stage `index` straight through its plugin, in `app_dir` (which may
    /// hold what the planner would refuse), with no running commit; the plugin's answer as it
    /// gave it, and nothing kept.
    pub async fn try_step(&self, index: usize, app_dir: &Path) -> Result<StepOutcome, StepError> {
        let stage = &self.deployment.stages[index];
        let Some(plugin) = self.plugins.for_stage(&stage.name) else {
            panic!("no plugin runs {}", stage.name);
        };
        plugin
            .steps()?
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage,
                app_dir,
                running_app_dir: None,
                now: Millis(self.now),
                io: &Recorder::default(),
                jobs: &*self.jobs,
            })
            .await
    }

    /// The same run, its steps running jobs on `jobs`.
    #[must_use]
    pub fn with_jobs(mut self, jobs: Arc<dyn crate::jobs::JobRunner>) -> Self {
        self.jobs = jobs;
        self
    }

    /// One step of stage `index`; its saved metadata is merged into the deployment.
    async fn step(&mut self, index: usize, commits: &Commits<'_>) -> StepOutcome {
        let io = Recorder::default();
        let stage = self.deployment.stages[index].clone();
        let app_dir = commits.target.app_dir();
        let running_dir = commits.running.map(Commit::app_dir);
        let Some(plugin) = self.plugins.for_stage(&stage.name) else {
            panic!("no plugin runs {}", stage.name);
        };
        let steps = plugin.steps().expect("the test builds whole plugins");
        let result = steps
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage: &stage,
                app_dir: &app_dir,
                running_app_dir: running_dir.as_deref(),
                now: Millis(self.now),
                io: &io,
                jobs: &*self.jobs,
            })
            .await;
        self.deployment.stages[index].metadata.extend(io.saved());
        let lines = io.logs();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e @ StepError::Permanent(_)) => {
                StepOutcome::Done(StageResult::Failure { reason: e.reason() })
            }
            Err(err @ StepError::Transient { .. }) => {
                panic!(
                    "stage {} hit a transient error: {err:?} (logs: {lines:?})",
                    stage.id
                )
            }
        };
        self.logs
            .entry(stage.id.to_string())
            .or_default()
            .extend(lines);
        outcome
    }

    /// Stage `id`'s log lines so far, one a line.
    pub fn stage_log(&self, id: &str) -> String {
        self.logs.get(id).map(|l| l.join("\n")).unwrap_or_default()
    }
}
