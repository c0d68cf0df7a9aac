//! Terraform deployments. Every terraform command runs as a job ([`gannet_sdk::jobs`]): a step
//! starts it and returns `Continue`, later steps copy its output to the stage log until it
//! ends. No step waits on terraform.
//!
//! - **TERRAFORM_PLAN** `{exitOnNoChanges}`: `init`, then `plan -out`. The saved plan stays
//!   with the job (locally beside gannet's state, on AWS in the jobs bucket); the stage keeps
//!   what it changes (`plan` in its metadata: addresses, actions, attributes, sensitive values
//!   hidden) for the API and the CLI. With `exitOnNoChanges` and no changes the deployment
//!   ends SUCCESS there.
//! - **TERRAFORM_APPLY**: applies exactly the plan the TERRAFORM_PLAN stage before it saved,
//!   in a new job given that plan file; a stale plan fails with terraform's message.
//! - **TERRAFORM_SYNC** (quick sync): plan, and apply that plan when it has changes.
//! - **TERRAFORM_ROLLBACK** (hidden, with autoRollback): the same as a sync, of the running
//!   commit's configuration.
//!
//! A job is named by the deployment, the stage and the attempt, so a step delivered twice or
//! retried after a crash finds the job it started: an apply runs once per plan. A job lost
//! mid-apply fails the stage, saying the state lock may be held, instead of applying again.
//! Concurrent deployments of one app never overlap (gannet's app lock); terraform's own state
//! lock is the second guard.
//!
//! Drift: on the drift sweep, a `plan -detailed-exitcode -lock=false` at the branch head runs
//! as a job, once per `driftInterval` (10m by default) and branch head; later sweeps read its
//! result. Exit 0 is SYNCED, 2 OUT_OF_SYNC with each resource and attribute the plan would
//! change, 1 an error given as the reason.

mod cache;
mod plan;
mod script;
pub mod spec;
mod target;

use std::path::Path;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_config::{AppConfig, AppKind};
use gannet_domain::deployment::{Stage, StageStatus, SyncStrategy};
use gannet_domain::drift::LiveState;
use gannet_domain::ports::Metadata;
use gannet_domain::{AppId, GoDuration};
use gannet_sdk::check::{AppFile, FileFormat};
use gannet_sdk::jobs::{self, Follow, JobEnd, JobInput, JobKey, JobRunner, JobSpec, Progress};
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StageResult, StepContext, StepError, StepOutcome, Steps, StopContext,
};
use gannet_sdk::presentation::Detail;
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_options;
use gannet_sdk::targets::{self, Platform};
use gannet_sdk::tree::load_app_config;
use serde_json::{json, Value};

pub use plan::{Change, Plan};
pub use target::DeployTarget;

use crate::script::{Commands, APPLIED, ERROR, PLAN_EXIT, PLAN_FILE, PLAN_JSON};
use crate::spec::{TerraformInput, TerraformSpec};

pub const STAGE_PLAN: &str = "TERRAFORM_PLAN";
pub const STAGE_APPLY: &str = "TERRAFORM_APPLY";
pub const STAGE_SYNC: &str = "TERRAFORM_SYNC";
pub const STAGE_ROLLBACK: &str = "TERRAFORM_ROLLBACK";

/// The quick sync stage's id.
pub const QUICK_SYNC_STAGE_ID: &str = "terraform-sync";
/// The hidden rollback stage's id.
pub const ROLLBACK_STAGE_ID: &str = "terraform-rollback";

/// Stage metadata: what the plan changes ([`Plan::kept`]), and whether it changes anything.
pub const META_PLAN: &str = "plan";
pub const META_PLAN_SUMMARY: &str = "planSummary";
pub const META_HAS_CHANGES: &str = "planHasChanges";

const PLATFORM: Platform = Platform {
    title: "Terraform",
    key: "terraform",
    kind: "TerraformApp",
};

/// Runs the Terraform stages on the configured deploy targets.
#[derive(Debug, Default)]
pub struct TerraformPlugin {
    targets: Vec<DeployTarget>,
}

impl TerraformPlugin {
    pub fn new(targets: Vec<DeployTarget>) -> Self {
        Self { targets }
    }

