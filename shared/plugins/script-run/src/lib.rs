//! The SCRIPT_RUN stage: runs `with.run` with `sh` as a job ([`gannet_sdk::jobs`]) in a copy
//! of the app's directory, and, when the deployment rolls back, `with.onRollback` as a hidden
//! SCRIPT_RUN_ROLLBACK stage.
//!
//! A step never waits for the script: the first step starts the job and returns `Continue`,
//! each later step copies the job's new output to the stage log and looks whether it ended.
//! The job is named by the deployment, the stage and the attempt, so a step delivered twice,
//! or one that crashed after starting the job, finds the job it started: the script runs
//! once. Exit code 0 is success. The stage's time (`with.timeout`, 6h by default, and never
//! more than the stage's own timeout) counts from when the stage started; at the end of it the
//! job (the script and what it started) is stopped and the stage fails. A cancelled deployment
//! stops it the same way ([`Plugin::stop`]).
//!
//! A rollback stage runs in the app's directory at the running commit (the commit being
//! returned to), or at the deployment's commit on a first deployment. As PipeCD documents, a
//! rollback runs only for SCRIPT_RUN stages that started.
//!
//! CUSTOM_SYNC (`run`, `envs`, `timeout`) syncs the app with the user's own commands (a `sam
//! deploy`) instead of the platform's stages, run the same way; its rollback (the hidden
//! CUSTOM_SYNC_ROLLBACK, as PipeCD plans it) runs the running commit's CUSTOM_SYNC in the
//! running commit's directory, so the app goes back the way it came.

mod context;
mod options;

use std::path::Path;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_domain::deployment::{Stage, StageStatus};
use gannet_domain::ids::StageId;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{self, Follow, JobEnd, JobKey, JobSpec, Progress};
use gannet_sdk::plugin::{
    PlanContext, Plugin, Presenter, StageConfigError, StageResult, StepContext, StepError,
    StepOutcome, Steps, StopContext,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_options;
use serde_json::Value;

use crate::context::{context_env, RunKind};
use crate::options::{CustomSyncRollback, ScriptOptions, DEFAULT_TIMEOUT};

/// The stage that runs `with.run`.
pub const STAGE_SCRIPT_RUN: &str = "SCRIPT_RUN";
/// The hidden stage that runs a SCRIPT_RUN's `with.onRollback`.
pub const STAGE_SCRIPT_RUN_ROLLBACK: &str = "SCRIPT_RUN_ROLLBACK";
/// PipeCD's stage that syncs with the user's commands.
pub const STAGE_CUSTOM_SYNC: &str = "CUSTOM_SYNC";
/// The hidden stage that runs the running commit's CUSTOM_SYNC.
pub const STAGE_CUSTOM_SYNC_ROLLBACK: &str = "CUSTOM_SYNC_ROLLBACK";

pub use gannet_sdk::jobs::BASE_ENV;

/// Runs `SCRIPT_RUN` and `SCRIPT_RUN_ROLLBACK` stages.
///
/// Unlike PipeCD, a script does not inherit gannet's environment: it gets [`BASE_ENV`], the
/// variables the operator allows (`plugins.script-run.allowEnv`), the `SR_*` variables and
/// `with.env`. gannet's own credentials (cloud keys, tokens, the webhook secret) never reach it.
#[derive(Clone, Debug, Default)]
pub struct ScriptRunPlugin {
    /// Names of gannet's environment variables scripts get, beside [`BASE_ENV`].
    allow_env: Vec<String>,
}

impl ScriptRunPlugin {
    /// A plugin whose scripts also get the variables named in `allow_env` from gannet's
    /// environment.
    pub fn allowing_env(allow_env: Vec<String>) -> Self {
        Self { allow_env }
    }

    /// The part of gannet's environment a script gets.
    fn inherited_env(&self) -> Vec<(String, String)> {
        jobs::inherited_env(&self.allow_env)
    }
}

/// `plugins.script-run` in the controller config.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Settings {
    /// gannet's environment variables scripts get, beside [`BASE_ENV`].
    #[serde(default)]
    allow_env: Vec<String>,
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "script-run";

/// The registry's entry: `plugins.script-run.allowEnv` lists what scripts get of gannet's
/// environment; a variable that holds one of gannet's own secrets is refused.
pub const SPEC: PluginSpec = PluginSpec::stages::<ScriptRunPlugin>(NAME);

impl FromSettings for ScriptRunPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let written: Settings = settings.parse()?;
        jobs::check_allowed_env(
            &format!("{}.allowEnv", settings.at()),
            &written.allow_env,
            &settings.runtime.secret_env,
            "give scripts credentials of their own under other names (such as \
             DEPLOY_AWS_ACCESS_KEY_ID, which the script exports as AWS_ACCESS_KEY_ID), or \
             run them on AWS, where each job has a role of its own",
        )?;
        Ok(ScriptRunPlugin::allowing_env(written.allow_env))
    }
}

