//! The planner: quick sync or pipeline, and the stages to run, decided as PipeCD decides
//! them, from the config, the trigger and the compiled-in plugins.
//!
//! Strategy, first rule that applies:
//! 1. a command forced one (`trigger.strategy`);
//! 2. no pipeline → quick sync;
//! 3. `planner.alwaysUsePipeline` → pipeline;
//! 4. `commitMatcher.pipeline`, then `commitMatcher.quickSync` (not for commands);
//! 5. no successful deployment yet → quick sync;
//! 6. the platform plugin's choice; otherwise the pipeline.
//!
//! A quick sync takes its stages from the platform plugin. When there is none, or it has no
//! quick sync stages, the pipeline runs instead and the summary says so.
//!
//! The approval gate: when the pipeline has approval stages (`WAIT_APPROVAL`), no strategy
//! goes past them unless an admin's [`GateSkip`] is on the trigger. A quick sync of such an
//! app (its first deployment, a commit matcher, the plugin's choice, a command) runs those
//! approval stages first; with `planner.alwaysUsePipeline` even a forced quick sync runs the
//! pipeline. PipeCD's planner lets any quick sync past the pipeline's approval.

use std::collections::HashMap;

use serde::Serialize;

use crate::lifecycle::{Lifecycle, PhaseKind};
use crate::plugin::{AppFileError, Faces, PlanContext, Plugins, StageConfigError};
use gannet_config::glob;
use gannet_config::{AppConfig, ConfigError, StageConfig};
use gannet_domain::deployment::{GateSkip, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind};
use gannet_domain::ids::{CommitSha, StageId};

/// Every stage name PipeCD has (piped v0 and the v1 plugins), so that a stage gannet does not
/// run yet is told apart from a misspelt one.
pub const PIPECD_STAGES: &[&str] = &[
    "WAIT",
    "WAIT_APPROVAL",
    "ANALYSIS",
    "SCRIPT_RUN",
    "SCRIPT_RUN_ROLLBACK",
    "CUSTOM_SYNC",
    "CUSTOM_SYNC_ROLLBACK",
    "ROLLBACK",
    "K8S_SYNC",
    "K8S_PRIMARY_ROLLOUT",
    "K8S_CANARY_ROLLOUT",
    "K8S_CANARY_CLEAN",
    "K8S_BASELINE_ROLLOUT",
    "K8S_BASELINE_CLEAN",
    "K8S_TRAFFIC_ROUTING",
    "K8S_ROLLBACK",
    "K8S_MULTI_SYNC",
    "K8S_MULTI_PRIMARY_ROLLOUT",
    "K8S_MULTI_CANARY_ROLLOUT",
    "K8S_MULTI_CANARY_CLEAN",
    "K8S_MULTI_BASELINE_ROLLOUT",
    "K8S_MULTI_BASELINE_CLEAN",
    "K8S_MULTI_TRAFFIC_ROUTING",
    "K8S_MULTI_ROLLBACK",
    "TERRAFORM_SYNC",
    "TERRAFORM_PLAN",
    "TERRAFORM_APPLY",
    "TERRAFORM_ROLLBACK",
    "CLOUDRUN_SYNC",
    "CLOUDRUN_PROMOTE",
    "CLOUDRUN_ROLLBACK",
    "LAMBDA_SYNC",
    "LAMBDA_CANARY_ROLLOUT",
    "LAMBDA_PROMOTE",
    "LAMBDA_ROLLBACK",
    "ECS_SYNC",
    "ECS_CANARY_ROLLOUT",
    "ECS_PRIMARY_ROLLOUT",
    "ECS_TRAFFIC_ROUTING",
    "ECS_CANARY_CLEAN",
    "ECS_ROLLBACK",
];

