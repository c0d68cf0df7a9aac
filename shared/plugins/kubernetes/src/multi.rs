//! PipeCD's `kubernetes_multicluster` plugin: one app deployed to several clusters, each a
//! deploy target of this plugin (`plugins.kubernetes_multicluster.deployTargets` in
//! gannet.yaml), each with the app's manifests or its own (`input.multiTargets[i].manifests`).
//!
//! Its stages are the Kubernetes plugin's, run on each cluster in turn (`K8S_MULTI_SYNC` is
//! `K8S_SYNC` on every target): a stage's `with.multiTargets` (deploy target names) limits it
//! to some of them. Each cluster's progress is kept in the stage's metadata under its name,
//! so a repeated step picks up on each where it stopped. A stage waits until every cluster it
//! runs on is done, and fails when one fails, naming it (the rollback then undoes every
//! cluster the deployment touched).
//!
//! Which clusters an app goes to: those `spec.deployTargets` names (an `Application`); else
//! those `input.multiTargets` names; else every deploy target of the plugin, as PipeCD sends
//! an app to every target it was registered with.

use std::path::Path;

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_config::AppConfig;
use gannet_domain::deployment::{Stage, SyncStrategy};
use gannet_domain::drift::LiveState;
use gannet_domain::GoDuration;
use gannet_sdk::check::AppFile;
use gannet_sdk::plugin::{
    AppFileError, Live, LiveContext, LiveStates, PlanContext, Plugin, Presenter, StageConfigError,
    StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_meta::StageMeta;
use gannet_sdk::tree::load_app_config;
use serde_json::{json, Value};

use crate::spec::KubernetesSpec;
use crate::{base_name, drift, manifest, KubernetesPlugin, Target, STAGE_ROLLBACK};

/// The plugin's name, and its key under gannet.yaml's `plugins:` and the app's `spec.plugins`.
pub const NAME: &str = "kubernetes_multicluster";

/// The registry's entry: `plugins.kubernetes_multicluster.deployTargets`.
pub const SPEC: PluginSpec = PluginSpec::platform::<MulticlusterPlugin>(NAME)
    .preview_credentials(crate::target::CREDENTIALS);

pub const STAGE_MULTI_SYNC: &str = "K8S_MULTI_SYNC";
pub const STAGE_MULTI_ROLLBACK: &str = "K8S_MULTI_ROLLBACK";

/// PipeCD's names: the Kubernetes plugin's stages with `MULTI_` after `K8S_`.
const STAGES: [&str; 8] = [
    STAGE_MULTI_SYNC,
    "K8S_MULTI_PRIMARY_ROLLOUT",
    "K8S_MULTI_CANARY_ROLLOUT",
    "K8S_MULTI_CANARY_CLEAN",
    "K8S_MULTI_BASELINE_ROLLOUT",
    "K8S_MULTI_BASELINE_CLEAN",
    "K8S_MULTI_TRAFFIC_ROUTING",
    STAGE_MULTI_ROLLBACK,
];

/// A stage's `with` key that limits it to some deploy targets.
const STAGE_TARGETS: &str = "multiTargets";

/// A stage's `with` without `multiTargets`: the options the Kubernetes stage reads.
pub(crate) fn own_options(with: &Value) -> Value {
    let mut with = with.clone();
    if let Some(map) = with.as_object_mut() {
        map.remove(STAGE_TARGETS);
    }
    with
}

/// The deploy targets a stage's `with.multiTargets` names; empty means all of the app's.
fn stage_targets(with: &Value) -> Result<Vec<String>, StageConfigError> {
    match with.get(STAGE_TARGETS) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value::<Vec<String>>(v.clone()).map_err(|_| {
            StageConfigError::new(
                STAGE_TARGETS,
                "expected a list of deploy target names, such as [cluster-us]",
            )
        }),
    }
}