/// The hidden rollback stages for the SCRIPT_RUN stages in `planned` that set `onRollback`,
/// and one for each CUSTOM_SYNC.
fn rollback_stages_for(planned: &[Stage]) -> Vec<Stage> {
    let custom = planned
        .iter()
        .filter(|s| s.name == STAGE_CUSTOM_SYNC && !s.rollback)
        .map(|s| {
            let with = CustomSyncRollback {
                rollback_of: s.id.to_string(),
            };
            let mut stage = Stage::planned(
                StageId::rollback(s.id.as_str()),
                STAGE_CUSTOM_SYNC_ROLLBACK,
                s.index,
                stage_options::to_value(&with),
            );
            stage.desc = "Run the running commit's CUSTOM_SYNC".to_owned();
            stage.rollback = true;
            stage.visible = false;
            stage.timeout = s.timeout;
            stage
        });
    let scripts = planned
        .iter()
        .filter(|s| s.name == STAGE_SCRIPT_RUN && !s.rollback)
        .filter_map(|s| {
            let opts = ScriptOptions::parse(&s.name, &s.with).ok()?;
            let script = opts.on_rollback?;
            let with = ScriptOptions {
                run: script,
                env: opts.env,
                timeout: opts.timeout,
                on_rollback: None,
                rollback_of: Some(s.id.to_string()),
            };
            let mut stage = Stage::planned(
                StageId::rollback(s.id.as_str()),
                STAGE_SCRIPT_RUN_ROLLBACK,
                s.index,
                with.to_value(),
            );
            stage.desc = format!("Run onRollback of stage {}", s.id);
            stage.rollback = true;
            stage.visible = false;
            stage.timeout = s.timeout;
            Some(stage)
        });
    scripts.chain(custom).collect()
}

impl Plugin for ScriptRunPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[
            STAGE_SCRIPT_RUN,
            STAGE_SCRIPT_RUN_ROLLBACK,
            STAGE_CUSTOM_SYNC,
            STAGE_CUSTOM_SYNC_ROLLBACK,
        ]
    }

    /// CUSTOM_SYNC deploys the app with the user's commands.
    fn syncs_in_place_of_the_platform(&self, stage: &str) -> bool {
        stage == STAGE_CUSTOM_SYNC
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        if name == STAGE_CUSTOM_SYNC_ROLLBACK {
            return Err(StageConfigError::new(
                "",
                "CUSTOM_SYNC_ROLLBACK is added by gannet to undo a CUSTOM_SYNC; it cannot be configured",
            ));
        }
        ScriptOptions::parse(name, with).map(|o| o.to_value())
    }

    /// `with.timeout`: how long the script may run.
    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        ScriptOptions::parse(&stage.name, &stage.with).map_or(DEFAULT_TIMEOUT, |o| o.timeout)
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        rollback_stages_for(planned)
    }
}

impl Presenter for ScriptRunPlugin {}

#[async_trait]
impl Steps for ScriptRunPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let invalid = |e| StepError::permanent(format!("stage {}: invalid with.{e}", stage.id));
        let opts = if stage.name == STAGE_CUSTOM_SYNC_ROLLBACK {
            let undo = CustomSyncRollback::parse(&stage.with).map_err(invalid)?;
            match running_custom_sync(&ctx, &undo)? {
                Some(opts) => opts,
                None => return Ok(StepOutcome::Done(StageResult::Success)),
            }
        } else {
            ScriptOptions::parse(&stage.name, &stage.with).map_err(invalid)?
        };
        let follow = Follow::of_step(&ctx);
        let limit = stage.timeout.min(opts.timeout);
        let elapsed = ctx.now.since(stage.started_at.unwrap_or(ctx.now));
        let progress = match follow.key() {
            Some(key) => {
                let progress = follow.poll(&key, ctx.now).await?;
                if matches!(progress, Progress::Running { .. }) && elapsed >= limit {
                    follow.cancel().await?;
                    return Ok(timed_out(&ctx, limit).await);
                }
                progress
            }
            None => match self.start(&ctx, &opts, &follow, limit, elapsed).await? {
                Some(progress) => progress,
                None => return Ok(StepOutcome::Done(StageResult::Success)),
            },
        };
        let end = match progress {
            Progress::Running { after } => return Ok(StepOutcome::Continue { after }),
            Progress::Ended(end) => end,
        };
        let result = match end {
            JobEnd::Exited(0) => StageResult::Success,
            JobEnd::TimedOut { .. } => return Ok(timed_out(&ctx, limit).await),
            other => StageResult::Failure {
                reason: format!("script {other}"),
            },
        };
        match &result {
            StageResult::Failure { reason } => ctx.io.log(reason).await,
            _ => ctx.io.log("Script finished successfully").await,
        }
        Ok(StepOutcome::Done(result))
    }

    /// A cancel or a timeout stops the script and what it started.
    async fn stop(&self, ctx: StopContext<'_>) -> Result<(), StepError> {
        let follow = Follow::of_stop(&ctx);
        if let Some(key) = follow.cancel().await? {
            ctx.io.log(&format!("stopped the script (job {key})")).await;
        }
        Ok(())
    }
}

