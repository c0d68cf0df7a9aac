//! Kubernetes deployments of PipeCD's `KubernetesApp` (and of an `Application` with
//! `spec.plugins.kubernetes`), unchanged, through kube-rs and **server-side apply** under
//! gannet's field manager (`gannet`): a field another manager owns is never overwritten; the
//! stage fails naming the field and the manager. Fields last changed by hand (`kubectl …`
//! managers) are taken back, as a sync of Git means to.
//!
//! - **K8S_SYNC** `{addVariantLabelToSelector, prune}` (the quick sync, with `spec.quickSync`):
//!   applies every object, waits until the workloads have rolled out, and with `prune`
//!   deletes what gannet applied before that Git no longer has.
//! - **K8S_CANARY_ROLLOUT** `{replicas, suffix, createService}`: a copy of each workload (and
//!   of the Service) named `<name>-<suffix>`, selecting its own pods by the variant label, with
//!   a number of replicas or a percentage of the primary's.
//! - **K8S_BASELINE_ROLLOUT** `{replicas, suffix, createService}`: the same of the running
//!   commit's workloads.
//! - **K8S_PRIMARY_ROLLOUT** `{suffix, createService, addVariantLabelToSelector, prune}`: this
//!   commit's objects as the primary.
//! - **K8S_TRAFFIC_ROUTING** `{all | primary, canary, baseline}`: by `podselector` (the
//!   Service selects one variant's pods) or `istio` (the VirtualService's weights).
//! - **K8S_CANARY_CLEAN**, **K8S_BASELINE_CLEAN**: the variant's objects are deleted.
//! - **K8S_ROLLBACK** (hidden): the running commit's objects, all traffic to the primary, no
//!   canary or baseline left.
//!
//! Waiting for a rollout is `Continue`: no step sleeps. Live state and drift: one list per kind
//! the app uses, compared with the manifests at the branch head (see `drift`).

mod cluster;
mod configs;
mod drift;
mod eks;
mod fetch;
mod fields;
mod kinds;
pub mod manifest;
mod multi;
mod objects;
mod options;
mod patch;
pub mod remote;
mod render;
mod rollout;
mod routing;
pub mod spec;
mod stages;
mod step;
mod strategy;
mod target;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_config::{AppConfig, AppKind};
use gannet_domain::deployment::{Stage, SyncStrategy};
use gannet_domain::ids::AppId;
use gannet_domain::GoDuration;
use gannet_sdk::check::{AppFile, FileFormat};
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_meta::StageMeta;
use gannet_sdk::stage_options;
use gannet_sdk::targets::{self, Platform};
use gannet_sdk::tree::{load_app_config, AppFiles};
use serde_json::{json, Value};

pub use cluster::{field_manager, LEGACY_FIELD_MANAGER};
pub use manifest::{Manifest, ObjectRef};
pub use multi::{MulticlusterPlugin, SPEC as MULTICLUSTER_SPEC};
pub use objects::{
    app_label, ANNOTATION_COMMIT, ANNOTATION_RESOURCE_KEY, ANNOTATION_VARIANT, LABEL_APPLICATION,
    LABEL_MANAGED_BY, MANAGED_BY,
};
pub use target::DeployTarget;

use crate::cluster::Cluster;
use crate::objects::Variant;
use crate::options::{RoutingOptions, SyncOptions};
use crate::spec::{KubernetesSpec, TrafficRoutingMethod};
use crate::step::Step;

pub const STAGE_SYNC: &str = "K8S_SYNC";
pub const STAGE_PRIMARY_ROLLOUT: &str = "K8S_PRIMARY_ROLLOUT";
pub const STAGE_CANARY_ROLLOUT: &str = "K8S_CANARY_ROLLOUT";
pub const STAGE_CANARY_CLEAN: &str = "K8S_CANARY_CLEAN";
pub const STAGE_BASELINE_ROLLOUT: &str = "K8S_BASELINE_ROLLOUT";
pub const STAGE_BASELINE_CLEAN: &str = "K8S_BASELINE_CLEAN";
pub const STAGE_TRAFFIC_ROUTING: &str = "K8S_TRAFFIC_ROUTING";
pub const STAGE_ROLLBACK: &str = "K8S_ROLLBACK";

