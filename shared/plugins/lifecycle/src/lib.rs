//! The lifecycle phases, Keptn's model on gannet's stages: `PRE_DEPLOYMENT` runs before any
//! platform stage and `POST_DEPLOYMENT` after the last one ([`gannet_sdk::lifecycle`] reads
//! them from the app's `app.gannet.yaml` and the planner places them).
//!
//! A phase's items all run at the same time: each **task** is a SCRIPT_RUN stage and each
//! **evaluation** an ANALYSIS stage, run through the plugins that own those stages (built
//! before this one, [`gannet_sdk::registry::PluginSettings::earlier`]). One step of the phase
//! runs one step of every unfinished item, so the items' jobs and measurements proceed side by
//! side; the phase comes back when the soonest of them wants to.
//!
//! **Each item has its own status and log.** Its record (`item.<name>` in the stage's
//! metadata: status, when it started and ended, why it failed) is saved before anything
//! depends on it; the item's own metadata sits under `item.<name>.` (its job, its
//! measurements), and each of its log lines starts with `[task <name>]` or
//! `[evaluation <name>]`. An item's steps are as safe to repeat as its plugin's: a repeated
//! phase step finds the job started and the measurement taken.
//!
//! The phase succeeds when every item has. When one fails, the others are stopped (their jobs
//! killed) and the phase fails with the item's reason. A failed pre-deployment phase ends the
//! deployment before any platform stage (and without rollback); a failed post-deployment phase
//! rolls back when `autoRollback` is on, as any failed stage does.

mod record;
mod scoped;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_domain::deployment::{Deployment, Stage, StageStatus};
use gannet_domain::ids::StageId;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::JobRunner;
use gannet_sdk::lifecycle::PhaseKind;
use gannet_sdk::plugin::{
    Faces, Plugin, Plugins, Presenter, StageConfigError, StageResult, StepContext, StepError,
    StepIo, StepOutcome, Steps, StopContext,
};
use gannet_sdk::presentation::Detail;
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::record::{items, ItemRecord, ItemStatus, Records};
use crate::scoped::ScopedIo;

/// The stage a task runs as.
const TASK_STAGE: &str = "SCRIPT_RUN";
/// The stage an evaluation runs as.
const EVALUATION_STAGE: &str = "ANALYSIS";

/// A task or an evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Task,
    Evaluation,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Evaluation => "evaluation",
        }
    }

    fn stage(self) -> &'static str {
        match self {
            Self::Task => TASK_STAGE,
            Self::Evaluation => EVALUATION_STAGE,
        }
    }

    fn list(self) -> &'static str {
        match self {
            Self::Task => "tasks",
            Self::Evaluation => "evaluations",
        }
    }
}

/// One item of a phase as the stage stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemOptions {
    name: String,
    with: Value,
}

/// A phase stage's `with`: `{"tasks": [...], "evaluations": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseOptions {
    #[serde(default)]
    tasks: Vec<ItemOptions>,
    #[serde(default)]
    evaluations: Vec<ItemOptions>,
}

impl PhaseOptions {
    fn parse(with: &Value) -> Result<Self, StageConfigError> {
        gannet_config::typed::from_value(with, "")
            .map_err(|e| StageConfigError::new(e.path, e.message))
    }

    /// Every item, tasks first, each with its kind and its field in `with`.
    fn items(&self) -> impl Iterator<Item = (ItemKind, usize, &ItemOptions)> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, o)| (ItemKind::Task, i, o))
            .chain(
                self.evaluations
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (ItemKind::Evaluation, i, o)),
            )
    }
}

/// Runs PRE_DEPLOYMENT and POST_DEPLOYMENT stages through the plugins that run SCRIPT_RUN and
/// ANALYSIS.
#[derive(Clone, Debug, Default)]
pub struct LifecyclePlugin {
    plugins: Plugins,
}

impl LifecyclePlugin {
    /// A plugin whose phases run their items through `plugins`.
    pub fn new(plugins: Plugins) -> Self {
        Self { plugins }
    }

