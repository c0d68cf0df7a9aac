//! The plugin faces: what a stage plugin tells the planner, and how it runs one step.
//!
//! A step must be idempotent: the same step may run twice (a redelivered message, a crash
//! before the outcome was saved). A plugin records what it created in stage metadata through
//! [`StepIo::save_metadata`] before it depends on it, and checks that metadata first.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use crate::jobs::JobRunner;
use gannet_config::AppConfig;
use gannet_domain::deployment::{Deployment, Stage, SyncStrategy, Trigger};
use gannet_domain::drift::LiveState;
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ids::{AppId, CommitSha};
use gannet_domain::ports::{BoxError, Metadata};

/// A stage's `with` did not validate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct StageConfigError {
    /// The offending field inside `with`, such as `duration`.
    pub field: String,
    pub message: String,
    /// Valid PipeCD that gannet does not support (`config check` says so, not "invalid").
    pub unsupported: bool,
}

impl StageConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            unsupported: false,
        }
    }

    /// A field PipeCD accepts that gannet does not support.
    pub fn unsupported(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            unsupported: true,
            ..Self::new(field, message)
        }
    }
}

/// A file the app config refers to (such as a function manifest) is missing or invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AppFileError {
    /// The app config's field that names the file, such as `spec.input.functionManifestFile`.
    pub named_by: String,
    /// The file, relative to the app's directory; empty when the error is in the app config
    /// itself (then `named_by` is the field at fault).
    pub file: String,
    /// 1-based, in `file`, when known.
    pub line: Option<usize>,
    /// The field at fault inside `file`, such as `spec.timeout`; empty when the file is missing
    /// or does not parse.
    pub field: String,
    pub message: String,
    /// Valid PipeCD that gannet does not support (such as a Lambda function built from git).
    pub unsupported: bool,
}

impl AppFileError {
    /// An error in the app config's own field `field` (no other file).
    pub fn in_config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            named_by: field.into(),
            file: String::new(),
            line: None,
            field: String::new(),
            message: message.into(),
            unsupported: false,
        }
    }

    /// Valid PipeCD in the app config's field `field` that gannet does not support.
    pub fn unsupported_in_config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            unsupported: true,
            ..Self::in_config(field, message)
        }
    }
}

/// A platform field that does not read ([`AppConfig::platform_spec`]).
impl From<gannet_config::typed::FieldError> for AppFileError {
    fn from(e: gannet_config::typed::FieldError) -> Self {
        Self::in_config(e.path, e.message)
    }
}

impl std::fmt::Display for AppFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // An error in the app config itself names no other file.
        if !self.file.is_empty() {
            f.write_str(&self.file)?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// What the planner knows when it asks a plugin.
#[derive(Clone, Copy, Debug)]
pub struct PlanContext<'a> {
    pub app: &'a AppConfig,
    pub trigger: &'a Trigger,
    pub running_commit: Option<&'a CommitSha>,
    /// The app's directory in a checkout of the commit being planned, when the caller has
    /// one (the plan handler, `config check` of a local repository); read it through
    /// [`crate::tree`].
    pub app_dir: Option<&'a Path>,
    /// The app's directory at the running commit, when there is one and it was checked out.
    pub running_app_dir: Option<&'a Path>,
    /// The app config's path relative to the repository's root (`apps/web/app.pipecd.yaml`),
    /// when known: the app's directory in the repository, and the config's file name.
    pub config_path: Option<&'a str>,
}

impl PlanContext<'_> {
    /// The app config's file name in the app's directory (`app.pipecd.yaml`).
    pub fn config_file(&self) -> Option<&str> {
        self.config_path.map(|p| p.rsplit('/').next().unwrap_or(p))
    }

    /// The app's directory relative to the repository's root (`apps/web`; `""` at the root).
    pub fn app_path(&self) -> Option<&str> {
        self.config_path
            .map(|p| p.rsplit_once('/').map_or("", |(dir, _)| dir))
    }
}