/// Every stage of the plugin: the ones that change the cluster, then K8S_ROLLBACK, which
/// undoes them.
const STAGES: [&str; 8] = [
    STAGE_SYNC,
    STAGE_PRIMARY_ROLLOUT,
    STAGE_CANARY_ROLLOUT,
    STAGE_CANARY_CLEAN,
    STAGE_BASELINE_ROLLOUT,
    STAGE_BASELINE_CLEAN,
    STAGE_TRAFFIC_ROUTING,
    STAGE_ROLLBACK,
];

/// The quick sync stage's id.
pub const QUICK_SYNC_STAGE_ID: &str = "k8s-sync";
/// The hidden rollback stage's id.
pub const ROLLBACK_STAGE_ID: &str = "k8s-rollback";

const PLATFORM: Platform = Platform {
    title: "Kubernetes",
    key: "kubernetes",
    kind: "KubernetesApp",
};

/// A deploy target and its client, made on first use and kept for later steps (an EKS
/// target's for as long as its token lasts).
#[derive(Debug)]
struct Target {
    config: DeployTarget,
    cluster: tokio::sync::Mutex<Option<(Arc<Cluster>, Instant)>>,
}

impl targets::Named for Target {
    fn name(&self) -> &str {
        &self.config.name
    }
}

impl Target {
    async fn cluster(&self) -> Result<Arc<Cluster>, StepError> {
        let mut cached = self.cluster.lock().await;
        if let Some((cluster, made)) = cached.as_ref() {
            if self.config.eks.is_none() || made.elapsed() < eks::TOKEN_LIFETIME {
                return Ok(cluster.clone());
            }
        }
        let cluster = Arc::new(Cluster::connect(&self.config).await?);
        *cached = Some((cluster.clone(), Instant::now()));
        Ok(cluster)
    }
}

/// Runs the Kubernetes stages on the configured deploy targets.
#[derive(Debug, Default)]
pub struct KubernetesPlugin {
    targets: Vec<Target>,
    /// Where charts and kustomize bases are fetched from ([`remote`]).
    remotes: remote::Remotes,
}

impl KubernetesPlugin {
    pub fn new(targets: Vec<DeployTarget>) -> Self {
        Self {
            targets: targets
                .into_iter()
                .map(|config| Target {
                    config,
                    cluster: tokio::sync::Mutex::new(None),
                })
                .collect(),
            remotes: remote::Remotes::default(),
        }
    }

    /// The plugin, fetching charts and bases as `remotes` allows.
    pub fn with_remotes(mut self, remotes: remote::Remotes) -> Self {
        self.remotes = remotes;
        self
    }

    async fn cluster_for(&self, app: &AppConfig) -> Result<Arc<Cluster>, StepError> {
        targets::pick(PLATFORM, &self.targets, app)?.cluster().await
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "kubernetes";

/// The registry's entry: `plugins.kubernetes.deployTargets`.
pub const SPEC: PluginSpec =
    PluginSpec::platform::<KubernetesPlugin>(NAME).preview_credentials(target::CREDENTIALS);

impl FromSettings for KubernetesPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let (targets, remotes) = remote::from_settings(settings)?;
        Ok(KubernetesPlugin::new(targets).with_remotes(remotes))
    }
}

/// The app's Kubernetes spec and manifests in `dir` (a checkout of some commit).
pub(crate) fn load_at(dir: &Path, app: &AppId) -> Result<(KubernetesSpec, Vec<Manifest>), String> {
    let config = load_app_config(dir, app).map_err(|e| e.to_string())?;
    let spec = manifest::spec_of(&config).map_err(|e| e.to_string())?;
    let manifests = manifest::load(&AppFiles::new(dir, app), &spec).map_err(|e| e.to_string())?;
    Ok((spec, manifests))
}

/// True for a stage of this plugin that changes the cluster (not a rollback).
fn is_forward(stage: &Stage) -> bool {
    let name = base_name(&stage.name);
    !stage.rollback && name != STAGE_ROLLBACK && STAGES.contains(&&*name)
}