    fn target_for(&self, app: &AppConfig) -> Result<&DeployTarget, StepError> {
        targets::pick(PLATFORM, &self.targets, app)
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "terraform";

/// The registry's entry: `plugins.terraform.deployTargets`.
pub const SPEC: PluginSpec =
    PluginSpec::platform::<TerraformPlugin>(NAME).preview_credentials(&["allowEnv", "jobRoleArn"]);

impl FromSettings for TerraformPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let runtime = settings.runtime;
        let targets = settings.deploy_targets(|at, t: &DeployTarget| t.check(at, runtime))?;
        Ok(TerraformPlugin::new(targets))
    }
}

/// TERRAFORM_PLAN's `with`.
#[derive(serde::Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlanOptions {
    #[serde(default)]
    exit_on_no_changes: bool,
}

/// Why PipeCD's `retries` is refused.
const RETRIES_UNSUPPORTED: &str = "retrying a failed apply is not supported: gannet applies a plan once, and a failed apply rolls back (autoRollback) or waits for a new commit";

/// TERRAFORM_APPLY's and TERRAFORM_SYNC's `with`: PipeCD's `retries`, which gannet does not
/// support (an apply runs once per plan).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApplyOptions {
    #[serde(default)]
    retries: u32,
}

/// The app's `spec.input` (of a `TerraformApp`, or `spec.plugins.terraform.input`).
fn input_of(app: &AppConfig) -> Result<TerraformInput, StepError> {
    if app.kind != AppKind::Application {
        let spec: TerraformSpec = app
            .platform_spec()
            .map_err(|e| StepError::permanent(e.to_string()))?;
        return Ok(spec.input);
    }
    match app.plugin_config("terraform").and_then(|c| c.get("input")) {
        None => Ok(TerraformInput::default()),
        Some(input) => serde_json::from_value(input.clone())
            .map_err(|e| StepError::permanent(format!("spec.plugins.terraform.input: {e}"))),
    }
}

/// What is wrong with `input`, as a config field and a message.
fn check_input(input: &TerraformInput) -> Result<(), (String, String)> {
    for (i, v) in input.vars.iter().enumerate() {
        target::check_assignment(v, "-var").map_err(|m| (format!("spec.input.vars[{i}]"), m))?;
    }
    for (i, f) in input.var_files.iter().enumerate() {
        let path = Path::new(f);
        let outside = path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if outside || f.is_empty() {
            return Err((
                format!("spec.input.varFiles[{i}]"),
                format!("{f:?}: a var file is a path inside the app's directory"),
            ));
        }
    }
    let envs = &input.command_envs;
    for (list, entries) in [
        ("shared", &envs.shared),
        ("init", &envs.init),
        ("plan", &envs.plan),
        ("apply", &envs.apply),
    ] {
        for (i, e) in entries.iter().enumerate() {
            let field = format!("spec.input.commandEnvs.{list}[{i}]");
            target::check_assignment(e, "variable").map_err(|m| (field.clone(), m))?;
            let name = e.split_once('=').map_or("", |(n, _)| n);
            if !jobs::valid_env_name(name) {
                return Err((field, format!("{name:?} is not a variable name")));
            }
        }
    }
    let ws = &input.workspace;
    if !ws
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err((
            "spec.input.workspace".into(),
            format!("{ws:?}: a workspace name has letters, digits, '-', '_' and '.' only"),
        ));
    }
    Ok(())
}