impl ScriptRunPlugin {
    /// The first step: starts the script's job, unless there is nothing to do (`None`: a
    /// rollback of a stage that never ran) or no time left.
    async fn start(
        &self,
        ctx: &StepContext<'_>,
        opts: &ScriptOptions,
        follow: &Follow<'_>,
        limit: GoDuration,
        elapsed: GoDuration,
    ) -> Result<Option<Progress>, StepError> {
        let kind = if ctx.stage.rollback {
            RunKind::Rollback
        } else {
            RunKind::Forward
        };
        if let Some(undone) = opts.rollback_of.as_deref() {
            let undone = ctx
                .deployment
                .stages
                .iter()
                .find(|s| s.id.as_str() == undone);
            if let Some(undone) = undone.filter(|s| never_ran(s.status)) {
                ctx.io
                    .log(&format!(
                        "Stage {} did not run, so there is nothing to roll back",
                        undone.id
                    ))
                    .await;
                return Ok(None);
            }
        }
        if elapsed >= limit {
            return Ok(Some(Progress::Ended(JobEnd::TimedOut { after: limit })));
        }
        let dir: &Path = match kind {
            RunKind::Rollback => ctx.running_app_dir.unwrap_or(ctx.app_dir),
            RunKind::Forward => ctx.app_dir,
        };
        ctx.io.log("Running commands...").await;
        for line in opts.run.lines().filter(|l| !l.trim().is_empty()) {
            ctx.io.log(&format!("   {line}")).await;
        }
        let mut env = self.inherited_env();
        env.extend(context_env(ctx.deployment, kind));
        env.extend(opts.env.clone());
        let key = JobKey::new(&ctx.deployment.id, &ctx.stage.id, 1);
        let spec = JobSpec {
            key: &key,
            script: &opts.run,
            dir,
            env: &env,
            timeout: GoDuration::from_millis(limit.as_millis() - elapsed.as_millis()),
            inputs: &[],
            // A SCRIPT_RUN script runs as the runner's own job identity (`JobRole` on AWS).
            role: None,
            cache: None,
        };
        follow.start(spec, ctx.now).await.map(Some)
    }
}

/// The running commit's CUSTOM_SYNC, run by a CUSTOM_SYNC_ROLLBACK: `None` when the stage it
/// undoes never ran (nothing to undo). As in PipeCD, a first deployment has nothing to go back
/// to, and the running commit's pipeline must hold exactly one CUSTOM_SYNC.
fn running_custom_sync(
    ctx: &StepContext<'_>,
    undo: &CustomSyncRollback,
) -> Result<Option<ScriptOptions>, StepError> {
    let undone = ctx
        .deployment
        .stages
        .iter()
        .find(|s| s.id.as_str() == undo.rollback_of);
    if undone.is_some_and(|s| never_ran(s.status)) {
        return Ok(None);
    }
    let (Some(dir), Some(commit)) = (ctx.running_app_dir, &ctx.deployment.running_commit) else {
        return Err(StepError::permanent(
            "cannot roll back the CUSTOM_SYNC: this is the app's first deployment, so there is no running commit to go back to",
        ));
    };
    let config = gannet_sdk::tree::load_app_config(dir, &ctx.deployment.app).map_err(|e| {
        StepError::permanent(format!(
            "the running commit {}'s config: {e}",
            commit.short()
        ))
    })?;
    let syncs: Vec<_> = config
        .stages()
        .iter()
        .filter(|s| s.name == STAGE_CUSTOM_SYNC)
        .collect();
    let [sync] = syncs.as_slice() else {
        return Err(StepError::permanent(format!(
            "cannot roll back the CUSTOM_SYNC: the running commit {} has {} CUSTOM_SYNC stages, not one",
            commit.short(),
            syncs.len()
        )));
    };
    ScriptOptions::parse(STAGE_CUSTOM_SYNC, &sync.with)
        .map(Some)
        .map_err(|e| {
            StepError::permanent(format!(
                "the running commit {}'s CUSTOM_SYNC: invalid with.{e}",
                commit.short()
            ))
        })
}

/// True when a stage never started, so its effects need no undoing.
fn never_ran(status: StageStatus) -> bool {
    matches!(status, StageStatus::NotStartedYet | StageStatus::Skipped)
}

async fn timed_out(ctx: &StepContext<'_>, limit: GoDuration) -> StepOutcome {
    let reason = format!("script timed out after {limit}");
    ctx.io.log(&reason).await;
    StepOutcome::Done(StageResult::Failure { reason })
}

#[cfg(test)]
mod tests;