impl Plugin for KubernetesPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &STAGES
    }

    /// Its drift leaves out the fields `spec.driftDetection.ignoreFields` names ([`drift`]).
    fn honours(&self, field: &str) -> bool {
        field == gannet_config::DRIFT_IGNORE_FIELDS
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("kubernetes")
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        match name {
            STAGE_SYNC => {
                stage_options::parse::<SyncOptions>(with).map(|o| stage_options::to_value(&o))
            }
            STAGE_CANARY_ROLLOUT | STAGE_BASELINE_ROLLOUT => {
                options::rollout(with, name == STAGE_CANARY_ROLLOUT)
                    .map(|o| stage_options::to_value(&o))
            }
            STAGE_PRIMARY_ROLLOUT => stage_options::parse::<options::PrimaryOptions>(with)
                .map(|o| stage_options::to_value(&o)),
            STAGE_TRAFFIC_ROUTING => {
                let o: RoutingOptions = stage_options::parse(with)?;
                o.split()?;
                Ok(stage_options::to_value(&o))
            }
            STAGE_ROLLBACK => Err(StageConfigError::new(
                "",
                "K8S_ROLLBACK is added by gannet to undo a deployment; it cannot be configured",
            )),
            _ => stage_options::none(with),
        }
    }

    /// The config's Kubernetes part, and the manifests and local Helm value files it lists.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        let spec = manifest::spec_of(app)?;
        if app.kind == AppKind::Application {
            return Ok(Vec::new()); // under spec.plugins.kubernetes: checked by check_app
        }
        let input = &spec.input;
        let manifests = input
            .manifests
            .iter()
            .enumerate()
            .map(|(i, file)| AppFile::document(format!("spec.input.manifests[{i}]"), file, ""));
        let values = input.helm_options.iter().flat_map(|o| &o.value_files);
        let values = values
            .enumerate()
            .filter(|(_, file)| !file.contains("://"))
            .map(|(i, file)| {
                AppFile::document(format!("spec.input.helmOptions.valueFiles[{i}]"), file, "")
                    .read_as(FileFormat::Values)
            });
        Ok(manifests.chain(values).collect())
    }

    /// What planning can check: the config's Kubernetes part; every manifest a stage would
    /// apply (with the app's directory: those found in it by default and in listed
    /// directories too; without it, the files the config lists); and that podselector routing
    /// stages send all traffic to one variant.
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let spec = manifest::spec_of(ctx.app)?;
        let files = ctx
            .app_dir
            .map(|dir| AppFiles::at(dir, ctx.app_path().unwrap_or_default()));
        // A chart or base fetched from elsewhere: its fields are checked here, and the
        // manifests its job renders when a stage runs.
        if self.remotes.source(files.as_ref(), &spec)?.is_some() {
            return manifest::check_supported(&spec);
        }
        check_spec(ctx, &spec, read)
    }

    /// PipeCD's rule ([`strategy`]): a commit that changes a workload's pod template, a
    /// ConfigMap or a Secret runs the pipeline; any other is a quick sync. It compares the
    /// running commit's manifests with this commit's, so it needs both directories; without
    /// them (or on a first deployment) the planner's own rules decide.
    fn determine_strategy(&self, ctx: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        let spec = manifest::spec_of(ctx.app).ok()?;
        let files = ctx
            .app_dir
            .map(|dir| AppFiles::at(dir, ctx.app_path().unwrap_or_default()));
        if let Ok(Some(source)) = self.remotes.source(files.as_ref(), &spec) {
            return Some((
                SyncStrategy::Pipeline,
                format!("the {source} is fetched and rendered when a stage runs, so its manifests cannot be compared with the running commit's while planning"),
            ));
        }
        decide_strategy(ctx, &|dir| {
            manifest::spec_of(&config_at(ctx, dir)?).map_err(|e| e.to_string())
        })
    }

    fn default_timeout(&self, _stage: &Stage) -> GoDuration {
        // PipeCD's default for a Kubernetes stage is the deployment's; a rollout that takes
        // longer than an hour has stalled.
        GoDuration::from_secs(3600)
    }

    fn quick_sync_stages(&self, ctx: &PlanContext<'_>) -> Vec<Stage> {
        let quick = manifest::spec_of(ctx.app)
            .map(|s| s.quick_sync)
            .unwrap_or_default();
        let with = json!({
            "addVariantLabelToSelector": quick.add_variant_label_to_selector,
            "prune": quick.prune,
        });
        let desc = "Apply every manifest, wait for the rollout, and prune what Git no longer has";
        vec![Stage::of_plugin(
            QUICK_SYNC_STAGE_ID,
            STAGE_SYNC,
            with,
            desc,
        )]
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let desc = "Apply the running commit's manifests, route all traffic to the primary, and remove the canary and baseline";
        Stage::rollback_after(planned, is_forward, ROLLBACK_STAGE_ID, STAGE_ROLLBACK, desc)
            .into_iter()
            .collect()
    }
}