/// `spec.plugins.kubernetes_multicluster`, read as the Kubernetes plugin's spec. A `pipeline`
/// written there is not the app's pipeline (that is `spec.pipeline`); PipeCD ignores it, and
/// so does gannet (`config check` says so).
fn spec_of(app: &AppConfig) -> Result<KubernetesSpec, AppFileError> {
    let field = format!("spec.plugins.{NAME}");
    let mut value = app.plugin_config(NAME).cloned().unwrap_or(json!({}));
    if let Some(map) = value.as_object_mut() {
        map.remove("pipeline");
    }
    let spec: KubernetesSpec = gannet_config::typed::from_value(&value, &field)
        .map_err(|e| AppFileError::in_config(e.path, e.message))?;
    for (i, t) in spec.input.multi_targets.iter().enumerate() {
        let at = format!("{field}.input.multiTargets[{i}]");
        if t.target.name.trim().is_empty() {
            return Err(AppFileError::in_config(
                format!("{at}.target.name"),
                "name the deploy target",
            ));
        }
        if !t.target.labels.is_empty() {
            return Err(AppFileError::unsupported_in_config(
                format!("{at}.target.labels"),
                "choosing deploy targets by label is not supported yet: name each one",
            ));
        }
        if !t.kustomize_dir.is_empty() {
            return Err(AppFileError::unsupported_in_config(
                format!("{at}.kustomizeDir"),
                "a kustomization per deploy target is not supported yet: list the target's manifests",
            ));
        }
    }
    Ok(spec)
}

/// The spec one deploy target deploys: the app's, with the target's own manifests when its
/// `multiTargets` entry lists some.
fn target_spec(app: &KubernetesSpec, target: &str) -> KubernetesSpec {
    let mut spec = app.clone();
    let own = app
        .input
        .multi_targets
        .iter()
        .find(|t| t.target.name == target)
        .filter(|t| !t.manifests.is_empty());
    if let Some(own) = own {
        spec.input.manifests = own.manifests.clone();
    }
    spec.input.multi_targets.clear();
    spec
}

/// The names of the clusters `app` goes to ([module docs](self)), each checked against the
/// deploy targets `have`.
fn app_target_names(
    app: &AppConfig,
    spec: &KubernetesSpec,
    have: &[&str],
) -> Result<Vec<String>, String> {
    let named = app.deploy_targets();
    let (names, from): (Vec<String>, &str) = if !named.is_empty() {
        (
            named.iter().map(|s| (*s).to_owned()).collect(),
            "spec.deployTargets",
        )
    } else if !spec.input.multi_targets.is_empty() {
        (
            spec.input
                .multi_targets
                .iter()
                .map(|t| t.target.name.clone())
                .collect(),
            "input.multiTargets",
        )
    } else {
        if have.is_empty() {
            return Err(format!(
                "no {NAME} deploy target is configured: add them under plugins.{NAME}.deployTargets in gannet.yaml"
            ));
        }
        return Ok(have.iter().map(|s| (*s).to_owned()).collect());
    };
    for name in &names {
        if !have.contains(&name.as_str()) {
            return Err(format!(
                "{from} names the deploy target {name:?}, which plugins.{NAME}.deployTargets in gannet.yaml does not have (it has: {})",
                have.join(", ")
            ));
        }
    }
    Ok(names)
}

/// Deploys one app to several clusters.
#[derive(Debug, Default)]
pub struct MulticlusterPlugin {
    single: KubernetesPlugin,
}

impl FromSettings for MulticlusterPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        Ok(Self {
            single: KubernetesPlugin::from_settings(settings)?,
        })
    }
}

impl MulticlusterPlugin {
    pub fn new(targets: Vec<crate::DeployTarget>) -> Self {
        Self {
            single: KubernetesPlugin::new(targets),
        }
    }

    fn target_names(&self) -> Vec<&str> {
        self.single
            .targets
            .iter()
            .map(|t| t.config.name.as_str())
            .collect()
    }

    /// The app's clusters (by its config at this commit), with the spec each deploys.
    pub(crate) fn clusters(
        &self,
        app: &AppConfig,
    ) -> Result<Vec<(&Target, KubernetesSpec)>, StepError> {
        let spec = spec_of(app).map_err(|e| StepError::permanent(e.to_string()))?;
        let names =
            app_target_names(app, &spec, &self.target_names()).map_err(StepError::permanent)?;
        Ok(names
            .iter()
            .filter_map(|n| self.single.targets.iter().find(|t| &t.config.name == n))
            .map(|t| (t, target_spec(&spec, &t.config.name)))
            .collect())
    }
}