impl Plugin for TerraformPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_PLAN, STAGE_APPLY, STAGE_SYNC, STAGE_ROLLBACK]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("terraform")
    }

    /// The live read is a `terraform plan` of the app's directory: its providers and
    /// `external` data sources are code from the repository.
    fn live_read_runs_code(&self, _app: &AppConfig) -> bool {
        true
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        match name {
            STAGE_PLAN => {
                let opts: PlanOptions = stage_options::parse(with)?;
                Ok(json!({ "exitOnNoChanges": opts.exit_on_no_changes }))
            }
            STAGE_APPLY | STAGE_SYNC => {
                let opts: ApplyOptions = stage_options::parse(with)?;
                if opts.retries > 0 {
                    return Err(StageConfigError::unsupported("retries", RETRIES_UNSUPPORTED));
                }
                Ok(json!({}))
            }
            _ => Err(StageConfigError::new(
                "",
                "TERRAFORM_ROLLBACK is added by gannet to undo a deployment; it cannot be configured",
            )),
        }
    }

    /// The config's Terraform fields, and the var files they name (each must exist). PipeCD's
    /// `quickSync.retries` is refused: gannet applies a plan once.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        if app.kind == AppKind::Application {
            return Ok(Vec::new());
        }
        let spec: TerraformSpec = app.platform_spec()?;
        if spec.quick_sync.retries > 0 {
            return Err(AppFileError::unsupported_in_config(
                "spec.quickSync.retries",
                "retrying a failed apply is not supported: gannet applies a plan once",
            ));
        }
        let files = spec.input.var_files.iter().enumerate().map(|(i, file)| {
            AppFile::document(format!("spec.input.varFiles[{i}]"), file, "")
                .read_as(FileFormat::Opaque)
        });
        Ok(files.collect())
    }

    /// `spec.input` must make sense as terraform arguments (`name=value` vars and envs).
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        _read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let input = input_of(ctx.app).map_err(|e| AppFileError {
            named_by: "spec.plugins.terraform.input".into(),
            file: "app.pipecd.yaml".into(),
            line: None,
            field: "spec.plugins.terraform.input".into(),
            message: e.reason(),
            unsupported: false,
        })?;
        check_input(&input).map_err(|(field, message)| AppFileError {
            named_by: field.clone(),
            file: "app.pipecd.yaml".into(),
            line: None,
            field,
            message,
            unsupported: false,
        })
    }

    /// PipeCD's Terraform planner has no first-deployment rule: with a pipeline, every
    /// deployment runs it, the first one too, so its plan is shown (and approved, where the
    /// pipeline says) before anything is applied.
    fn determine_strategy(&self, _ctx: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        Some((
            SyncStrategy::Pipeline,
            "a Terraform app runs its pipeline on every commit, its first too, so the plan is shown before it is applied".into(),
        ))
    }

    fn quick_sync_stages(&self, _ctx: &PlanContext<'_>) -> Vec<Stage> {
        let desc = "Plan, and apply the plan when it changes anything";
        vec![Stage::of_plugin(
            QUICK_SYNC_STAGE_ID,
            STAGE_SYNC,
            json!({}),
            desc,
        )]
    }

    /// A rollback applies the running commit's configuration, so there is one only when a
    /// commit was deployed before.
    fn rollback_stages(&self, ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let applies =
            |s: &Stage| !s.rollback && matches!(s.name.as_str(), STAGE_APPLY | STAGE_SYNC);
        let desc = "Plan and apply the running commit's configuration";
        Stage::rollback_after(planned, applies, ROLLBACK_STAGE_ID, STAGE_ROLLBACK, desc)
            .filter(|_| ctx.running_commit.is_some())
            .into_iter()
            .collect()
    }
}

impl Presenter for TerraformPlugin {
    /// A plan's resources, each with its actions and changed attributes.
    fn present(&self, stage: &Stage) -> Vec<Detail> {
        stage
            .metadata
            .get(META_PLAN)
            .and_then(|kept| serde_json::from_str::<Plan>(kept).ok())
            .map(|plan| plan.detail())
            .into_iter()
            .collect()
    }
}

#[async_trait]
impl Steps for TerraformPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let follow = Follow::of_step(&ctx);
        let elapsed = ctx.now.since(stage.started_at.unwrap_or(ctx.now));
        let progress = match follow.key() {
            Some(key) => follow.poll(&key, ctx.now).await?,
            None => match self.start(&ctx, &follow, elapsed).await? {
                Started::Job(progress) => progress,
                Started::Done(result) => return Ok(StepOutcome::Done(result)),
            },
        };
        let end = match progress {
            Progress::Running { after } => return Ok(StepOutcome::Continue { after }),
            Progress::Ended(end) => end,
        };
        let key = follow
            .key()
            .ok_or_else(|| StepError::permanent("the stage's job was not recorded"))?;
        finish(&ctx, &key, end).await.map(StepOutcome::Done)
    }

    /// A cancel or a timeout stops terraform. Mid-apply that may leave the state lock held.
    async fn stop(&self, ctx: StopContext<'_>) -> Result<(), StepError> {
        let follow = Follow::of_stop(&ctx);
        if let Some(key) = follow.cancel().await? {
            let mut line = format!("stopped terraform (job {key})");
            if ctx.stage.name != STAGE_PLAN {
                line.push_str(&format!("; {}", lock_advice()));
            }
            ctx.io.log(&line).await;
        }
        Ok(())
    }
}