/// The app config of the checkout whose app directory is `dir` (this commit's, or the
/// running commit's), read as planning reads it.
pub(crate) fn config_at(ctx: &PlanContext<'_>, dir: &Path) -> Result<AppConfig, String> {
    let config_file = ctx.config_file().ok_or("the config's path is not known")?;
    let text = gannet_sdk::tree::read(dir, config_file, gannet_config::bounded::MAX_BYTES as u64)
        .map_err(|e| format!("its config {e}"))?;
    gannet_config::parse_app_config(config_file, &text).map_err(|e| e.to_string())
}

/// What planning can check of one cluster's `spec`: every manifest a stage would apply (with
/// the app's directory: those found in it by default and in listed directories too; without
/// it, the files the config lists); each canary's patches; and that podselector routing
/// stages send all traffic to one variant.
pub(crate) fn check_spec(
    ctx: &PlanContext<'_>,
    spec: &KubernetesSpec,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<(), AppFileError> {
    match ctx.app_dir {
        Some(dir) => {
            let files = AppFiles::at(dir, ctx.app_path().unwrap_or_default());
            // The directory is known: an app with nothing to apply fails as its stage would.
            let manifests = manifest::load(&files, spec)?;
            // Each canary's patches find their manifest and field now, not mid-pipeline.
            for (i, stage) in ctx.app.stages().iter().enumerate() {
                if base_name(&stage.name) != STAGE_CANARY_ROLLOUT {
                    continue;
                }
                let Ok(opts) = options::rollout(&multi::own_options(&stage.with), true) else {
                    continue;
                };
                patch::apply(&mut manifests.clone(), &opts.patches).map_err(|e| {
                    AppFileError::in_config(format!("spec.pipeline.stages[{i}].with.patches"), e)
                })?;
            }
        }
        None => {
            manifest::check_supported(spec)?;
            for file in &spec.input.manifests {
                let rel = file.trim_start_matches("./");
                // A directory reads as nothing here: the stage checks its files.
                if let Some(text) = read(rel) {
                    manifest::parse(rel, &text)?;
                }
            }
        }
    }
    let podselector = spec
        .traffic_routing
        .as_ref()
        .is_none_or(|t| t.method == TrafficRoutingMethod::PodSelector);
    for (i, stage) in ctx.app.stages().iter().enumerate() {
        if base_name(&stage.name) != STAGE_TRAFFIC_ROUTING || !podselector {
            continue;
        }
        let split = serde_json::from_value::<RoutingOptions>(multi::own_options(&stage.with))
            .ok()
            .and_then(|o| o.split().ok());
        if let Some(split) = split.filter(|s| s.only().is_none()) {
            return Err(AppFileError::in_config(
                format!("spec.pipeline.stages[{i}].with"),
                format!("traffic routing by podselector switches the Service's selector, so one variant takes all traffic; {split} needs spec.trafficRouting.method: istio"),
            ));
        }
    }
    Ok(())
}

/// PipeCD's rule for one cluster, with the spec `spec_at` reads in this commit's and the
/// running commit's checkouts.
pub(crate) fn decide_strategy(
    ctx: &PlanContext<'_>,
    spec_at: &dyn Fn(&Path) -> Result<KubernetesSpec, String>,
) -> Option<(SyncStrategy, String)> {
    ctx.running_commit?;
    let (dir, running_dir, app_path) = (ctx.app_dir?, ctx.running_app_dir?, ctx.app_path()?);
    let spec = spec_at(dir).ok()?;
    let target = manifest::load(&AppFiles::at(dir, app_path), &spec).ok()?;
    let running = spec_at(running_dir).and_then(|running_spec| {
        manifest::load(&AppFiles::at(running_dir, app_path), &running_spec)
            .map(|m| (running_spec, m))
            .map_err(|e| e.to_string())
    });
    Some(match running {
        Ok((running_spec, running)) => strategy::decide(&running, &running_spec, &target, &spec),
        Err(why) => (
            SyncStrategy::Pipeline,
            format!("the running commit's manifests cannot be compared ({why})"),
        ),
    })
}

impl Presenter for KubernetesPlugin {
    fn summary(&self, stage: &Stage) -> String {
        match stage.name.as_str() {
            STAGE_CANARY_ROLLOUT | STAGE_BASELINE_ROLLOUT => {
                options::rollout(&stage.with, stage.name == STAGE_CANARY_ROLLOUT).map_or_else(
                    |_| String::new(),
                    |o| match o.replicas {
                        options::Replicas::Count(n) => format!("{n} replicas"),
                        options::Replicas::Percent(p) => format!("{p}% of replicas"),
                    },
                )
            }
            STAGE_TRAFFIC_ROUTING => stage_options::parse::<RoutingOptions>(&stage.with)
                .and_then(|o| o.split())
                .map_or_else(
                    |_| String::new(),
                    |s| {
                        stage_options::traffic_summary(&[
                            ("primary", s.primary.into()),
                            ("canary", s.canary.into()),
                            ("baseline", s.baseline.into()),
                        ])
                    },
                ),
            _ => String::new(),
        }
    }
}

#[async_trait]
impl Steps for KubernetesPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        if let Some(done) = nothing_to_roll_back(&ctx).await {
            return Ok(done);
        }
        let app = &ctx.deployment.app;
        // This commit's config names the deploy target, even for a rollback.
        let config =
            load_app_config(ctx.app_dir, app).map_err(|e| StepError::permanent(e.to_string()))?;
        let cluster = self.cluster_for(&config).await?;
        let spec_at = |dir: &Path| {
            let config = load_app_config(dir, app).map_err(|e| e.to_string())?;
            manifest::spec_of(&config).map_err(|e| e.to_string())
        };
        // Charts and bases fetched from elsewhere are rendered by a job first.
        let rendered = match fetch::trees(&ctx, &self.remotes).await? {
            Ok(rendered) => rendered,
            Err(outcome) => return Ok(outcome),
        };
        let meta = StageMeta::new(ctx.io, ctx.stage);
        run_on_cluster(&ctx, &cluster, meta, &spec_at, &rendered).await
    }
}

