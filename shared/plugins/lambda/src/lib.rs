//! The Lambda platform plugin: deploys a `LambdaApp` (PipeCD's config and `function.yaml`,
//! unchanged) on the AWS Lambda API.
//!
//! - LAMBDA_SYNC (the quick sync): update the code and configuration, wait for the update,
//!   publish a version, route the alias to it at 100%.
//! - LAMBDA_CANARY_ROLLOUT: update and publish; the alias is left alone.
//! - LAMBDA_PROMOTE `{percent}`: the new version gets `percent`, the previous one the rest
//!   (`RoutingConfig.AdditionalVersionWeights`); 100 clears the routing config.
//! - LAMBDA_ROLLBACK (hidden, added when any of the above is planned): the alias routing saved
//!   before the deployment, and the running commit's configuration, back again.
//!
//! Live state and drift: what the alias serves (its routing, and the configuration and code of
//! the version it points at) against the manifest at the branch head, in two Lambda calls.
//!
//! Every step is idempotent and never sleeps: a function that is still updating gives
//! `Continue`. The alias (PipeCD's `Service` by default) is set per deploy target. Every function
//! gets the `gannet.dev/managed-by`, `gannet.dev/app` and `gannet.dev/commit` tags.
//!
//! An app uses the deploy target its config names (`spec.deployTarget(s)` of an
//! `Application`), or the only one there is; a `LambdaApp` has no field to name one.

mod api;
mod errors;
mod function;
mod gitzip;
mod live;
mod manifest;
mod meta;
mod promote;
mod rollback;
mod rollout;
mod routing;
mod source;
pub mod spec;
mod target;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_config::AppConfig;
use gannet_domain::deployment::Stage;
use gannet_sdk::check::AppFile;
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_options;
use gannet_sdk::targets::{self, Platform};
use serde_json::{json, Value};

pub use errors::ApiError;
pub use gitzip::GitSettings;
pub use manifest::{
    ArtifactKind, ArtifactVersion, CodeSource, FunctionManifest, ManifestError, VpcConfig,
};
pub use routing::AliasRouting;
pub use source::{
    check_function_manifest, managed_tags, SourceError, TAG_APP, TAG_COMMIT, TAG_MANAGED_BY,
};
pub use target::{DeployTarget, DEFAULT_ALIAS};

use crate::rollout::AfterPublish;
use crate::target::Target;

pub const STAGE_SYNC: &str = "LAMBDA_SYNC";
pub const STAGE_CANARY_ROLLOUT: &str = "LAMBDA_CANARY_ROLLOUT";
pub const STAGE_PROMOTE: &str = "LAMBDA_PROMOTE";
pub const STAGE_ROLLBACK: &str = "LAMBDA_ROLLBACK";

/// The quick sync stage's id.
pub const QUICK_SYNC_STAGE_ID: &str = "lambda-sync";
/// The hidden rollback stage's id.
pub const ROLLBACK_STAGE_ID: &str = "lambda-rollback";

/// Runs the Lambda stages against the configured deploy targets.
#[derive(Debug)]
pub struct LambdaPlugin {
    targets: Vec<Target>,
}

impl LambdaPlugin {
    /// A plugin deploying to `targets`, each with credentials from the standard AWS chain.
    pub fn new(targets: Vec<DeployTarget>) -> Self {
        Self {
            targets: targets.into_iter().map(|t| Target::new(t, None)).collect(),
        }
    }

    /// The deploy target `app` uses.
    fn target_for(&self, app: &AppConfig) -> Result<&Target, StepError> {
        const PLATFORM: Platform = Platform {
            title: "Lambda",
            key: "lambda",
            kind: "LambdaApp",
        };
        targets::pick(PLATFORM, &self.targets, app)
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "lambda";

/// The registry's entry: `plugins.lambda.deployTargets`.
pub const SPEC: PluginSpec =
    PluginSpec::platform::<LambdaPlugin>(NAME).preview_credentials(&["roleArn"]);

impl FromSettings for LambdaPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let secret_env = &settings.runtime.secret_env;
        let targets = settings.deploy_targets(|at, t: &DeployTarget| t.check(at, secret_env))?;
        Ok(LambdaPlugin::new(targets))
    }
}

impl Plugin for LambdaPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[
            STAGE_SYNC,
            STAGE_CANARY_ROLLOUT,
            STAGE_PROMOTE,
            STAGE_ROLLBACK,
        ]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("lambda")
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        match name {
            STAGE_PROMOTE => stage_options::promote_percent(with).map(|p| json!({ "percent": p })),
            STAGE_ROLLBACK => Err(StageConfigError::new(
                "",
                "LAMBDA_ROLLBACK is added by gannet to undo a deployment; it cannot be configured",
            )),
            _ => stage_options::none(with),
        }
    }

    /// The config's Lambda fields, and the function manifest they name.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        let default = spec::LambdaInput::default().function_manifest_file;
        AppFile::input_manifest::<spec::LambdaSpec>(app, NAME, "functionManifestFile", &default)
    }

    /// The function manifest must exist and validate: a bad one fails the plan, naming the
    /// file and the field.
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        source::check_app(ctx.app, read)
    }

    fn quick_sync_stages(&self, _ctx: &PlanContext<'_>) -> Vec<Stage> {
        let desc = "Deploy the function and route all traffic to it";
        vec![Stage::of_plugin(
            QUICK_SYNC_STAGE_ID,
            STAGE_SYNC,
            json!({}),
            desc,
        )]
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let desc = "Restore the alias routing and the running commit's function";
        let forward = promote::is_forward;
        Stage::rollback_after(planned, forward, ROLLBACK_STAGE_ID, STAGE_ROLLBACK, desc)
            .into_iter()
            .collect()
    }
}

impl Presenter for LambdaPlugin {
    fn summary(&self, stage: &Stage) -> String {
        match stage.name.as_str() {
            STAGE_PROMOTE => stage_options::promote_summary(&stage.with),
            _ => String::new(),
        }
    }
}

#[async_trait]
impl Steps for LambdaPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let app = source::load_app_config(ctx.app_dir, &ctx.deployment.app)
            .map_err(|e| StepError::permanent(e.to_string()))?;
        let target = self.target_for(&app)?;
        let api = target.api().await;
        match stage.name.as_str() {
            STAGE_SYNC => rollout::run(&ctx, &target.config, api, AfterPublish::RouteAll).await,
            STAGE_CANARY_ROLLOUT => {
                rollout::run(&ctx, &target.config, api, AfterPublish::KeepAlias).await
            }
            STAGE_PROMOTE => {
                let percent = stage_options::promote_percent(&stage.with).map_err(|e| {
                    StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
                })?;
                promote::run(&ctx, &target.config, api, percent).await
            }
            STAGE_ROLLBACK => rollback::run(&ctx, &target.config, api).await,
            other => Err(StepError::permanent(format!(
                "the lambda plugin does not run stage {other}"
            ))),
        }
    }
}

#[async_trait]
impl LiveStates for LambdaPlugin {
    /// What the alias serves against the manifest at the branch head (see `live`).
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let target = self.target_for(ctx.app)?;
        let api = target.api().await;
        live::read(
            api,
            &target.config.alias,
            ctx.app,
            ctx.app_id.dir(),
            ctx.app_dir,
        )
        .await
        .map(Live::Read)
    }
}

#[cfg(test)]
mod tests;