#[async_trait]
impl LiveStates for TerraformPlugin {
    /// A plan at the branch head, run as a job once per drift interval and head. The newest
    /// plan that ended in this interval or the [`DRIFT_LOOK_BACK`] before it is the answer; a
    /// new plan starts only when none of those runs, so a plan slower than the interval still
    /// ends and is read.
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let target = self.target_for(ctx.app)?;
        if !target.drift_detection_enabled && !ctx.preview {
            return Ok(Live::NotRead);
        }
        let input = input_of(ctx.app)?;
        let window = ctx.now.0 / target.drift_interval.as_millis().max(1);
        let purpose = if ctx.preview { "preview" } else { "drift" };
        let key_of = |window: u64| {
            JobKey::of(&[
                (purpose, 7),
                (ctx.app_id.as_str(), 30),
                (ctx.head.as_str(), 8),
                (&window.to_string(), 10),
                (&ctx.last_deployed.map_or(0, |m| m.0).to_string(), 13),
            ])
        };
        let mut ended = None;
        let mut running = None;
        let mut started_now = false;
        for back in 0..=DRIFT_LOOK_BACK {
            let key = key_of(window.saturating_sub(back));
            match ctx.jobs.poll(&key, "").await {
                Ok(poll) => match poll.end {
                    Some(end) => {
                        ended = Some((key, end));
                        break;
                    }
                    None => running = running.or(Some(key)),
                },
                Err(jobs::JobError::Unknown(_)) => {
                    if back == 0 {
                        started_now = true;
                    }
                }
                Err(err) => return Err(err.into()),
            }
            if back >= window {
                break;
            }
        }
        if started_now && running.is_none() {
            let key = key_of(window);
            let env = job_env(target);
            // A preview plans a pull request's code, with the preview's credentials: it shares
            // no cache with the deployments (its `init` could leave providers they would run).
            let cache =
                (!ctx.preview).then(|| InitCache::of(ctx.app_id, target, ctx.app_dir, &input));
            let cache = cache.flatten();
            ctx.jobs
                .start(JobSpec {
                    key: &key,
                    script: &commands(target, &input, cache.as_ref()).drift_script(),
                    dir: ctx.app_dir,
                    env: &env,
                    timeout: target.drift_interval.max(DRIFT_JOB_MIN_TIME),
                    inputs: &[],
                    role: target.job_role_arn.as_ref(),
                    cache: cache.as_ref().map(|c| c.name.as_str()),
                })
                .await?;
            running = Some(key);
        }
        let Some((key, end)) = ended else {
            return Ok(match running {
                Some(key) => pending(&key),
                None => Live::NotRead,
            });
        };
        let what = format!("the drift check's terraform plan (job {key})");
        if end != JobEnd::Exited(0) {
            let error = read_error(ctx.jobs, &key).await?;
            return Err(StepError::permanent(match error {
                Some(error) => format!("terraform plan failed: {error}"),
                None => format!("{what} {end}"),
            }));
        }
        let plan = read_plan(ctx.jobs, &key)
            .await?
            .ok_or_else(|| StepError::permanent(format!("{what} left no plan")))?;
        Ok(Live::Read(LiveState {
            resources: plan.live_resources(),
            drift: plan.drift(),
        }))
    }
}

/// How many intervals before the current one a drift check looks for a plan.
const DRIFT_LOOK_BACK: u64 = 2;
/// A drift plan may run at least this long, however short the interval.
const DRIFT_JOB_MIN_TIME: GoDuration = GoDuration::from_secs(600);

fn pending(key: &JobKey) -> Live {
    Live::Pending {
        what: format!("the drift check's terraform plan runs (job {key})"),
        job: Some(key.clone()),
    }
}

/// What a first step did.
enum Started {
    Job(Progress),
    Done(StageResult),
}

