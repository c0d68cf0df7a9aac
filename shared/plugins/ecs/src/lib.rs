//! The ECS platform plugin: deploys an `ECSApp` (PipeCD's config, task definition and service
//! definition, unchanged) through task sets on a service with the EXTERNAL deployment
//! controller, and routes traffic between the primary and canary target groups through ELBv2.
//!
//! - ECS_SYNC (the quick sync): the new task definition as the only task set, at 100%.
//! - ECS_CANARY_ROLLOUT `{scale}`: a canary task set on the canary target group.
//! - ECS_PRIMARY_ROLLOUT: a new primary task set; then the old primary goes. The canary stays.
//! - ECS_TRAFFIC_ROUTING `{primary|canary}`: the weights of every listener rule forwarding to
//!   the pair.
//! - ECS_CANARY_CLEAN: the canary task set goes, once no traffic reaches it.
//! - ECS_ROLLBACK (hidden, added when any of the above is planned): weights 100/0, the running
//!   commit's service and task definition as the only task set.
//!
//! Every step is idempotent and never sleeps: a task set that is not steady yet gives
//! `Continue`. A desired count of 0 or none in Git is never applied, leaving autoscaling alone.
//! Every resource gets the `gannet.dev/managed-by`, `gannet.dev/app` and `gannet.dev/commit`
//! tags; task sets also `gannet.dev/variant`.
//!
//! Live state and drift: the service, its task sets and the serving task definition against the
//! manifests at the branch head, in two ECS calls (see `drift`).
//!
//! An app uses the deploy target its config names (`spec.deployTarget(s)` of an
//! `Application`), or the only one there is.

mod api;
mod drift;
mod errors;
mod live;
pub mod manifest;
mod meta;
mod rollback;
mod rollout;
mod routing;
mod source;
pub mod spec;
mod step;
mod sync;
mod target;
mod traffic;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_config::{AppConfig, AppKind};
use gannet_domain::deployment::Stage;
use gannet_plugin_aws_common::check_target;
use gannet_sdk::check::AppFile;
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_options;
use gannet_sdk::targets::{self, Platform};
use serde_json::{json, Value};

pub use errors::ApiError;
pub use source::{
    managed_tags, SourceError, TAG_APP, TAG_COMMIT, TAG_MANAGED_BY, TAG_REGISTERED_BY, TAG_VARIANT,
};
pub use target::DeployTarget;

use crate::meta::Meta;
use crate::step::Step;
use crate::target::Target;

pub const STAGE_SYNC: &str = "ECS_SYNC";
pub const STAGE_CANARY_ROLLOUT: &str = "ECS_CANARY_ROLLOUT";
pub const STAGE_PRIMARY_ROLLOUT: &str = "ECS_PRIMARY_ROLLOUT";
pub const STAGE_TRAFFIC_ROUTING: &str = "ECS_TRAFFIC_ROUTING";
pub const STAGE_CANARY_CLEAN: &str = "ECS_CANARY_CLEAN";
pub const STAGE_ROLLBACK: &str = "ECS_ROLLBACK";

/// The stages that change something; ECS_ROLLBACK undoes them.
pub(crate) const FORWARD_STAGES: [&str; 5] = [
    STAGE_SYNC,
    STAGE_CANARY_ROLLOUT,
    STAGE_PRIMARY_ROLLOUT,
    STAGE_TRAFFIC_ROUTING,
    STAGE_CANARY_CLEAN,
];

/// The quick sync stage's id.
pub const QUICK_SYNC_STAGE_ID: &str = "ecs-sync";
/// The hidden rollback stage's id.
pub const ROLLBACK_STAGE_ID: &str = "ecs-rollback";

/// Runs the ECS stages against the configured deploy targets.
#[derive(Debug)]
pub struct EcsPlugin {
    targets: Vec<Target>,
}

impl EcsPlugin {
    /// A plugin deploying to `targets`, each with credentials from the standard AWS chain.
    pub fn new(targets: Vec<DeployTarget>) -> Self {
        Self {
            targets: targets.into_iter().map(|t| Target::new(t, None)).collect(),
        }
    }

    /// The deploy target `app` uses.
    fn target_for(&self, app: &AppConfig) -> Result<&Target, StepError> {
        const PLATFORM: Platform = Platform {
            title: "ECS",
            key: "ecs",
            kind: "ECSApp",
        };
        targets::pick(PLATFORM, &self.targets, app)
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "ecs";

/// The registry's entry: `plugins.ecs.deployTargets`.
pub const SPEC: PluginSpec =
    PluginSpec::platform::<EcsPlugin>(NAME).preview_credentials(&["roleArn"]);

impl FromSettings for EcsPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let targets =
            settings.deploy_targets(|at, t: &DeployTarget| check_target(at, t.fields()))?;
        Ok(EcsPlugin::new(targets))
    }
}