/// The spec `target` deploys at the checkout whose app directory is `dir`.
fn spec_in(dir: &Path, ctx: &StepContext<'_>, target: &str) -> Result<KubernetesSpec, String> {
    let config = load_app_config(dir, &ctx.deployment.app).map_err(|e| e.to_string())?;
    let spec = spec_of(&config).map_err(|e| e.to_string())?;
    Ok(target_spec(&spec, target))
}

impl Plugin for MulticlusterPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &STAGES
    }

    fn honours(&self, field: &str) -> bool {
        self.single.honours(field)
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some(NAME)
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        let targets = stage_targets(with)?;
        let mut options = self
            .single
            .validate_stage(&base_name(name), &own_options(with))?;
        if !targets.is_empty() {
            match &mut options {
                Value::Object(map) => {
                    map.insert(STAGE_TARGETS.into(), json!(targets));
                }
                other => *other = json!({ STAGE_TARGETS: targets }),
            }
        }
        Ok(options)
    }

    /// Its files are under `spec.plugins`: `check_app` reads them.
    fn app_files(&self, app: &AppConfig) -> Result<Vec<AppFile>, AppFileError> {
        spec_of(app).map(|_| Vec::new())
    }

    /// Each cluster's manifests and the stages' options, as the Kubernetes plugin checks one
    /// cluster's; and every `multiTargets` of a stage names one of the app's clusters.
    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let spec = spec_of(ctx.app)?;
        let listed: Vec<&str> = spec
            .input
            .multi_targets
            .iter()
            .map(|t| t.target.name.as_str())
            .collect();
        let named: Vec<&str> = ctx.app.deploy_targets();
        for (i, stage) in ctx.app.stages().iter().enumerate() {
            let Ok(wanted) = stage_targets(&stage.with) else {
                continue; // validate_stage said so
            };
            let known = if named.is_empty() { &listed } else { &named };
            if known.is_empty() {
                continue; // every deploy target: known when it runs
            }
            if let Some(unknown) = wanted.iter().find(|w| !known.contains(&w.as_str())) {
                return Err(AppFileError::in_config(
                    format!("spec.pipeline.stages[{i}].with.{STAGE_TARGETS}"),
                    format!(
                        "{unknown} is not one of the app's deploy targets ({})",
                        known.join(", ")
                    ),
                ));
            }
        }
        if listed.is_empty() {
            return crate::check_spec(ctx, &target_spec(&spec, ""), read);
        }
        for name in listed {
            crate::check_spec(ctx, &target_spec(&spec, name), read)?;
        }
        Ok(())
    }

    /// PipeCD's Kubernetes rule on each cluster: the pipeline when any cluster's change needs
    /// it, else a quick sync.
    fn determine_strategy(&self, ctx: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        let spec = spec_of(ctx.app).ok()?;
        let names = app_target_names(ctx.app, &spec, &self.target_names()).ok()?;
        let mut quick = None;
        for name in &names {
            let spec_at = |dir: &Path| {
                let config = crate::config_at(ctx, dir)?;
                Ok(target_spec(
                    &spec_of(&config).map_err(|e| e.to_string())?,
                    name,
                ))
            };
            let (strategy, why) = crate::decide_strategy(ctx, &spec_at)?;
            if strategy == SyncStrategy::Pipeline {
                return Some((strategy, format!("{name}: {why}")));
            }
            quick.get_or_insert((strategy, why));
        }
        quick
    }

    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        self.single.default_timeout(stage)
    }

    fn quick_sync_stages(&self, ctx: &PlanContext<'_>) -> Vec<Stage> {
        let quick = spec_of(ctx.app).map(|s| s.quick_sync).unwrap_or_default();
        let with = json!({
            "addVariantLabelToSelector": quick.add_variant_label_to_selector,
            "prune": quick.prune,
        });
        let desc = "Apply every manifest to each cluster, wait for the rollouts, and prune what Git no longer has";
        vec![Stage::of_plugin(
            "k8s-multi-sync",
            STAGE_MULTI_SYNC,
            with,
            desc,
        )]
    }

    fn rollback_stages(&self, _ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let desc = "On each cluster: apply the running commit's manifests, route all traffic to the primary, and remove the canary and baseline";
        Stage::rollback_after(
            planned,
            crate::is_forward,
            "k8s-multi-rollback",
            STAGE_MULTI_ROLLBACK,
            desc,
        )
        .into_iter()
        .collect()
    }
}