/// Everything the planner looks at.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    pub app: &'a AppConfig,
    pub trigger: &'a Trigger,
    pub commit_message: &'a str,
    /// Files changed since the running commit, for `skipOn.paths`.
    pub changed_files: &'a [String],
    /// The commit of the last successful deployment; `None` before the first one.
    pub running_commit: Option<&'a CommitSha>,
    pub plugins: &'a Plugins,
    /// A file's text at the deployment's commit, by its path relative to the app's directory;
    /// `None` when it does not exist. The platform plugin checks its manifests through it.
    pub read: &'a dyn Fn(&str) -> Option<String>,
    /// The app's lifecycle file ([`crate::lifecycle`]), when it has one: its phases become the
    /// first and the last forward stages.
    pub lifecycle: Option<&'a Lifecycle>,
    /// The app's directory in a checkout of the deployment's commit, and at the running commit
    /// ([`PlanContext`]), when the caller checked them out.
    pub app_dir: Option<&'a std::path::Path>,
    pub running_app_dir: Option<&'a std::path::Path>,
    /// The app config's path relative to the repository's root, when known.
    pub config_path: Option<&'a str>,
}

impl<'a> PlanInput<'a> {
    /// What the plugins are told about this plan.
    fn context(&self) -> PlanContext<'a> {
        PlanContext {
            app: self.app,
            trigger: self.trigger,
            running_commit: self.running_commit,
            app_dir: self.app_dir,
            running_app_dir: self.running_app_dir,
            config_path: self.config_path,
        }
    }
}

/// What a deployment will run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub strategy: SyncStrategy,
    pub summary: String,
    /// The stages in order, hidden rollback stages last.
    pub stages: Vec<Stage>,
}

/// Why a deployment cannot be planned. Each names the config field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("spec.pipeline: a pipeline sync was requested, but the app has no pipeline")]
    NoPipelineToForce,
    #[error("{field}: the {platform} platform is not supported yet (no {platform} plugin is compiled in)")]
    PlatformNotSupported { field: String, platform: String },
    #[error(
        "spec.pipeline.stages[{index}].name: {name} is a PipeCD stage gannet does not support yet"
    )]
    StageNotSupported { index: usize, name: String },
    #[error(
        "spec.pipeline.stages[{index}].name: unknown stage {name:?}{}",
        did_you_mean(suggestion)
    )]
    UnknownStage {
        index: usize,
        name: String,
        /// The known stage name closest to `name`, when it is likely a typo.
        suggestion: Option<&'static str>,
    },
    #[error("{}: {}", stage_field(*index, &source.field), source.message)]
    InvalidStage {
        index: usize,
        name: String,
        source: StageConfigError,
    },
    #[error("{field}: stage id {id:?} is used by more than one stage")]
    DuplicateStageId { field: String, id: String },
    #[error("spec: nothing to deploy: the app has no pipeline and {reason}")]
    NothingToRun { reason: String },
    /// A file the config names (a function manifest) is missing or invalid; the field is the
    /// one naming the file, and the message names the file and the field inside it.
    #[error("{}: {}", .0.named_by, .0)]
    InvalidAppFile(AppFileError),
    /// The lifecycle file beside the config is invalid: its path, line and field.
    #[error("{0}")]
    InvalidLifecycle(ConfigError),
}

impl PlanError {
    /// The config field the error is about, such as `spec.pipeline.stages[2].with.duration`.
    pub fn field(&self) -> String {
        match self {
            Self::NoPipelineToForce => "spec.pipeline".to_owned(),
            Self::PlatformNotSupported { field, .. } | Self::DuplicateStageId { field, .. } => {
                field.clone()
            }
            Self::StageNotSupported { index, .. } | Self::UnknownStage { index, .. } => {
                format!("spec.pipeline.stages[{index}].name")
            }
            Self::InvalidStage { index, source, .. } => stage_field(*index, &source.field),
            Self::NothingToRun { .. } => "spec".to_owned(),
            Self::InvalidAppFile(e) => e.named_by.clone(),
            Self::InvalidLifecycle(e) => e.field.clone(),
        }
    }