pub use gannet_domain::machine::{StageResult, StepOutcome};

/// Why a step could not finish. Either way the cause is kept: a stage's failure reason and
/// the log show the whole chain ([`gannet_domain::report::error_chain`]).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Worth another try later (throttling, 5xx, timeouts). The stage stays RUNNING.
    #[error("{operation} failed, will retry")]
    Transient {
        operation: String,
        #[source]
        source: BoxError,
        /// When the platform said to come back (a `Retry-After`, a throttling hint); `None`
        /// leaves it to the controller's backoff.
        retry_after: Option<GoDuration>,
    },
    /// Retrying will not help (validation, permissions). The stage fails with this error and
    /// its causes.
    #[error(transparent)]
    Permanent(BoxError),
}

impl StepError {
    /// A permanent failure: a message, or an error whose causes are kept.
    pub fn permanent(cause: impl Into<BoxError>) -> Self {
        Self::Permanent(cause.into())
    }

    /// A failure worth another try, with the controller's backoff.
    pub fn transient(operation: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Transient {
            operation: operation.into(),
            source: source.into(),
            retry_after: None,
        }
    }

    /// The same transient failure, to be retried after `after` rather than the backoff.
    /// A permanent failure is unchanged.
    #[must_use]
    pub fn retry_after(self, after: GoDuration) -> Self {
        match self {
            Self::Transient {
                operation, source, ..
            } => Self::Transient {
                operation,
                source,
                retry_after: Some(after),
            },
            permanent => permanent,
        }
    }

    /// The error and its causes on one line: a failed stage's reason.
    pub fn reason(&self) -> String {
        gannet_domain::report::error_chain(self)
    }
}

/// The side effects a step may have on gannet's own state.
#[async_trait]
pub trait StepIo: Send + Sync {
    /// Appends to the stage's log (best effort: a failed log write does not fail the step).
    async fn log(&self, line: &str);
    /// Merges entries into the stage's metadata and persists them now, before the step goes on.
    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError>;
    /// The app's latest successful deployment before this one, if it has one (ANALYSIS's
    /// PREVIOUS strategy compares with it).
    async fn previous_success(&self) -> Result<Option<Deployment>, StepError>;
}

/// Everything one step gets.
pub struct StepContext<'a> {
    pub deployment: &'a Deployment,
    pub stage: &'a Stage,
    /// The app's directory in a checkout of the deployment's commit.
    pub app_dir: &'a Path,
    /// The app's directory at the running commit, for rollback; `None` on a first deployment.
    pub running_app_dir: Option<&'a Path>,
    pub now: Millis,
    pub io: &'a dyn StepIo,
    /// Where commands that outlive the step run ([`crate::jobs`]).
    pub jobs: &'a dyn JobRunner,
}

/// What [`Steps::stop`] gets: a running stage that ended without its plugin deciding it.
pub struct StopContext<'a> {
    pub deployment: &'a Deployment,
    /// The stage as it was when it was stopped (its metadata says what it started).
    pub stage: &'a Stage,
    /// For the stage log only: the stage has ended, so metadata cannot be saved any more.
    pub io: &'a dyn StepIo,
    pub jobs: &'a dyn JobRunner,
}

/// What a live-state check gets: the app's config and directory at the branch head.
pub struct LiveContext<'a> {
    /// The app; its directory is `app_id.dir()` in the repository.
    pub app_id: &'a AppId,
    pub app: &'a AppConfig,
    /// The app's directory in a checkout of the branch head (the desired state).
    pub app_dir: &'a Path,
    /// The branch head `app_dir` is at.
    pub head: &'a CommitSha,
    /// When the app's last deployment ended: live state read before then is stale.
    pub last_deployed: Option<Millis>,
    pub now: Millis,
    /// Where a check that is a command runs ([`Live::Pending`] while it does).
    pub jobs: &'a dyn JobRunner,
    /// The read is a plan preview's: `app_dir` is a pull request's head, and the plugin is
    /// built with the deploy target's preview credentials. Jobs it starts are keyed apart
    /// from drift checks' (they run with other credentials), and it reads even where drift
    /// detection is off.
    pub preview: bool,
}