    fn runner(&self, kind: ItemKind) -> Result<&Faces, String> {
        self.plugins.for_stage(kind.stage()).ok_or_else(|| {
            format!(
                "no compiled-in plugin runs {} stages, so a phase cannot run {}",
                kind.stage(),
                kind.list()
            )
        })
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "lifecycle";

/// The stage that runs the pre-deployment phase, before any platform stage.
pub const STAGE_PRE_DEPLOYMENT: &str = "PRE_DEPLOYMENT";
/// The stage that runs the post-deployment phase, after the last deploying stage.
pub const STAGE_POST_DEPLOYMENT: &str = "POST_DEPLOYMENT";

/// The registry's entry. It takes no settings: tasks get `plugins.script-run`'s and
/// evaluations `plugins.analysis`'s.
pub const SPEC: PluginSpec = PluginSpec::stages::<LifecyclePlugin>(NAME);

impl FromSettings for LifecyclePlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        settings.none()?;
        Ok(LifecyclePlugin::new(settings.earlier.clone()))
    }
}

/// The stage an item runs as: `<phase>/<name>`, of the item's plugin, started when the item
/// started, with the item's own metadata.
fn item_stage(
    phase: &Stage,
    kind: ItemKind,
    item: &ItemOptions,
    record: Option<&ItemRecord>,
) -> Stage {
    let id =
        StageId::parse(&format!("{}/{}", phase.id, item.name)).unwrap_or_else(|_| phase.id.clone());
    let mut stage = Stage::planned(id, kind.stage(), phase.index, item.with.clone());
    stage.timeout = phase.timeout;
    if let Some(r) = record {
        stage.status = StageStatus::Running;
        stage.started_at = Some(r.started_at);
        stage.metadata = record::item_metadata(&phase.metadata, &item.name);
    }
    stage
}

impl Plugin for LifecyclePlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_PRE_DEPLOYMENT, STAGE_POST_DEPLOYMENT]
    }

    fn phase_stage(&self, kind: PhaseKind) -> Option<&'static str> {
        Some(match kind {
            PhaseKind::Pre => STAGE_PRE_DEPLOYMENT,
            PhaseKind::Post => STAGE_POST_DEPLOYMENT,
        })
    }

    /// Each item through its plugin; errors name the item's field (`tasks[1].with.run`).
    fn validate_stage(&self, _name: &str, with: &Value) -> Result<Value, StageConfigError> {
        let mut opts = PhaseOptions::parse(with)?;
        let fields = |kind: ItemKind, i: usize| format!("{}[{i}]", kind.list());
        let mut checked = Vec::new();
        for (kind, i, item) in opts.items() {
            let at = fields(kind, i);
            if kind == ItemKind::Task && item.with.get("onRollback").is_some() {
                return Err(StageConfigError::new(
                    format!("{at}.with.onRollback"),
                    "a task has no onRollback: a failed post-deployment phase rolls back the platform stages",
                ));
            }
            let runner = self
                .runner(kind)
                .map_err(|m| StageConfigError::new(at.clone(), m))?;
            let with = runner
                .validate_stage(kind.stage(), &item.with)
                .map_err(|e| {
                    let field = if e.field.is_empty() {
                        format!("{at}.with")
                    } else {
                        gannet_config::typed::join_path(&format!("{at}.with"), &e.field)
                    };
                    StageConfigError {
                        field,
                        message: e.message,
                        unsupported: e.unsupported,
                    }
                })?;
            checked.push(with);
        }
        for (item, with) in opts
            .tasks
            .iter_mut()
            .chain(opts.evaluations.iter_mut())
            .zip(checked)
        {
            item.with = with;
        }
        Ok(gannet_sdk::stage_options::to_value(&opts))
    }

    /// The longest of the items' own timeouts.
    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        let Ok(opts) = PhaseOptions::parse(&stage.with) else {
            return GoDuration::from_secs(6 * 3600);
        };
        opts.items()
            .filter_map(|(kind, _, item)| {
                let runner = self.runner(kind).ok()?;
                Some(runner.default_timeout(&item_stage(stage, kind, item, None)))
            })
            .max()
            .unwrap_or(GoDuration::from_secs(3600))
    }
}