/// The stages of this deployment's that changed a cluster, and started.
fn started_forward<'d>(ctx: &StepContext<'d>) -> Vec<&'d Stage> {
    ctx.deployment
        .stages
        .iter()
        .filter(|s| is_forward(s) && s.started_at.is_some())
        .collect()
}

/// A rollback when no stage of the deployment touched a cluster: done, saying so.
async fn nothing_to_roll_back(ctx: &StepContext<'_>) -> Option<StepOutcome> {
    if base_name(&ctx.stage.name) != STAGE_ROLLBACK || !started_forward(ctx).is_empty() {
        return None;
    }
    ctx.io
        .log("No Kubernetes stage of this deployment started; nothing to roll back")
        .await;
    Some(StepOutcome::Done(StageResult::Success))
}

/// The stage's name as this plugin's single-cluster stages name it (`K8S_MULTI_SYNC` is
/// `K8S_SYNC` run on each target).
pub(crate) fn base_name(name: &str) -> std::borrow::Cow<'_, str> {
    match name.strip_prefix("K8S_MULTI_") {
        Some(rest) => format!("K8S_{rest}").into(),
        None => name.into(),
    }
}

/// Runs the step's stage on one cluster. `spec_at` reads the app's Kubernetes spec in a
/// checkout (this commit's, or the running commit's for a rollback); the manifests it names
/// are read from there.
pub(crate) async fn run_on_cluster(
    ctx: &StepContext<'_>,
    cluster: &Cluster,
    meta: StageMeta<'_>,
    spec_at: &(dyn Fn(&Path) -> Result<KubernetesSpec, String> + Sync),
    rendered: &fetch::Rendered,
) -> Result<StepOutcome, StepError> {
    let d = ctx.deployment;
    let stage = ctx.stage;
    let name = base_name(&stage.name);
    let rolling_back = name == STAGE_ROLLBACK;
    let load = |dir: &Path, tree: fetch::Tree| {
        let spec = spec_at(dir)?;
        let manifests = match rendered.of(tree) {
            Some(m) => m.clone()?,
            None => {
                manifest::load(&AppFiles::new(dir, &d.app), &spec).map_err(|e| e.to_string())?
            }
        };
        Ok::<_, String>((spec, manifests))
    };
    let running = match (ctx.running_app_dir, d.running_commit.as_ref()) {
        (Some(dir), Some(commit)) => load(dir, fetch::Tree::Running)
            .map(|(spec, m)| (spec, m, commit.clone()))
            .map_err(|e| {
                format!(
                    "the running commit {}'s manifests do not load: {e}",
                    commit.short()
                )
            }),
        _ => Err("this is the app's first deployment, so there is no running commit".to_owned()),
    };
    let (spec, manifests, commit) = if rolling_back {
        let (mut spec, manifests, commit) = running.clone().map_err(|why| {
            StepError::permanent(format!(
                "cannot roll back: {why}; the cluster is left as this deployment made it"
            ))
        })?;
        // Traffic goes back the way this deployment's routing stages sent it away.
        if let Ok(this) = spec_at(ctx.app_dir) {
            spec.traffic_routing = this.traffic_routing.or(spec.traffic_routing);
        }
        (spec, manifests, commit)
    } else {
        let (spec, manifests) =
            load(ctx.app_dir, fetch::Tree::This).map_err(StepError::permanent)?;
        // Every object's kind is found on the cluster before anything is applied, so a
        // kind the cluster does not serve fails the stage before it touches the cluster.
        for m in &manifests {
            cluster.kind(&m.api_version, &m.kind).await.map_err(|e| {
                if matches!(e, StepError::Transient { .. }) {
                    e
                } else {
                    StepError::permanent(format!(
                        "{}:{}: kind {} ({}) is not served by the cluster, so nothing was applied: {e}",
                        m.file, m.line, m.kind, m.api_version
                    ))
                }
            })?;
        }
        (spec, manifests, d.commit.sha.clone())
    };
    let mut step = Step {
        ctx,
        cluster,
        spec,
        manifests,
        commit,
        app_label: app_label(&d.app),
        meta,
        running: running.map(|(_, m, _)| m),
    };
    match &*name {
        STAGE_SYNC => {
            let o: SyncOptions = stage_options::parse(&stage.with).map_err(|e| {
                StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
            })?;
            stages::sync(&mut step, o).await
        }
        STAGE_CANARY_ROLLOUT => stages::variant_rollout(&mut step, Variant::Canary).await,
        STAGE_BASELINE_ROLLOUT => stages::variant_rollout(&mut step, Variant::Baseline).await,
        STAGE_PRIMARY_ROLLOUT => stages::primary(&mut step).await,
        STAGE_TRAFFIC_ROUTING => stages::route(&mut step).await,
        STAGE_CANARY_CLEAN => stages::clean(&mut step, Variant::Canary).await,
        STAGE_BASELINE_CLEAN => stages::clean(&mut step, Variant::Baseline).await,
        STAGE_ROLLBACK => {
            let routed = started_forward(ctx)
                .iter()
                .any(|s| base_name(&s.name) == STAGE_TRAFFIC_ROUTING);
            stages::rollback(&mut step, routed).await
        }
        other => Err(StepError::permanent(format!(
            "the kubernetes plugin does not run stage {other}"
        ))),
    }
}

#[async_trait]
impl LiveStates for KubernetesPlugin {
    /// The live objects gannet applied for the app against the manifests at the branch head.
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let cluster = self.cluster_for(ctx.app).await?;
        let (spec, manifests) = match fetch::for_live(&ctx, &self.remotes).await? {
            fetch::Render::Local => {
                load_at(ctx.app_dir, ctx.app_id).map_err(StepError::permanent)?
            }
            fetch::Render::Running(_) => {
                return Ok(Live::Pending {
                    what: "the app's chart or bases are fetched and rendered by a job".into(),
                    job: None,
                })
            }
            fetch::Render::Rendered(m) => {
                let config = load_app_config(ctx.app_dir, ctx.app_id)
                    .map_err(|e| StepError::permanent(e.to_string()))?;
                let spec =
                    manifest::spec_of(&config).map_err(|e| StepError::permanent(e.to_string()))?;
                (spec, m)
            }
            fetch::Render::Failed(why) => return Err(StepError::permanent(why)),
        };
        let state = drift::read(&cluster, ctx.app_id, ctx.app, &spec, &manifests).await?;
        Ok(Live::Read(state))
    }
}

#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod tests;
