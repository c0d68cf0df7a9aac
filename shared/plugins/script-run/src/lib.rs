//! The SCRIPT_RUN stage: runs `with.run` with `sh -c` in the app's directory, and, when the
//! deployment rolls back, `with.onRollback` as a hidden SCRIPT_RUN_ROLLBACK stage.
//!
//! As in PipeCD, the script gets the controller's environment, the `SR_*` variables that
//! describe the deployment, then `with.env`. Its stdout and stderr go to the stage log line by
//! line as they arrive. Exit code 0 is success. The stage's time (`with.timeout`, 6h by default,
//! and never more than the stage's own timeout) counts from when the stage started; at the end
//! of it the script's whole process group is killed and the stage fails.
//!
//! A rollback stage runs in the app's directory at the running commit (the commit being
//! returned to), or at the deployment's commit on a first deployment. As PipeCD documents, a
//! rollback runs only for SCRIPT_RUN stages that started.
//!
//! A step is the whole script run. If it is interrupted (a crash, a lost lease), the next step
//! runs the script again and the log says so; scripts should tolerate that. Two copies never
//! run at once: what the interrupted attempt left running is killed first (see [`orphan`]).

mod context;
mod options;
mod orphan;
mod runner;

use std::path::Path;

use async_trait::async_trait;
use gannet_core::deployment::{Stage, StageStatus};
use gannet_core::ids::StageId;
use gannet_core::plugin::{
    PlanContext, Plugin, StageConfigError, StageResult, StepContext, StepError, StepOutcome,
};
use gannet_core::ports::Metadata;
use gannet_core::registry::{PluginSettings, PluginSpec};
use gannet_core::typed::FieldError;
use gannet_core::GoDuration;
use serde_json::Value;

use crate::context::{context_env, RunKind};
use crate::options::{ScriptOptions, DEFAULT_TIMEOUT};
use crate::runner::{OnDrop, RunError, Script, ScriptEnd};

/// The stage that runs `with.run`.
pub const STAGE_SCRIPT_RUN: &str = "SCRIPT_RUN";
/// The hidden stage that runs a SCRIPT_RUN's `with.onRollback`.
pub const STAGE_SCRIPT_RUN_ROLLBACK: &str = "SCRIPT_RUN_ROLLBACK";

/// Stage metadata key: how many times a step has started the script.
const ATTEMPTS: &str = "attempts";

/// What every script gets of gannet's environment: what a shell needs to find programs and
/// speak the locale, never a credential.
pub const BASE_ENV: [&str; 10] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
];

/// Runs `SCRIPT_RUN` and `SCRIPT_RUN_ROLLBACK` stages.
///
/// Unlike PipeCD, a script does not inherit gannet's environment: it gets [`BASE_ENV`], the
/// variables the operator allows (`plugins.script-run.allowEnv`), the `SR_*` variables and
/// `with.env`. gannet's own credentials (cloud keys, tokens, the webhook secret) never reach it.
#[derive(Clone, Debug, Default)]
pub struct ScriptRunPlugin {
    /// Names of gannet's environment variables scripts get, beside [`BASE_ENV`].
    allow_env: Vec<String>,
    on_drop: OnDrop,
}

impl ScriptRunPlugin {
    /// A plugin whose scripts also get the variables named in `allow_env` from gannet's
    /// environment.
    pub fn allowing_env(allow_env: Vec<String>) -> Self {
        Self {
            allow_env,
            on_drop: OnDrop::default(),
        }
    }