/// What a live-state check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Live {
    /// This plugin does not read live state.
    NotRead,
    Read(LiveState),
    /// The check runs as a job and has not finished: the next drift sweep looks again, and
    /// until then the app's recorded status stands.
    Pending {
        what: String,
        /// The job the read waits for, when one job is it: a plan preview that is superseded
        /// before it ends cancels it.
        job: Option<crate::jobs::JobKey>,
    },
}

impl Live {
    /// The live state read, if it was.
    pub fn read(self) -> Option<LiveState> {
        match self {
            Self::Read(state) => Some(state),
            _ => None,
        }
    }
}

/// An approval refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApproveError {
    #[error("stage {stage} ({name}) does not wait for approval")]
    NotApprovable { stage: String, name: String },
    /// The message does not say who the approvers are: the caller may not be allowed to read
    /// the deployment.
    #[error("{user} is not an approver of stage {stage}")]
    NotAnApprover { user: String, stage: String },
    /// The stage's options cannot be read, so nobody can approve it.
    #[error("stage {stage} cannot be approved: its options are invalid ({reason})")]
    InvalidOptions { stage: String, reason: String },
    #[error("{user} has already approved stage {stage}")]
    AlreadyApproved { user: String, stage: String },
}

/// The planning face, which every build of a plugin has: what it is, which stages it runs,
/// and how it checks and plans them. Its other faces are separate traits ([`Presenter`],
/// [`Steps`], [`LiveStates`]); a build that only plans holds no step or live-state face at
/// all ([`Faces::planning`]), so nothing is forwarded and nothing can default by accident.
pub trait Plugin: Presenter + Send + Sync {
    fn name(&self) -> &'static str;

    /// The stage names this plugin runs, its rollback stages included.
    fn stage_names(&self) -> &'static [&'static str];

    /// True for the platform plugin that deploys this app (`LambdaApp` → lambda, ...).
    fn deploys(&self, _app: &AppConfig) -> bool {
        false
    }

    /// Validates a configured stage's `with` and returns it normalised (defaults filled in).
    fn validate_stage(
        &self,
        name: &str,
        with: &serde_json::Value,
    ) -> Result<serde_json::Value, StageConfigError>;

    /// Reads the app's platform fields as this plugin's spec ([`AppConfig::platform_spec`])
    /// and names the files they refer to, which `config check` reads (each must exist and
    /// parse) before [`Plugin::check_app`]. The error names the first field that is wrong;
    /// the trigger, `config check` and the planner all ask, so a bad field deploys nothing.
    fn app_files(&self, _app: &AppConfig) -> Result<Vec<crate::check::AppFile>, AppFileError> {
        Ok(Vec::new())
    }

    /// Checks the files the app config refers to (a platform plugin's manifests), as planning
    /// can: `read` gives a file's text by its path relative to the app's directory, `None` when
    /// it does not exist.
    fn check_app(
        &self,
        _ctx: &PlanContext<'_>,
        _read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        Ok(())
    }

    /// The default stage timeout for a stage of this plugin, when the config sets none.
    fn default_timeout(&self, _stage: &Stage) -> GoDuration {
        GoDuration::from_secs(6 * 3600)
    }

    /// The stages of a quick sync; empty when the plugin has none.
    fn quick_sync_stages(&self, _ctx: &PlanContext<'_>) -> Vec<Stage> {
        Vec::new()
    }

    /// Hidden stages that undo `planned` when the deployment rolls back.
    fn rollback_stages(&self, _ctx: &PlanContext<'_>, _planned: &[Stage]) -> Vec<Stage> {
        Vec::new()
    }

    /// The plugin's own strategy choice, with the reason: asked after the forced, no-pipeline,
    /// `alwaysUsePipeline` and commit-matcher rules and before the first-deployment rule
    /// (`ctx.running_commit` is `None` then), as PipeCD's platform planners do. `None` leaves
    /// it to the rules after: a first deployment quick-syncs, any other runs the pipeline.
    fn determine_strategy(&self, _ctx: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        None
    }

    /// True when this platform honours the app config field `field`, one that only some
    /// platforms support ([`AppConfig::platform_features`]), such as
    /// [`gannet_config::DRIFT_IGNORE_FIELDS`].
    fn honours(&self, _field: &str) -> bool {
        false
    }

    /// True when a stage named `stage` deploys the app itself, in place of its platform's
    /// stages (PipeCD's CUSTOM_SYNC): such an app always runs its pipeline, and its platform's
    /// manifests are neither read at planning nor compared with the live state.
    fn syncs_in_place_of_the_platform(&self, _stage: &str) -> bool {
        false
    }

    /// The name of the stage that runs the lifecycle phase `kind` ([`crate::lifecycle`]), when
    /// this plugin runs the phases.
    fn phase_stage(&self, _kind: crate::lifecycle::PhaseKind) -> Option<&'static str> {
        None
    }

    /// True when reading `app`'s live state runs code from the repository (Terraform's live
    /// read is a `terraform plan`: providers and `external` data sources run with the deploy
    /// target's credentials). The API then never reads it for a caller who may not deploy:
    /// such a caller's diff is the app's last drift check. A planning answer: the API asks it
    /// of a build that may not read live state at all.
    fn live_read_runs_code(&self, _app: &AppConfig) -> bool {
        false
    }
}

