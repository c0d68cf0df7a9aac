//! Cloud Run deployments of PipeCD's `CloudRunApp` (and of an `Application` with
//! `spec.plugins.cloudrun`), unchanged, through the Cloud Run Admin API v2.
//!
//! - **CLOUDRUN_SYNC** (the quick sync): the service gets the commit's template as a revision
//!   named as PipeCD names it (`<service>-<image tag>-<commit7>`), and once that revision is
//!   ready, 100% of the traffic.
//! - **CLOUDRUN_PROMOTE** `{percent}`: the commit's revision (made first if it is not there)
//!   gets `percent`, the running commit's revision the rest.
//! - **CLOUDRUN_ROLLBACK** (hidden): all traffic back on the running commit's revision, made
//!   again from the running commit's manifest if it is gone.
//!
//! Each step does one write at most and never waits: operations and revisions are polled by
//! `Continue` across steps (see `converge`). Live state and drift: one GET of the service,
//! compared with the manifest at the branch head (see `live`).
//!
//! The client is a small typed REST client (`api`), not Google's generated crate: the README
//! says why, with the numbers.

mod api;
mod auth;
mod converge;
mod live;
pub mod manifest;
pub mod spec;
mod target;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use gannet_config::typed::FieldError;
use gannet_config::AppConfig;
use gannet_domain::deployment::Stage;
use gannet_domain::ids::AppId;
use gannet_domain::GoDuration;
use gannet_sdk::check::AppFile;
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_meta::StageMeta;
use gannet_sdk::stage_options;
use gannet_sdk::targets::{self, Platform};
use gannet_sdk::tree::{load_app_config, read_app_file};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

pub use converge::{
    Split, LABEL_APPLICATION, LABEL_COMMIT, LABEL_MANAGED_BY, LABEL_PIPED, LABEL_REVISION,
    MANAGED_BY,
};
pub use manifest::{revision_name, ServiceManifest};
pub use target::{DeployTarget, WorkloadIdentity};

use crate::api::Api;
use crate::auth::Auth;
use crate::converge::Want;
use crate::spec::CloudRunInput;

pub const STAGE_SYNC: &str = "CLOUDRUN_SYNC";
pub const STAGE_PROMOTE: &str = "CLOUDRUN_PROMOTE";
pub const STAGE_ROLLBACK: &str = "CLOUDRUN_ROLLBACK";

/// The quick sync stage's id.
pub const QUICK_SYNC_STAGE_ID: &str = "cloudrun-sync";
/// The hidden rollback stage's id.
pub const ROLLBACK_STAGE_ID: &str = "cloudrun-rollback";

const PLATFORM: Platform = Platform {
    title: "Cloud Run",
    key: "cloudrun",
    kind: "CloudRunApp",
};

/// `pipecd-dev-piped`'s value: gannet has no piped.
const PIPED: &str = "gannet";

/// A deploy target and its API client, made on first use.
struct Target {
    config: DeployTarget,
    aws: Option<SharedCredentialsProvider>,
    api: OnceCell<Arc<Api>>,
}

impl targets::Named for Target {
    fn name(&self) -> &str {
        &self.config.name
    }
}

impl Target {
    async fn api(&self) -> Result<Arc<Api>, StepError> {
        self.api
            .get_or_try_init(|| async {
                let http = api::http_client().map_err(StepError::permanent)?;
                let auth = Auth::for_target(&self.config, self.aws.clone())
                    .map_err(StepError::permanent)?;
                Ok(Arc::new(Api::new(&self.config, http, auth)))
            })
            .await
            .cloned()
    }
}

/// Runs the Cloud Run stages on the configured deploy targets.
pub struct CloudRunPlugin {
    targets: Vec<Target>,
}

impl std::fmt::Debug for CloudRunPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .targets
            .iter()
            .map(|t| t.config.name.as_str())
            .collect();
        f.debug_struct("CloudRunPlugin")
            .field("targets", &names)
            .finish()
    }
}

impl CloudRunPlugin {
    pub fn new(targets: Vec<DeployTarget>) -> Self {
        Self::with_aws_credentials(targets, None)
    }

    /// With fixed AWS credentials for workload identity federation (tests); the standard AWS
    /// chain otherwise.
    pub fn with_aws_credentials(
        targets: Vec<DeployTarget>,
        aws: Option<SharedCredentialsProvider>,
    ) -> Self {
        Self {
            targets: targets
                .into_iter()
                .map(|config| Target {
                    config,
                    aws: aws.clone(),
                    api: OnceCell::new(),
                })
                .collect(),
        }
    }