impl TerraformPlugin {
    /// The first step: starts the stage's job, or ends the stage when it has nothing to run.
    async fn start(
        &self,
        ctx: &StepContext<'_>,
        follow: &Follow<'_>,
        elapsed: GoDuration,
    ) -> Result<Started, StepError> {
        let stage = ctx.stage;
        let rollback = stage.name == STAGE_ROLLBACK;
        let dir: &Path = if rollback {
            match ctx.running_app_dir {
                Some(dir) => dir,
                None => {
                    ctx.io
                        .log("No commit was deployed before: nothing to roll back to")
                        .await;
                    return Ok(Started::Done(StageResult::Success));
                }
            }
        } else {
            ctx.app_dir
        };
        let app = load_app_config(dir, &ctx.deployment.app)
            .map_err(|e| StepError::permanent(e.to_string()))?;
        let target = self.target_for(&app)?;
        let input = input_of(&app)?;
        check_input(&input)
            .map_err(|(field, message)| StepError::permanent(format!("{field}: {message}")))?;
        let cache = InitCache::of(&ctx.deployment.app, target, dir, &input);
        let commands = commands(target, &input, cache.as_ref());
        let plan_job;
        let mut given = Vec::new();
        let script = match stage.name.as_str() {
            STAGE_PLAN => commands.plan_script(),
            STAGE_SYNC | STAGE_ROLLBACK => commands.sync_script(),
            STAGE_APPLY => {
                let Some(plan) = plan_stage(ctx) else {
                    return Err(StepError::permanent(
                        "TERRAFORM_APPLY applies the plan of a TERRAFORM_PLAN stage before it, and this pipeline has none that succeeded",
                    ));
                };
                if plan.metadata.get(META_HAS_CHANGES).map(String::as_str) == Some("false") {
                    ctx.io
                        .log(&format!(
                            "The plan of stage {} has no changes: nothing to apply",
                            plan.id
                        ))
                        .await;
                    return Ok(Started::Done(StageResult::Success));
                }
                plan_job = plan
                    .metadata
                    .get(jobs::META_JOB)
                    .and_then(|k| JobKey::parse(k))
                    .ok_or_else(|| {
                        StepError::permanent(format!("stage {} recorded no plan job", plan.id))
                    })?;
                given.push(JobInput {
                    job: &plan_job,
                    file: PLAN_FILE,
                });
                ctx.io
                    .log(&format!(
                        "Applying the plan of stage {} (job {plan_job})",
                        plan.id
                    ))
                    .await;
                commands.apply_script()
            }
            other => {
                return Err(StepError::permanent(format!(
                    "the terraform plugin does not run stage {other}"
                )))
            }
        };
        if elapsed >= stage.timeout {
            return Ok(Started::Done(StageResult::Failure {
                reason: format!(
                    "no time left to start terraform (stage timeout {})",
                    stage.timeout
                ),
            }));
        }
        let key = JobKey::new(&ctx.deployment.id, &stage.id, 1);
        let env = job_env(target);
        let spec = JobSpec {
            key: &key,
            script: &script,
            dir,
            env: &env,
            timeout: GoDuration::from_millis(stage.timeout.as_millis() - elapsed.as_millis()),
            inputs: &given,
            role: target.job_role_arn.as_ref(),
            cache: cache.as_ref().map(|c| c.name.as_str()),
        };
        follow.start(spec, ctx.now).await.map(Started::Job)
    }
}

/// The cache a job keeps `init`'s work in ([`cache`]), when its target keeps one.
struct InitCache {
    /// Which cache: the app's and the target's.
    name: String,
    /// What `init`'s result is valid for.
    key: String,
}

impl InitCache {
    /// The cache of the jobs of `app` on `target` that run in `dir`; `None` when the target
    /// keeps none, or `dir` cannot be read for the key.
    fn of(app: &AppId, target: &DeployTarget, dir: &Path, input: &TerraformInput) -> Option<Self> {
        if !target.init_cache {
            return None;
        }
        Some(Self {
            name: cache::cache_name(app, target),
            key: cache::init_key(dir, target, input)?,
        })
    }
}

fn commands<'a>(
    target: &'a DeployTarget,
    input: &'a TerraformInput,
    cache: Option<&InitCache>,
) -> Commands<'a> {
    Commands {
        terraform: target.binary(&input.terraform_version),
        input,
        target_vars: &target.vars,
        init_key: cache.map(|c| c.key.clone()),
    }
}