/// The presentation face: what a person sees of a plugin's stages and may do to them. Every
/// build has it (the API shows stages, the approve handler records approvals).
pub trait Presenter {
    /// True when stages named `stage` wait for approvals ([`Presenter::approve`]).
    fn approvable(&self, _stage: &str) -> bool {
        false
    }

    /// What a person should see of `stage` beyond its status, read from its metadata
    /// ([`crate::presentation`]). Must not fail: what does not read is left out.
    fn present(&self, _stage: &Stage) -> Vec<crate::presentation::Detail> {
        Vec::new()
    }

    /// `stage`'s key option as one short line for its row (`20%`, `5s`,
    /// `approvers: alice, bob`), read from its `with`; empty when it has none worth a column.
    fn summary(&self, _stage: &Stage) -> String {
        String::new()
    }

    /// Who has approved `stage` so far, in order ([`Presenter::approve`]).
    fn approved_by(&self, _stage: &Stage) -> Vec<String> {
        Vec::new()
    }

    /// Records `user`'s approval of `stage`; returns the metadata to merge.
    fn approve(&self, stage: &Stage, _user: &str, _now: Millis) -> Result<Metadata, ApproveError> {
        Err(ApproveError::NotApprovable {
            stage: stage.id.to_string(),
            name: stage.name.clone(),
        })
    }
}

/// The deployment face: runs the steps of the plugin's stages, and stops what a stage left
/// running. Only the builds that run stages hold it.
#[async_trait]
pub trait Steps: Send + Sync {
    /// Runs one step of `ctx.stage`.
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError>;

    /// A running stage of this plugin was ended from outside: the deployment was cancelled,
    /// the stage or the deployment timed out, or a step failed with an error. Stops what the
    /// stage left running (a job). Called before the stage's end is stored, and again if
    /// storing it is retried, so it must be safe to repeat.
    async fn stop(&self, _ctx: StopContext<'_>) -> Result<(), StepError> {
        Ok(())
    }
}

/// The live-state and drift face of a platform plugin: reads the app's live resources and
/// compares them with the desired state in `ctx.app_dir` (see [`gannet_domain::drift`]). The read and
/// the comparison are one face because the comparison needs what the read kept (a Terraform
/// plan, a server-side dry run). Must not change anything on the platform, and must be safe
/// to repeat. Only the builds that check drift and show diffs hold it.
#[async_trait]
pub trait LiveStates: Send + Sync {
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError>;
}