impl Presenter for LifecyclePlugin {
    /// The phase's started items in the config's order (tasks, then evaluations), then each
    /// item's own details as its plugin presents them (an evaluation's measurements).
    fn present(&self, stage: &Stage) -> Vec<Detail> {
        // The stored `with` is what validate_stage wrote.
        let Ok(opts) = PhaseOptions::from_stored(&stage.with) else {
            return Vec::new();
        };
        let records = items(&stage.metadata);
        let started: Vec<_> = opts
            .items()
            .filter_map(|(kind, _, item)| Some((kind, item, records.get(&item.name)?)))
            .collect();
        if started.is_empty() {
            return Vec::new();
        }
        let rows = started.iter().map(|(_, item, r)| {
            let took = r
                .completed_at
                .map(|end| end.since(r.started_at).to_string());
            vec![
                item.name.clone(),
                r.kind.as_str().to_owned(),
                r.status.as_str().to_owned(),
                took.unwrap_or_default(),
                r.reason.clone(),
            ]
        });
        let table = Detail::Table {
            title: "Items".into(),
            columns: ["ITEM", "KIND", "STATUS", "TOOK", "REASON"]
                .map(str::to_owned)
                .to_vec(),
            rows: rows.collect(),
        };
        let shown = started.iter().flat_map(|&(kind, item, record)| {
            let details = self
                .runner(kind)
                .map(|runner| runner.present(&item_stage(stage, kind, item, Some(record))));
            details.into_iter().flatten().map(move |d| {
                d.titled(|title| format!("{title} of {} {}", kind.as_str(), item.name))
            })
        });
        std::iter::once(table).chain(shown).collect()
    }
}

#[async_trait]
impl Steps for LifecyclePlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let phase = ctx.stage;
        let opts = PhaseOptions::from_stored(&phase.with)?;
        let mut records = record::read_all(&phase.metadata, &opts)?;
        // Every item starts in the first step, at the same time.
        let fresh: Records = opts
            .items()
            .filter(|(_, _, item)| !records.contains_key(&item.name))
            .map(|(kind, _, item)| (item.name.clone(), ItemRecord::running(kind, ctx.now)))
            .collect();
        if !fresh.is_empty() {
            ctx.io.save_metadata(record::entries(&fresh)).await?;
            let names: Vec<String> = opts
                .items()
                .map(|(kind, _, i)| format!("{} {}", kind.as_str(), i.name))
                .collect();
            ctx.io
                .log(&format!(
                    "starting {} at once: {}",
                    names.len(),
                    names.join(", ")
                ))
                .await;
            records.extend(fresh);
        }
        let mut next: Option<GoDuration> = None;
        let mut retry: Option<StepError> = None;
        let mut finished = Records::new();
        for (kind, _, item) in opts.items() {
            let Some(rec) = records.get(&item.name) else {
                continue;
            };
            if rec.status != ItemStatus::Running {
                continue;
            }
            let stage = item_stage(phase, kind, item, Some(rec));
            let io = ScopedIo::new(ctx.io, kind, &item.name, &phase.id);
            let runner = self.runner(kind).map_err(StepError::permanent)?;
            let outcome = runner
                .steps()?
                .execute_step(StepContext {
                    deployment: ctx.deployment,
                    stage: &stage,
                    app_dir: ctx.app_dir,
                    running_app_dir: ctx.running_app_dir,
                    now: ctx.now,
                    io: &io,
                    jobs: ctx.jobs,
                })
                .await;
            let ended = match outcome {
                Ok(StepOutcome::Continue { after }) => {
                    next = Some(next.map_or(after, |n| n.min(after)));
                    continue;
                }
                Ok(StepOutcome::Done(StageResult::Success | StageResult::Exited { .. })) => rec
                    .clone()
                    .ended(ItemStatus::Success, String::new(), ctx.now),
                Ok(StepOutcome::Done(StageResult::Failure { reason })) => {
                    rec.clone().ended(ItemStatus::Failure, reason, ctx.now)
                }
                Err(e @ StepError::Transient { .. }) => {
                    retry.get_or_insert(e);
                    continue;
                }
                Err(StepError::Permanent(e)) => rec.clone().ended(
                    ItemStatus::Failure,
                    gannet_domain::report::error_chain(&*e),
                    ctx.now,
                ),
            };
            let line = match ended.status {
                ItemStatus::Success => "succeeded".to_owned(),
                _ => format!("failed: {}", ended.reason),
            };
            io.log(&line).await;
            finished.insert(item.name.clone(), ended);
        }
        if !finished.is_empty() {
            ctx.io.save_metadata(record::entries(&finished)).await?;
            records.extend(finished);
        }
        let first_failure = opts.items().find_map(|(_, _, item)| {
            let r = records.get(&item.name)?;
            (r.status == ItemStatus::Failure).then_some((&item.name, r))
        });
        if let Some((name, failed)) = first_failure {
            let reason = format!("{} {name} failed: {}", failed.kind.as_str(), failed.reason);
            let scope = Scope {
                deployment: ctx.deployment,
                io: ctx.io,
                jobs: ctx.jobs,
            };
            let why = format!("{} {name} failed", failed.kind.as_str());
            let stopped: Records = self
                .stop_running(phase, &opts, &records, &scope)
                .await?
                .into_iter()
                .map(|(n, r)| (n, r.ended(ItemStatus::Stopped, why.clone(), ctx.now)))
                .collect();
            if !stopped.is_empty() {
                ctx.io.save_metadata(record::entries(&stopped)).await?;
            }
            ctx.io.log(&reason).await;
            return Ok(StepOutcome::Done(StageResult::Failure { reason }));
        }
        if let Some(e) = retry {
            return Err(e);
        }
        match next {
            Some(after) => Ok(StepOutcome::Continue { after }),
            None => {
                ctx.io
                    .log(&format!("all {} items succeeded", records.len()))
                    .await;
                Ok(StepOutcome::Done(StageResult::Success))
            }
        }
    }

    /// A cancel or a timeout stops every running item (a task's job is killed).
    async fn stop(&self, ctx: StopContext<'_>) -> Result<(), StepError> {
        let scope = Scope {
            deployment: ctx.deployment,
            io: ctx.io,
            jobs: ctx.jobs,
        };
        let opts = PhaseOptions::from_stored(&ctx.stage.with)?;
        let records = record::read_all(&ctx.stage.metadata, &opts)?;
        self.stop_running(ctx.stage, &opts, &records, &scope)
            .await
            .map(|_| ())
    }
}