    /// True when the config is valid PipeCD but uses what gannet does not support yet.
    pub fn is_unsupported(&self) -> bool {
        match self {
            Self::PlatformNotSupported { .. } | Self::StageNotSupported { .. } => true,
            Self::InvalidAppFile(e) => e.unsupported,
            Self::InvalidStage { source, .. } => source.unsupported,
            _ => false,
        }
    }

    /// The message without the field.
    pub fn message(&self) -> String {
        if let Self::InvalidLifecycle(e) = self {
            return e.message.clone();
        }
        let text = self.to_string();
        let prefix = format!("{}: ", self.field());
        text.strip_prefix(&prefix).unwrap_or(&text).to_owned()
    }
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    suggestion
        .map(|s| format!("; did you mean {s}?"))
        .unwrap_or_default()
}

/// `spec.pipeline.stages[i].with.<field>` for a plugin's field inside `with`.
fn stage_field(index: usize, field: &str) -> String {
    let inner = match field {
        "" | "with" => "with".to_owned(),
        f if f.starts_with("with.") || f.starts_with("with[") => f.to_owned(),
        f if f.starts_with('[') => format!("with{f}"),
        f => format!("with.{f}"),
    };
    format!("spec.pipeline.stages[{index}].{inner}")
}

/// Plans one deployment: the platform's or the pipeline's stages, between the lifecycle
/// phases when the app has any.
pub fn plan(input: &PlanInput<'_>) -> Result<Plan, PlanError> {
    let mut plan = plan_deploying_stages(input)?;
    if let Some(lifecycle) = input.lifecycle {
        add_phases(&mut plan.stages, lifecycle, input.plugins)?;
        plan.summary
            .push_str(&format!(", with the phases of {}", lifecycle.path));
    }
    Ok(plan)
}

/// Puts the pre-deployment phase's stage first and the post-deployment phase's after the last
/// forward stage (before the hidden rollback stages).
fn add_phases(
    stages: &mut Vec<Stage>,
    lifecycle: &Lifecycle,
    plugins: &Plugins,
) -> Result<(), PlanError> {
    for kind in PhaseKind::ALL {
        let Some(phase) = lifecycle
            .stage(kind, plugins)
            .map_err(PlanError::InvalidLifecycle)?
        else {
            continue;
        };
        if let Some(taken) = stages.iter().find(|s| s.id == phase.id) {
            return Err(PlanError::DuplicateStageId {
                field: format!("spec.pipeline.stages[{}].id", taken.index),
                id: phase.id.to_string(),
            });
        }
        let at = match kind {
            PhaseKind::Pre => 0,
            PhaseKind::Post => stages
                .iter()
                .position(|s| s.rollback)
                .unwrap_or(stages.len()),
        };
        stages.insert(at, phase);
    }
    Ok(())
}

fn plan_deploying_stages(input: &PlanInput<'_>) -> Result<Plan, PlanError> {
    let app = input.app;
    let ctx = input.context();
    let platform = platform_plugin(app, input.plugins)?;
    if let Some(p) = platform.filter(|_| !input.plugins.synced_by_its_own_stage(app)) {
        p.app_files(app).map_err(PlanError::InvalidAppFile)?;
        p.check_app(&ctx, input.read)
            .map_err(PlanError::InvalidAppFile)?;
    }
    let (strategy, why) = choose_strategy(input, platform)?;
    let label = match strategy {
        SyncStrategy::QuickSync => "Quick sync",
        _ => "Pipeline sync",
    };
    if strategy == SyncStrategy::QuickSync {
        let quick = platform
            .map(|p| p.quick_sync_stages(&ctx))
            .unwrap_or_default();
        if let Some(p) = platform.filter(|_| !quick.is_empty()) {
            let (mut stages, gate_note) = gate_before_quick_sync(input)?;
            let rollback = if app.planner().auto_rollback {
                p.rollback_stages(&ctx, &quick)
            } else {
                Vec::new()
            };
            stages.extend(quick);
            stages.extend(rollback.into_iter().map(hidden_rollback));
            check_unique_ids(&stages, &[])?;
            return Ok(Plan {
                strategy,
                summary: format!("{label}, because {why}{gate_note}"),
                stages,
            });
        }
        let missing = match platform {
            None => "the app has no platform plugin".to_owned(),
            Some(p) => format!("the {} plugin has no quick sync stages", p.name()),
        };
        if !app.has_pipeline() {
            return Err(PlanError::NothingToRun { reason: missing });
        }
        let stages = pipeline_stages(input, &ctx)?;
        return Ok(Plan {
            strategy: SyncStrategy::Pipeline,
            summary: format!(
                "Pipeline sync: a quick sync was chosen because {why}, but {missing}, so the pipeline runs"
            ),
            stages,
        });
    }
    Ok(Plan {
        strategy,
        summary: format!("{label}, because {why}"),
        stages: pipeline_stages(input, &ctx)?,
    })
}