/// One compiled-in plugin as a build holds it: its planning and presentation faces always,
/// its step and live-state faces when this build runs them.
#[derive(Clone)]
pub struct Faces {
    planning: Arc<dyn Plugin>,
    steps: Option<Arc<dyn Steps>>,
    live: Option<Arc<dyn LiveStates>>,
}

impl Faces {
    /// A plugin that runs stages and reads no live state (wait, a script, an analysis).
    pub fn stages<P: Plugin + Steps + 'static>(plugin: Arc<P>) -> Self {
        Self {
            steps: Some(plugin.clone()),
            ..Self::planning(plugin)
        }
    }

    /// A platform plugin: it runs stages and reads its apps' live state.
    pub fn platform<P: Plugin + Steps + LiveStates + 'static>(plugin: Arc<P>) -> Self {
        Self {
            live: Some(plugin.clone()),
            ..Self::stages(plugin)
        }
    }

    /// The planning and presentation faces only: this build checks configs, plans and
    /// approves, and does not link the plugin's steps nor the SDKs they call.
    pub fn planning<P: Plugin + 'static>(plugin: Arc<P>) -> Self {
        Self {
            planning: plugin,
            steps: None,
            live: None,
        }
    }

    /// The step face, or why this build has none.
    pub fn steps(&self) -> Result<&dyn Steps, StepError> {
        self.steps
            .as_deref()
            .ok_or_else(|| self.refused("run or stop the stages of"))
    }

    /// The live-state face, or why this build has none. A plugin that reads no live state
    /// answers [`Live::NotRead`].
    pub fn live(&self) -> Result<&dyn LiveStates, StepError> {
        match (&self.live, &self.steps) {
            (Some(live), _) => Ok(live.as_ref()),
            (None, Some(_)) => Ok(&NoLiveState),
            (None, None) => Err(self.refused("read live state with")),
        }
    }

    fn refused(&self, what: &str) -> StepError {
        StepError::permanent(format!(
            "the {name} plugin is built here to plan only: this process cannot {what} {name}",
            name = self.planning.name()
        ))
    }
}

/// The live-state face of a plugin that has none.
struct NoLiveState;

#[async_trait]
impl LiveStates for NoLiveState {
    async fn live_state(&self, _ctx: LiveContext<'_>) -> Result<Live, StepError> {
        Ok(Live::NotRead)
    }
}

impl std::ops::Deref for Faces {
    type Target = dyn Plugin;

    fn deref(&self) -> &Self::Target {
        self.planning.as_ref()
    }
}

/// The compiled-in plugins.
#[derive(Clone, Default)]
pub struct Plugins {
    list: Vec<Faces>,
}

impl Plugins {
    pub fn new(list: Vec<Faces>) -> Self {
        Self { list }
    }

    /// The plugin that runs stages named `name`.
    pub fn for_stage(&self, name: &str) -> Option<&Faces> {
        self.list.iter().find(|p| p.stage_names().contains(&name))
    }

    /// The platform plugin that deploys `app`, if one is compiled in.
    pub fn platform_for(&self, app: &AppConfig) -> Option<&Faces> {
        self.list.iter().find(|p| p.deploys(app))
    }

    /// True when a stage of `app`'s pipeline deploys it in place of its platform's stages
    /// ([`Plugin::syncs_in_place_of_the_platform`]).
    pub fn synced_by_its_own_stage(&self, app: &AppConfig) -> bool {
        app.stages().iter().any(|s| {
            self.for_stage(&s.name)
                .is_some_and(|p| p.syncs_in_place_of_the_platform(&s.name))
        })
    }

    /// True when a stage named `name` waits for approvals.
    pub fn approvable(&self, name: &str) -> bool {
        self.for_stage(name).is_some_and(|p| p.approvable(name))
    }

    /// Every stage name the plugins run.
    pub fn stage_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.list
            .iter()
            .flat_map(|p| p.stage_names().iter().copied())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Faces> {
        self.list.iter()
    }
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|p| p.name()))
            .finish()
    }
}