    async fn api_for(&self, app: &AppConfig) -> Result<Arc<Api>, StepError> {
        targets::pick(PLATFORM, &self.targets, app)?.api().await
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "cloudrun";

/// The registry's entry: `plugins.cloudrun.deployTargets`.
pub const SPEC: PluginSpec = PluginSpec::platform::<CloudRunPlugin>(NAME)
    .preview_credentials(&["credentialsFile", "workloadIdentity"]);

impl FromSettings for CloudRunPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let targets = settings.deploy_targets(|at, t: &DeployTarget| t.check(at))?;
        Ok(CloudRunPlugin::new(targets))
    }
}

/// The manifest file the app names, and the config field that names it.
fn manifest_file(app: &AppConfig) -> (String, String) {
    let (named, field) = app.input_field(NAME, "serviceManifestFile");
    let file = named.map_or_else(
        || CloudRunInput::default().service_manifest_file,
        str::to_owned,
    );
    (file, field)
}

/// The app's service manifest; `read` gives a file by its path in the app's directory, or why
/// it cannot.
fn manifest_of(
    app: &AppConfig,
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<ServiceManifest, AppFileError> {
    let (file, named_by) = manifest_file(app);
    let rel = file.trim_start_matches("./");
    let text = read(rel).map_err(|message| AppFileError {
        named_by: named_by.clone(),
        file: rel.to_owned(),
        line: None,
        field: String::new(),
        message,
        unsupported: false,
    })?;
    ServiceManifest::parse(&named_by, rel, &text)
}

/// The app config and its service manifest in `dir` (a checkout of some commit), read through
/// gannet's checked reader: no link (nor chain of links) out of the app, no path out of it, no
/// huge file.
fn load_at(dir: &Path, app: &AppId) -> Result<(AppConfig, ServiceManifest), String> {
    let config = load_app_config(dir, app).map_err(|e| e.to_string())?;
    let manifest =
        manifest_of(&config, |rel| read_app_file(dir, rel)).map_err(|e| e.to_string())?;
    Ok((config, manifest))
}

/// The service as a commit's manifest wants it, with its revision and gannet's labels.
fn want(app: &AppId, manifest: &ServiceManifest, commit: &str, traffic: Option<Split>) -> Want {
    let revision = revision_name(&manifest.name, &manifest.image, commit);
    let mut body = manifest.body.clone();
    let labels = [
        (LABEL_MANAGED_BY, MANAGED_BY.to_owned()),
        (LABEL_PIPED, PIPED.to_owned()),
        (LABEL_APPLICATION, app.label_value(true)),
        (LABEL_COMMIT, commit.to_owned()),
    ];
    for (k, v) in &labels {
        body["labels"][*k] = json!(v);
        body["template"]["labels"][*k] = json!(v);
    }
    body["template"]["labels"][LABEL_REVISION] = json!(revision);
    body["template"]["revision"] = json!(revision);
    Want {
        service: manifest.name.clone(),
        traffic: traffic.unwrap_or_else(|| Split::all(&revision)),
        revision,
        body,
    }
}

/// True for a stage of this plugin that changes the service (not the rollback).
fn is_forward(stage: &Stage) -> bool {
    !stage.rollback && matches!(stage.name.as_str(), STAGE_SYNC | STAGE_PROMOTE)
}

impl Plugin for CloudRunPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_SYNC, STAGE_PROMOTE, STAGE_ROLLBACK]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("cloudrun")
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        match name {
            STAGE_PROMOTE => {
                stage_options::promote_percent(with).map(|p| json!({ "percent": p }))
            }
            STAGE_ROLLBACK => Err(StageConfigError::new(
                "",
                "CLOUDRUN_ROLLBACK is added by gannet to undo a deployment; it cannot be configured",
            )),
            _ => stage_options::none(with),
        }
    }

    /// The config's Cloud Run fields, and the service manifest they name.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        let default = CloudRunInput::default().service_manifest_file;
        AppFile::input_manifest::<spec::CloudRunSpec>(app, NAME, "serviceManifestFile", &default)
    }

    /// The service manifest must exist and map to the v2 API: a bad one fails the plan,
    /// naming the file, the line and the field.
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let read =
            |rel: &str| read(rel).ok_or_else(|| "does not exist in the app directory".to_owned());
        manifest_of(ctx.app, read).map(|_| ())
    }

    fn default_timeout(&self, _stage: &Stage) -> GoDuration {
        // A revision that is not ready in half an hour will not be.
        GoDuration::from_secs(30 * 60)
    }

    fn quick_sync_stages(&self, _ctx: &PlanContext<'_>) -> Vec<Stage> {
        let desc = "Deploy the new revision and route all traffic to it";
        vec![Stage::of_plugin(
            QUICK_SYNC_STAGE_ID,
            STAGE_SYNC,
            json!({}),
            desc,
        )]
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let desc = "Route all traffic back to the running commit's revision";
        Stage::rollback_after(planned, is_forward, ROLLBACK_STAGE_ID, STAGE_ROLLBACK, desc)
            .into_iter()
            .collect()
    }
}