/// The job's environment: the base, what the target allows of gannet's, the target's own,
/// and terraform's settings for running unattended.
fn job_env(target: &DeployTarget) -> Vec<(String, String)> {
    let mut env = jobs::inherited_env(&target.allow_env);
    env.extend(target.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (k, v) in [
        ("TF_IN_AUTOMATION", "1"),
        ("TF_INPUT", "0"),
        ("CHECKPOINT_DISABLE", "1"),
    ] {
        if !env.iter().any(|(name, _)| name == k) {
            env.push((k.to_owned(), v.to_owned()));
        }
    }
    env
}

/// The TERRAFORM_PLAN stage whose plan a TERRAFORM_APPLY stage applies: the last one before
/// it that succeeded.
fn plan_stage<'a>(ctx: &StepContext<'a>) -> Option<&'a Stage> {
    ctx.deployment
        .stages
        .iter()
        .take_while(|s| s.id != ctx.stage.id)
        .filter(|s| s.name == STAGE_PLAN && !s.rollback && s.status == StageStatus::Success)
        .last()
}

async fn read_error(jobs: &dyn JobRunner, key: &JobKey) -> Result<Option<String>, StepError> {
    let text = jobs.output(key, ERROR).await?;
    Ok(text.and_then(|t| script::error_summary(&String::from_utf8_lossy(&t))))
}

/// The plan a job left (`show -json`), `None` when it left none.
async fn read_plan(jobs: &dyn JobRunner, key: &JobKey) -> Result<Option<Plan>, StepError> {
    let exit = jobs.output(key, PLAN_EXIT).await?;
    let Some(exit) = exit else {
        return Ok(None);
    };
    let json = jobs.output(key, PLAN_JSON).await?.unwrap_or_default();
    let plan = Plan::parse(&json).map_err(StepError::permanent)?;
    if String::from_utf8_lossy(&exit).trim() == "0" && plan.has_changes() {
        return Err(StepError::permanent(
            "terraform plan said no changes, but its JSON lists changes",
        ));
    }
    Ok(Some(plan))
}

/// What to do about a lock a killed terraform may have left.
fn lock_advice() -> String {
    "terraform may have stopped mid-apply and left the state lock held: run `terraform plan` in the app's directory (an error names the lock's ID if it is held) and, once sure no apply runs, `terraform force-unlock <ID>`; gannet does not apply again by itself".into()
}

/// The stage's result once its job ended.
async fn finish(
    ctx: &StepContext<'_>,
    key: &JobKey,
    end: JobEnd,
) -> Result<StageResult, StepError> {
    let stage = ctx.stage;
    let command = if stage.name == STAGE_PLAN {
        "plan"
    } else {
        "apply"
    };
    if end != JobEnd::Exited(0) {
        let reason = match (&end, read_error(ctx.jobs, key).await?) {
            (JobEnd::Exited(_), Some(error)) => format!("terraform failed: {error}"),
            (JobEnd::Lost { .. }, _) if command == "apply" => {
                format!("the terraform job {end}; {}", lock_advice())
            }
            _ => format!("the terraform job {end}"),
        };
        ctx.io.log(&reason).await;
        return Ok(StageResult::Failure { reason });
    }
    let plan = read_plan(ctx.jobs, key).await?;
    if let Some(plan) = &plan {
        let summary = plan.summary();
        ctx.io.log(&summary).await;
        ctx.io
            .save_metadata(Metadata::from([
                (META_PLAN.to_owned(), plan.kept()),
                (META_PLAN_SUMMARY.to_owned(), summary),
                (META_HAS_CHANGES.to_owned(), plan.has_changes().to_string()),
            ]))
            .await?;
    }
    match stage.name.as_str() {
        STAGE_PLAN => {
            let plan = plan.ok_or_else(|| StepError::permanent("terraform plan left no plan"))?;
            let exit = stage_options::parse::<PlanOptions>(&stage.with)
                .map(|o| o.exit_on_no_changes)
                .unwrap_or(false);
            if !plan.has_changes() && exit {
                return Ok(StageResult::Exited {
                    reason: "the plan has no changes (exitOnNoChanges)".into(),
                });
            }
            Ok(StageResult::Success)
        }
        _ => {
            let applied = ctx.jobs.output(key, APPLIED).await?.is_some();
            ctx.io
                .log(if applied {
                    "Applied the plan"
                } else {
                    "No changes to apply"
                })
                .await;
            Ok(StageResult::Success)
        }
    }
}

#[cfg(test)]
mod tests;