impl Plugin for EcsPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[
            STAGE_SYNC,
            STAGE_CANARY_ROLLOUT,
            STAGE_PRIMARY_ROLLOUT,
            STAGE_TRAFFIC_ROUTING,
            STAGE_CANARY_CLEAN,
            STAGE_ROLLBACK,
        ]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("ecs")
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        match name {
            STAGE_CANARY_ROLLOUT => {
                rollout::canary_options(with).map(|scale| serde_json::json!({ "scale": scale }))
            }
            STAGE_TRAFFIC_ROUTING => routing::options(with).map(routing::options_value),
            STAGE_ROLLBACK => Err(StageConfigError::new(
                "",
                "ECS_ROLLBACK is added by gannet to undo a deployment; it cannot be configured",
            )),
            _ => stage_options::none(with),
        }
    }

    /// The config's ECS fields, and the task and service definitions they name.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        if app.kind == AppKind::Application {
            return Ok(Vec::new());
        }
        let input = app.platform_spec::<spec::EcsSpec>()?.input;
        let default = spec::EcsInput::default();
        let mut files = Vec::new();
        if !input.is_standalone_task() {
            files.push(AppFile::document(
                "spec.input.serviceDefinitionFile",
                &input.service_definition_file,
                "",
            ));
        }
        files.push(AppFile::document(
            "spec.input.taskDefinitionFile",
            &input.task_definition_file,
            &default.task_definition_file,
        ));
        Ok(files)
    }

    /// The task and service definitions must exist and validate, and the target groups must
    /// name a container port of the task definition: a bad one fails the plan, naming the file
    /// and the field.
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        source::check_app(ctx.app, read)
    }

    fn quick_sync_stages(&self, _ctx: &PlanContext<'_>) -> Vec<Stage> {
        let desc = "Deploy the task definition as the service's only task set, with all traffic";
        vec![Stage::of_plugin(
            QUICK_SYNC_STAGE_ID,
            STAGE_SYNC,
            json!({}),
            desc,
        )]
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let desc = "Restore the routing, the running commit's service and task definition, and remove the canary";
        let forward = rollback::is_forward;
        Stage::rollback_after(planned, forward, ROLLBACK_STAGE_ID, STAGE_ROLLBACK, desc)
            .into_iter()
            .collect()
    }
}

impl Presenter for EcsPlugin {
    fn summary(&self, stage: &Stage) -> String {
        match stage.name.as_str() {
            STAGE_CANARY_ROLLOUT => rollout::canary_options(&stage.with)
                .map_or_else(|_| String::new(), |scale| format!("scale {scale}%")),
            STAGE_TRAFFIC_ROUTING => routing::options(&stage.with).map_or_else(
                |_| String::new(),
                |w| {
                    stage_options::traffic_summary(&[
                        ("primary", w.primary.into()),
                        ("canary", w.canary.into()),
                    ])
                },
            ),
            _ => String::new(),
        }
    }
}

#[async_trait]
impl Steps for EcsPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let d = ctx.deployment;
        let stage = ctx.stage;
        let rolling_back = stage.name == STAGE_ROLLBACK;
        if rolling_back && rollback::started(&d.stages).is_empty() {
            ctx.io
                .log("No ECS stage of this deployment started; nothing to roll back")
                .await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
        let (dir, commit) = if rolling_back {
            match (ctx.running_app_dir, d.running_commit.as_ref()) {
                (Some(dir), Some(commit)) => (dir, commit.clone()),
                _ => {
                    let reason = "cannot roll back: this is the app's first deployment, so there is no earlier commit to return to; the ECS service is left as this deployment made it".to_owned();
                    ctx.io.log(&reason).await;
                    return Ok(StepOutcome::Done(StageResult::Failure { reason }));
                }
            }
        } else {
            (ctx.app_dir, d.commit.sha.clone())
        };
        let at = |e: SourceError| {
            let prefix = if rolling_back {
                format!("at the running commit {}: ", commit.short())
            } else {
                String::new()
            };
            StepError::permanent(format!("{prefix}{e}"))
        };
        let app = source::load_app_config(dir, &d.app).map_err(at)?;
        let desired = source::load(dir, d.app.dir(), &app).map_err(at)?;
        let target = self.target_for(&app)?;
        let api = target.api().await;
        let mut step = Step {
            ctx: &ctx,
            api,
            meta: Meta::new(ctx.io, stage),
            desired,
            commit,
        };
        match stage.name.as_str() {
            STAGE_SYNC => sync::run(&mut step).await,
            STAGE_CANARY_ROLLOUT => {
                let scale = rollout::canary_options(&stage.with).map_err(|e| {
                    StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
                })?;
                rollout::canary(&mut step, scale).await
            }
            STAGE_PRIMARY_ROLLOUT => rollout::primary(&mut step).await,
            STAGE_TRAFFIC_ROUTING => {
                let weights = routing::options(&stage.with).map_err(|e| {
                    StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
                })?;
                traffic::route(&mut step, weights).await
            }
            STAGE_CANARY_CLEAN => traffic::clean(&mut step).await,
            STAGE_ROLLBACK => rollback::run(&mut step).await,
            other => Err(StepError::permanent(format!(
                "the ecs plugin does not run stage {other}"
            ))),
        }
    }
}

#[async_trait]
impl LiveStates for EcsPlugin {
    /// What the service serves against the manifests at the branch head (see `drift`).
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let target = self.target_for(ctx.app)?;
        let read = drift::read(target.api().await, ctx.app, ctx.app_id.dir(), ctx.app_dir).await?;
        Ok(read.map_or(Live::NotRead, Live::Read))
    }
}

#[cfg(test)]
mod tests;