impl Presenter for CloudRunPlugin {
    fn summary(&self, stage: &Stage) -> String {
        match stage.name.as_str() {
            STAGE_PROMOTE => stage_options::promote_summary(&stage.with),
            _ => String::new(),
        }
    }
}

#[async_trait]
impl Steps for CloudRunPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let d = ctx.deployment;
        let stage = ctx.stage;
        if stage.name == STAGE_ROLLBACK
            && !d
                .stages
                .iter()
                .any(|s| is_forward(s) && s.started_at.is_some())
        {
            ctx.io
                .log("No Cloud Run stage of this deployment started; nothing to roll back")
                .await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
        let this = load_at(ctx.app_dir, &d.app);
        // Read only by the stages that need the running revision.
        let running = || match (ctx.running_app_dir, d.running_commit.as_ref()) {
            (Some(dir), Some(commit)) => load_at(dir, &d.app)
                .map(|(config, m)| (config, m, commit.clone()))
                .map_err(|e| {
                    format!(
                        "the running commit {}'s service manifest does not load: {e}",
                        commit.short()
                    )
                }),
            _ => Err(
                "this is the app's first deployment, so there is no running revision".to_owned(),
            ),
        };
        let mut meta = StageMeta::new(ctx.io, stage);
        if stage.name == STAGE_ROLLBACK {
            let (old_config, old, old_commit) = running().map_err(|why| {
                StepError::permanent(format!(
                    "cannot roll back: {why}; the service is left as this deployment made it"
                ))
            })?;
            // This commit's config names the deploy target; the running commit's does when
            // this one does not load (a rollback must not depend on what it undoes).
            let config = this.map_or(old_config, |(config, _)| config);
            let api = self.api_for(&config).await?;
            let want = want(&d.app, &old, old_commit.as_str(), None);
            return converge::step(&api, &mut meta, &want).await;
        }
        let (config, manifest) = this.map_err(StepError::permanent)?;
        let api = self.api_for(&config).await?;
        let want = match stage.name.as_str() {
            STAGE_SYNC => want(&d.app, &manifest, d.commit.sha.as_str(), None),
            STAGE_PROMOTE => {
                let percent = stage_options::promote_percent(&stage.with).map_err(|e| {
                    StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
                })?;
                let (_, old, old_commit) = running().map_err(|why| {
                    StepError::permanent(format!(
                        "CLOUDRUN_PROMOTE splits traffic with the running revision, but {why}"
                    ))
                })?;
                let old_revision = revision_name(&old.name, &old.image, old_commit.as_str());
                let new_revision =
                    revision_name(&manifest.name, &manifest.image, d.commit.sha.as_str());
                let split = Split::between(&new_revision, percent, &old_revision);
                want(&d.app, &manifest, d.commit.sha.as_str(), Some(split))
            }
            other => {
                return Err(StepError::permanent(format!(
                    "the cloudrun plugin does not run stage {other}"
                )))
            }
        };
        converge::step(&api, &mut meta, &want).await
    }
}

#[async_trait]
impl LiveStates for CloudRunPlugin {
    /// The service as it runs against the manifest at the branch head.
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let api = self.api_for(ctx.app).await?;
        let manifest = manifest_of(ctx.app, |rel| read_app_file(ctx.app_dir, rel))
            .map_err(|e| StepError::permanent(e.to_string()))?;
        let state = live::read(&api, &manifest).await?;
        Ok(Live::Read(state))
    }
}

#[cfg(test)]
mod tests;