impl Presenter for MulticlusterPlugin {
    fn summary(&self, stage: &Stage) -> String {
        let mut own = stage.clone();
        own.name = base_name(&stage.name).into_owned();
        own.with = own_options(&stage.with);
        let summary = self.single.summary(&own);
        match stage_targets(&stage.with).unwrap_or_default() {
            targets if targets.is_empty() => summary,
            targets if summary.is_empty() => format!("on {}", targets.join(", ")),
            targets => format!("{summary} on {}", targets.join(", ")),
        }
    }
}

#[async_trait]
impl Steps for MulticlusterPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        if let Some(done) = crate::nothing_to_roll_back(&ctx).await {
            return Ok(done);
        }
        // This commit's config names the clusters, even for a rollback.
        let config = load_app_config(ctx.app_dir, &ctx.deployment.app)
            .map_err(|e| StepError::permanent(e.to_string()))?;
        let wanted = stage_targets(&ctx.stage.with).map_err(|e| {
            StepError::permanent(format!("stage {}: invalid with.{e}", ctx.stage.id))
        })?;
        let rolling_back = base_name(&ctx.stage.name) == STAGE_ROLLBACK;
        let mut stage = ctx.stage.clone();
        stage.with = own_options(&stage.with);
        let one = StepContext {
            stage: &stage,
            ..ctx
        };
        let mut waiting: Option<GoDuration> = None;
        let (mut failed, mut permanent, mut transient) = (Vec::new(), Vec::new(), None);
        for (target, _) in self.clusters(&config)? {
            let name = target.config.name.as_str();
            // A rollback undoes every cluster; a stage runs on those it names.
            if !rolling_back && !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
                continue;
            }
            let mut meta = StageMeta::scoped(ctx.io, ctx.stage, name);
            if meta.get("began").is_none() {
                ctx.io.log(&format!("On {name}:")).await;
                meta.save(&[("began", "1".to_owned())]).await?;
            }
            let spec_at = |dir: &Path| spec_in(dir, &ctx, name);
            let outcome = match target.cluster().await {
                Ok(cluster) => {
                    crate::run_on_cluster(&one, &cluster, meta, &spec_at, &Default::default()).await
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok(StepOutcome::Done(StageResult::Failure { reason })) => {
                    failed.push(format!("{name}: {reason}"));
                }
                Ok(StepOutcome::Done(_)) => {}
                Ok(StepOutcome::Continue { after }) => {
                    waiting = Some(waiting.map_or(after, |w| w.min(after)));
                }
                Err(StepError::Permanent(e)) => permanent.push(format!("{name}: {e}")),
                Err(e) => transient = Some(e),
            }
        }
        if !permanent.is_empty() {
            return Err(StepError::permanent(permanent.join("; ")));
        }
        if !failed.is_empty() {
            return Ok(StepOutcome::Done(StageResult::Failure {
                reason: failed.join("; "),
            }));
        }
        if let Some(e) = transient {
            return Err(e);
        }
        Ok(match waiting {
            Some(after) => StepOutcome::Continue { after },
            None => StepOutcome::Done(StageResult::Success),
        })
    }
}

#[async_trait]
impl LiveStates for MulticlusterPlugin {
    /// Each cluster's live objects against its manifests at the branch head; every resource
    /// and drift field is named by its cluster (`cluster-us: Deployment/default/web`).
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Live, StepError> {
        let mut all = LiveState::default();
        for (target, spec) in self.clusters(ctx.app)? {
            let name = &target.config.name;
            let cluster = target.cluster().await?;
            let manifests = manifest::load(
                &gannet_sdk::tree::AppFiles::new(ctx.app_dir, ctx.app_id),
                &spec,
            )
            .map_err(|e| StepError::permanent(format!("{name}: {e}")))?;
            let state = drift::read(&cluster, ctx.app_id, ctx.app, &spec, &manifests).await?;
            all.resources
                .extend(state.resources.into_iter().map(|mut r| {
                    r.id = format!("{name}: {}", r.id);
                    r
                }));
            all.drift.extend(state.drift.into_iter().map(|mut d| {
                d.field = format!("{name}: {}", d.field);
                d
            }));
        }
        Ok(Live::Read(all))
    }
}