/// The pipeline's approval stages with their indexes: the gate that only an admin may skip.
pub fn approval_stages<'a>(app: &'a AppConfig, plugins: &Plugins) -> Vec<(usize, &'a StageConfig)> {
    app.stages()
        .iter()
        .enumerate()
        .filter(|(_, s)| plugins.approvable(&s.name))
        .collect()
}

/// How an error or a summary names the approval stages: their ids (or names).
pub fn gate_names(gate: &[(usize, &StageConfig)]) -> String {
    gate.iter()
        .map(|(index, cfg)| match &cfg.id {
            Some(id) => id.to_string(),
            None => format!("{} (stage {index})", cfg.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The stages a quick sync runs before the platform's: the pipeline's approval stages, unless
/// an admin skipped them; and what the summary says about them.
fn gate_before_quick_sync(input: &PlanInput<'_>) -> Result<(Vec<Stage>, String), PlanError> {
    let gate = approval_stages(input.app, input.plugins);
    if gate.is_empty() {
        return Ok((Vec::new(), String::new()));
    }
    let names = gate_names(&gate);
    if let Some(GateSkip { by, reason }) = &input.trigger.gate_skip {
        return Ok((
            Vec::new(),
            format!("; {by} skipped the approval gate ({names}): {reason}"),
        ));
    }
    let mut stages = Vec::with_capacity(gate.len());
    for (index, cfg) in gate {
        let (mut stage, _) = build_stage(index, cfg, input.plugins)?;
        if let Some(reason) = skip_reason(cfg, input) {
            stage.status = StageStatus::Skipped;
            stage.status_reason = reason;
        }
        stages.push(stage);
    }
    Ok((
        stages,
        format!("; the pipeline's approval gate ({names}) runs first: only an admin may skip it"),
    ))
}

/// The plugin that deploys the app; an error when the app names a platform gannet lacks.
fn platform_plugin<'p>(
    app: &AppConfig,
    plugins: &'p Plugins,
) -> Result<Option<&'p Faces>, PlanError> {
    let Some(name) = app.platform() else {
        return Ok(None);
    };
    match plugins.platform_for(app) {
        Some(p) => Ok(Some(p)),
        None => Err(PlanError::PlatformNotSupported {
            field: platform_field(app, name),
            platform: name.to_owned(),
        }),
    }
}

/// Where the config names its platform.
pub(crate) fn platform_field(app: &AppConfig, platform: &str) -> String {
    if app.plugin_config(platform).is_some() {
        format!("spec.plugins.{platform}")
    } else if app.application().is_some_and(|a| a.plugin.is_some()) {
        "spec.plugin".to_owned()
    } else {
        "kind".to_owned()
    }
}

fn choose_strategy(
    input: &PlanInput<'_>,
    platform: Option<&Faces>,
) -> Result<(SyncStrategy, String), PlanError> {
    let app = input.app;
    let trigger = input.trigger;
    let who = if trigger.commander.is_empty() {
        "a command".to_owned()
    } else {
        trigger.commander.clone()
    };
    if input.plugins.synced_by_its_own_stage(app) {
        // The platform's quick sync is not how this app deploys (PipeCD's custom sync).
        return Ok((
            SyncStrategy::Pipeline,
            "the app syncs with its own commands (CUSTOM_SYNC)".to_owned(),
        ));
    }
    match trigger.strategy {
        SyncStrategy::QuickSync if app.has_pipeline() && app.planner().always_use_pipeline => {
            return Ok((
                SyncStrategy::Pipeline,
                format!("{who} asked for a quick sync, but planner.alwaysUsePipeline is set"),
            ))
        }
        SyncStrategy::QuickSync => {
            return Ok((
                SyncStrategy::QuickSync,
                format!("{who} asked for a quick sync"),
            ))
        }
        SyncStrategy::Pipeline if !app.has_pipeline() => return Err(PlanError::NoPipelineToForce),
        SyncStrategy::Pipeline => {
            return Ok((
                SyncStrategy::Pipeline,
                format!("{who} asked for a pipeline sync"),
            ))
        }
        SyncStrategy::Auto => {}
    }
    if !app.has_pipeline() {
        return Ok((SyncStrategy::QuickSync, "no pipeline is configured".into()));
    }
    if app.planner().always_use_pipeline {
        return Ok((
            SyncStrategy::Pipeline,
            "planner.alwaysUsePipeline is set".into(),
        ));
    }
    if trigger.kind != TriggerKind::OnCommand {
        let matcher = app.commit_matcher();
        let rules = [
            (SyncStrategy::Pipeline, "pipeline", &matcher.pipeline),
            (SyncStrategy::QuickSync, "quickSync", &matcher.quick_sync),
        ];
        for (strategy, field, pattern) in rules {
            if let Some(p) = pattern
                .as_ref()
                .filter(|p| p.is_match(input.commit_message))
            {
                return Ok((
                    strategy,
                    format!(
                        "the commit message matches commitMatcher.{field} {:?}",
                        p.as_str()
                    ),
                ));
            }
        }
    }
    if let Some((strategy, reason)) = platform.and_then(|p| p.determine_strategy(&input.context()))
    {
        if strategy != SyncStrategy::Auto {
            return Ok((strategy, reason));
        }
    }
    if input.running_commit.is_none() {
        return Ok((
            SyncStrategy::QuickSync,
            "this is the app's first deployment".into(),
        ));
    }
    Ok((
        SyncStrategy::Pipeline,
        "a pipeline is configured and nothing asked for a quick sync".into(),
    ))
}

/// The configured stages, skipped ones marked, with each involved plugin's hidden rollback
/// stages after them.
fn pipeline_stages(input: &PlanInput<'_>, ctx: &PlanContext<'_>) -> Result<Vec<Stage>, PlanError> {
    let app = input.app;
    let built = build_stages(app, input.plugins).map_err(first_error)?;
    let mut stages = Vec::with_capacity(built.len());
    let mut involved: Vec<(&Faces, Vec<Stage>)> = Vec::new();
    for ((mut stage, plugin), cfg) in built.into_iter().zip(app.stages()) {
        if let Some(reason) = skip_reason(cfg, input) {
            stage.status = StageStatus::Skipped;
            stage.status_reason = reason;
        }
        match involved.iter_mut().find(|(p, _)| p.name() == plugin.name()) {
            Some((_, own)) => own.push(stage.clone()),
            None => involved.push((plugin, vec![stage.clone()])),
        }
        stages.push(stage);
    }
    if app.planner().auto_rollback {
        for (plugin, own) in &involved {
            let rollback = plugin.rollback_stages(ctx, own);
            stages.extend(rollback.into_iter().map(hidden_rollback));
        }
    }
    check_unique_ids(&stages, app.stages())?;
    Ok(stages)
}

fn first_error(mut errors: Vec<PlanError>) -> PlanError {
    errors.swap_remove(0)
}

fn hidden_rollback(mut stage: Stage) -> Stage {
    stage.rollback = true;
    stage.visible = false;
    stage
}

/// A configured stage as its plugin validated it, and that plugin.
pub(crate) type Built<'p> = (Stage, &'p Faces);

/// Builds every configured stage through its plugin; all the errors when any fails.
pub(crate) fn build_stages<'p>(
    app: &AppConfig,
    plugins: &'p Plugins,
) -> Result<Vec<Built<'p>>, Vec<PlanError>> {
    let mut built = Vec::new();
    let mut errors = Vec::new();
    for (index, cfg) in app.stages().iter().enumerate() {
        match build_stage(index, cfg, plugins) {
            Ok(stage) => built.push(stage),
            Err(e) => errors.push(e),
        }
    }
    let stages: Vec<Stage> = built.iter().map(|(s, _)| s.clone()).collect();
    if errors.is_empty() {
        if let Err(e) = check_unique_ids(&stages, app.stages()) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(built)
    } else {
        Err(errors)
    }
}