    /// The part of gannet's environment a script gets.
    fn inherited_env(&self) -> Vec<(String, String)> {
        BASE_ENV
            .iter()
            .copied()
            .chain(self.allow_env.iter().map(String::as_str))
            .filter_map(|name| Some((name.to_owned(), std::env::var(name).ok()?)))
            .collect()
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

/// The registry's entry: `plugins.script-run.allowEnv` lists what scripts get of gannet's
/// environment; a variable that holds one of gannet's own secrets is refused.
pub const SPEC: PluginSpec = PluginSpec {
    name: "script-run",
    build,
};

fn build(settings: &PluginSettings<'_>) -> Result<std::sync::Arc<dyn Plugin>, FieldError> {
    let written: Settings = settings.parse()?;
    for (i, name) in written.allow_env.iter().enumerate() {
        let at = |message: String| FieldError {
            path: format!("{}.allowEnv[{i}]", settings.at()),
            message,
        };
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(at(format!("{name:?} is not a variable name")));
        }
        if settings.runtime.secret_env.contains(name) {
            return Err(at(format!(
                "{name} holds one of gannet's own secrets; scripts never get it"
            )));
        }
    }
    Ok(std::sync::Arc::new(ScriptRunPlugin::allowing_env(
        written.allow_env,
    )))
}

/// The hidden rollback stages for the SCRIPT_RUN stages in `planned` that set `onRollback`.
fn rollback_stages_for(planned: &[Stage]) -> Vec<Stage> {
    planned
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
        })
        .collect()
}

#[async_trait]
impl Plugin for ScriptRunPlugin {
    fn name(&self) -> &'static str {
        "script-run"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_SCRIPT_RUN, STAGE_SCRIPT_RUN_ROLLBACK]
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        ScriptOptions::parse(name, with).map(|o| o.to_value())
    }

    /// `with.timeout`: how long the script may run.
    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        ScriptOptions::parse(&stage.name, &stage.with).map_or(DEFAULT_TIMEOUT, |o| o.timeout)
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        rollback_stages_for(planned)
    }

    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let opts = ScriptOptions::parse(&stage.name, &stage.with)
            .map_err(|e| StepError::permanent(format!("stage {}: invalid with.{e}", stage.id)))?;
        let kind = if stage.name == STAGE_SCRIPT_RUN_ROLLBACK {
            RunKind::Rollback
        } else {
            RunKind::Forward
        };

        orphan::kill_previous(&stage.metadata, ctx.deployment.id.as_str(), ctx.io)
            .await
            .map_err(|e| StepError::transient("killing the previous attempt's script", e))?;

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
                return Ok(StepOutcome::Done(StageResult::Success));
            }
        }

        let limit = stage.timeout.min(opts.timeout);
        let elapsed = ctx.now.since(stage.started_at.unwrap_or(ctx.now));
        if elapsed >= limit {
            return Ok(timed_out(&ctx, limit).await);
        }
        let remaining = limit.get() - elapsed.get();

        let attempts: u64 = stage
            .metadata
            .get(ATTEMPTS)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let attempt = attempts.saturating_add(1);
        ctx.io
            .save_metadata(Metadata::from([(ATTEMPTS.to_owned(), attempt.to_string())]))
            .await?;
        if attempt > 1 {
            ctx.io
                .log(&format!(
                    "An earlier run of this script was interrupted; running it again (attempt {attempt})"
                ))
                .await;
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
        env.extend(opts.env);
        let script = Script {
            run: &opts.run,
            dir,
            env,
            limit: remaining,
            on_drop: self.on_drop,
        };
        let end = runner::run(script, ctx.io).await.map_err(|e| match e {
            RunError::RecordGroup { source } => source,
            other => StepError::permanent(other),
        })?;
        let result = match end {
            ScriptEnd::Exited(0) => StageResult::Success,
            ScriptEnd::Exited(code) => StageResult::Failure {
                reason: format!("script exited with code {code}"),
            },
            ScriptEnd::Signalled(signal) => StageResult::Failure {
                reason: format!("script was killed by signal {signal}"),
            },
            ScriptEnd::TimedOut => return Ok(timed_out(&ctx, limit).await),
        };
        match &result {
            StageResult::Success => ctx.io.log("Script finished successfully").await,
            StageResult::Failure { reason } => ctx.io.log(reason).await,
        }
        Ok(StepOutcome::Done(result))
    }
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