impl PhaseOptions {
    fn from_stored(with: &Value) -> Result<Self, StepError> {
        Self::parse(with).map_err(|e| StepError::permanent(format!("invalid with.{e}")))
    }
}

/// What stopping items needs of a step or a stop.
struct Scope<'a> {
    deployment: &'a Deployment,
    io: &'a dyn StepIo,
    jobs: &'a dyn JobRunner,
}

impl LifecyclePlugin {
    /// Stops the items `records` has running through their plugins (safe to repeat); returns
    /// them.
    async fn stop_running(
        &self,
        phase: &Stage,
        opts: &PhaseOptions,
        records: &Records,
        scope: &Scope<'_>,
    ) -> Result<Records, StepError> {
        let mut stopped = Records::new();
        for (kind, _, item) in opts.items() {
            let Some(rec) = records.get(&item.name) else {
                continue;
            };
            if rec.status != ItemStatus::Running {
                continue;
            }
            let stage = item_stage(phase, kind, item, Some(rec));
            let io = ScopedIo::new(scope.io, kind, &item.name, &phase.id);
            self.runner(kind)
                .map_err(StepError::permanent)?
                .steps()?
                .stop(StopContext {
                    deployment: scope.deployment,
                    stage: &stage,
                    io: &io,
                    jobs: scope.jobs,
                })
                .await?;
            io.log("stopped").await;
            stopped.insert(item.name.clone(), rec.clone());
        }
        Ok(stopped)
    }
}

/// The finished items of a phase stage as stages of their own plugins (for the next
/// deployment's PREVIOUS comparisons): status, start and metadata as the item left them.
fn finished_item_stages(phase: &Stage) -> Vec<Stage> {
    let Ok(opts) = PhaseOptions::parse(&phase.with) else {
        return Vec::new();
    };
    let records = record::items(&phase.metadata);
    opts.items()
        .filter_map(|(kind, _, item)| {
            let rec = records.get(&item.name)?;
            let mut stage = item_stage(phase, kind, item, Some(rec));
            stage.status = match rec.status {
                ItemStatus::Success => StageStatus::Success,
                ItemStatus::Failure => StageStatus::Failure,
                ItemStatus::Stopped => StageStatus::Cancelled,
                ItemStatus::Running => return None,
            };
            stage.completed_at = rec.completed_at;
            Some(stage)
        })
        .collect()
}

#[cfg(test)]
mod tests;