fn build_stage<'p>(
    index: usize,
    cfg: &StageConfig,
    plugins: &'p Plugins,
) -> Result<Built<'p>, PlanError> {
    let name = cfg.name.as_str();
    let Some(plugin) = plugins.for_stage(name) else {
        return Err(if PIPECD_STAGES.contains(&name) {
            PlanError::StageNotSupported {
                index,
                name: name.to_owned(),
            }
        } else {
            PlanError::UnknownStage {
                index,
                name: name.to_owned(),
                suggestion: gannet_config::typed::closest(
                    name,
                    plugins.stage_names().chain(PIPECD_STAGES.iter().copied()),
                ),
            }
        });
    };
    let with =
        plugin
            .validate_stage(name, &cfg.with)
            .map_err(|source| PlanError::InvalidStage {
                index,
                name: name.to_owned(),
                source,
            })?;
    let id = cfg.id.clone().unwrap_or_else(|| StageId::by_index(index));
    let mut stage = Stage::planned(id, name, index, with);
    stage.desc = cfg.desc.clone();
    stage.timeout = match cfg.timeout {
        Some(t) => t,
        None => plugin.default_timeout(&stage),
    };
    Ok((stage, plugin))
}

/// Why `cfg` is skipped at plan time, if it is. As PipeCD: paths first, then prefixes.
fn skip_reason(cfg: &StageConfig, input: &PlanInput<'_>) -> Option<String> {
    let skip = &cfg.skip_on;
    // Without a running commit nothing is known to have changed, so paths cannot hold.
    if !skip.paths.is_empty() && input.running_commit.is_some() {
        let all_match = input
            .changed_files
            .iter()
            .all(|f| glob::matches(&skip.paths, f));
        if all_match {
            return Some(if input.changed_files.is_empty() {
                "skipOn.paths: no files changed since the running commit".to_owned()
            } else {
                format!(
                    "skipOn.paths: all {} changed files match",
                    input.changed_files.len()
                )
            });
        }
    }
    skip.commit_message_prefixes
        .iter()
        .find(|p| input.commit_message.starts_with(p.as_str()))
        .map(|p| format!("skipOn.commitMessagePrefixes: the commit message starts with {p:?}"))
}

/// Every stage id appears once. Configured ids are reported at their field.
fn check_unique_ids(stages: &[Stage], configured: &[StageConfig]) -> Result<(), PlanError> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, stage) in stages.iter().enumerate() {
        if seen.insert(stage.id.as_str(), i).is_some() {
            let field = match configured.get(i) {
                Some(cfg) if cfg.id.is_some() && !stage.rollback => {
                    format!("spec.pipeline.stages[{i}].id")
                }
                _ if !stage.rollback && i < configured.len() => {
                    format!("spec.pipeline.stages[{i}]")
                }
                _ => "spec.pipeline".to_owned(),
            };
            return Err(PlanError::DuplicateStageId {
                field,
                id: stage.id.to_string(),
            });
        }
    }
    Ok(())
}
