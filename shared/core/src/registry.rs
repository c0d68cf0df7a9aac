//! The plugin registry: how each compiled-in plugin is built from its settings. gannet.yaml's
//! `plugins:` map and the AWS runtime's `GANNET_PLUGINS` (the same map, as JSON) are read here
//! once, generically: each `plugins.<name>` goes to the plugin that owns the name, and a name no
//! compiled-in plugin owns is an error that lists the ones that are.
//!
//! The list itself lives outside the core (the `gannet-plugins` crate), because the core and
//! the controller must not depend on any plugin.

use std::sync::Arc;

use async_trait::async_trait;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::AppConfig;
use crate::deployment::{Stage, SyncStrategy};
use crate::duration::{GoDuration, Millis};
use crate::plugin::{
    AppFileError, ApproveError, Live, LiveContext, PlanContext, Plugin, Plugins, StageConfigError,
    StepContext, StepError, StepOutcome, StopContext,
};
use crate::ports::Metadata;
use crate::targets::{self, Named};
use crate::typed::{self, FieldError};

/// Builds a plugin from its settings; errors name the field at fault.
pub type BuildFn = fn(&PluginSettings<'_>) -> Result<Arc<dyn Plugin>, FieldError>;

/// A plugin built from its `plugins.<name>` settings.
pub trait FromSettings: Plugin + Sized + 'static {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError>;
}

/// One compiled-in plugin: the key it owns under `plugins:`, and how it is built.
#[derive(Clone, Copy)]
pub struct PluginSpec {
    /// The plugin's name ([`Plugin::name`]) and its key under `plugins:`.
    pub name: &'static str,
    pub build: BuildFn,
    /// Builds the plugin's planning face only ([`PluginSpec::planning_only`]).
    pub planning: BuildFn,
}

impl PluginSpec {
    /// The entry of a plugin built from its settings.
    pub const fn new<P: FromSettings>(name: &'static str) -> Self {
        Self {
            name,
            build: build_full::<P>,
            planning: build_planning::<P>,
        }
    }

    /// The entry of a plugin that takes no settings and is built by `P::default()`.
    pub const fn without_settings<P: Plugin + Default + 'static>(name: &'static str) -> Self {
        Self {
            name,
            build: build_default::<P>,
            planning: build_default_planning::<P>,
        }
    }

    /// The same plugin, built to check and plan but never to run a step or read live state
    /// ([`PlanningOnly`]). A binary that names only this entry (a `const` evaluated at compile
    /// time) does not link the plugin's steps, nor the SDKs they call: the functions that check
    /// configs, plan and approve stay small.
    #[must_use]
    pub const fn planning_only(self) -> Self {
        Self {
            build: self.planning,
            ..self
        }
    }
}

fn build_full<P: FromSettings>(
    settings: &PluginSettings<'_>,
) -> Result<Arc<dyn Plugin>, FieldError> {
    Ok(Arc::new(P::from_settings(settings)?))
}

fn build_planning<P: FromSettings>(
    settings: &PluginSettings<'_>,
) -> Result<Arc<dyn Plugin>, FieldError> {
    Ok(Arc::new(PlanningOnly(P::from_settings(settings)?)))
}

fn build_default<P: Plugin + Default + 'static>(
    settings: &PluginSettings<'_>,
) -> Result<Arc<dyn Plugin>, FieldError> {
    settings.none()?;
    Ok(Arc::new(P::default()))
}

fn build_default_planning<P: Plugin + Default + 'static>(
    settings: &PluginSettings<'_>,
) -> Result<Arc<dyn Plugin>, FieldError> {
    settings.none()?;
    Ok(Arc::new(PlanningOnly(P::default())))
}

/// A plugin's planning face: everything that checks a config, plans stages and records an
/// approval, delegated to the plugin; running a step and reading live state are refused (only
/// the functions that run stages and check drift build whole plugins).
pub struct PlanningOnly<P>(P);

#[async_trait]
impl<P: Plugin> Plugin for PlanningOnly<P> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn stage_names(&self) -> &'static [&'static str] {
        self.0.stage_names()
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        self.0.deploys(app)
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        self.0.validate_stage(name, with)
    }

    fn check_app(
        &self,
        ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        self.0.check_app(ctx, read)
    }

    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        self.0.default_timeout(stage)
    }

    fn quick_sync_stages(&self, ctx: &PlanContext<'_>) -> Vec<Stage> {
        self.0.quick_sync_stages(ctx)
    }

    fn rollback_stages(&self, ctx: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        self.0.rollback_stages(ctx, planned)
    }

    fn determine_strategy(&self, ctx: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        self.0.determine_strategy(ctx)
    }

    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        Err(self.refused("run a step of", &ctx.stage.name))
    }

    async fn stop(&self, ctx: StopContext<'_>) -> Result<(), StepError> {
        Err(self.refused("stop", &ctx.stage.name))
    }

    async fn live_state(&self, _ctx: LiveContext<'_>) -> Result<Live, StepError> {
        Err(self.refused("read the live state of", "an app"))
    }

    fn live_read_runs_code(&self, app: &AppConfig) -> bool {
        self.0.live_read_runs_code(app)
    }

    fn approvable(&self, stage: &str) -> bool {
        self.0.approvable(stage)
    }

    fn approve(&self, stage: &Stage, user: &str, now: Millis) -> Result<Metadata, ApproveError> {
        self.0.approve(stage, user, now)
    }

    fn present(&self, stage: &Stage) -> Vec<crate::presentation::Detail> {
        self.0.present(stage)
    }
}

impl<P: Plugin> PlanningOnly<P> {
    fn refused(&self, what: &str, stage: &str) -> StepError {
        StepError::permanent(format!(
            "the {} plugin is built here to plan only: this process cannot {what} {stage}",
            self.0.name()
        ))
    }
}

/// What the runtime tells every plugin, beside its own settings.
#[derive(Clone, Debug, Default)]
pub struct RuntimeInfo {
    /// Environment variables that hold gannet's own secrets: no script may see them.
    pub secret_env: Vec<String>,
    /// Whether a job may run as an IAM role of its own (a deploy target's `jobRoleArn`).
    pub job_roles: crate::jobs::JobRoles,
}

/// One plugin's settings (`plugins.<name>`), with where they were written for its errors.
pub struct PluginSettings<'a> {
    at: String,
    value: &'a Value,
    pub runtime: &'a RuntimeInfo,
    /// The plugins built before this one (those listed before it in the registry): a plugin
    /// whose stages run other plugins' stages (the lifecycle phases) finds them here.
    pub earlier: Plugins,
}

/// The settings every platform plugin takes: its deploy targets.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TargetSettings<T> {
    #[serde(default = "Vec::new")]
    deploy_targets: Vec<T>,
}

/// The settings of a plugin that takes none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoSettings {}

impl<'a> PluginSettings<'a> {
    /// `value` as written at `at` (such as `plugins.lambda`); `null` when absent.
    pub fn new(at: impl Into<String>, value: &'a Value, runtime: &'a RuntimeInfo) -> Self {
        Self {
            at: at.into(),
            value,
            runtime,
            earlier: Plugins::default(),
        }
    }

    /// Where these settings were written, such as `plugins.lambda`.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// The settings as the plugin's own type; absent settings read as an empty map.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, FieldError> {
        let empty = Value::Object(Map::new());
        let value = match self.value {
            Value::Null => &empty,
            Value::Object(_) => self.value,
            other => {
                return Err(FieldError {
                    path: self.at.clone(),
                    message: format!(
                        "expected a map of settings, got {}",
                        crate::stage_options::json_kind(other)
                    ),
                })
            }
        };
        typed::from_value(value, &self.at)
    }

    /// For a plugin that takes no settings: anything but an empty map is an error.
    pub fn none(&self) -> Result<(), FieldError> {
        self.parse::<NoSettings>().map(|_| ())
    }

    /// A platform plugin's `deployTargets` (its only setting): each read as a `T`, every name
    /// given once, and each passing `check` (given the target's path, such as
    /// `plugins.ecs.deployTargets[1]`).
    pub fn deploy_targets<T: DeserializeOwned + Named>(
        &self,
        check: impl Fn(&str, &T) -> Result<(), FieldError>,
    ) -> Result<Vec<T>, FieldError> {
        let list = self.parse::<TargetSettings<T>>()?.deploy_targets;
        let at = format!("{}.deployTargets", self.at);
        targets::check_names(&list, &at)?;
        for (i, t) in list.iter().enumerate() {
            check(&format!("{at}[{i}]"), t)?;
        }
        Ok(list)
    }
}

/// The compiled-in plugins, each with how it is built.
#[derive(Clone, Default)]
pub struct Registry {
    specs: Vec<PluginSpec>,
}

impl Registry {
    pub fn new(specs: Vec<PluginSpec>) -> Self {
        Self { specs }
    }

    /// This registry with `spec` added, replacing a plugin of the same name.
    #[must_use]
    pub fn with(mut self, spec: PluginSpec) -> Self {
        self.specs.retain(|s| s.name != spec.name);
        self.specs.push(spec);
        self
    }

    /// The plugin names, in registry order.
    pub fn names(&self) -> Vec<&'static str> {
        self.specs.iter().map(|s| s.name).collect()
    }

    /// Builds every plugin from `settings` (the `plugins:` map, written at `root`, such as
    /// `plugins`; empty when the map is the whole value). A plugin without an entry is built
    /// with empty settings.
    pub fn build(
        &self,
        settings: &Map<String, Value>,
        root: &str,
        runtime: &RuntimeInfo,
    ) -> Result<Plugins, FieldError> {
        let names = self.names();
        if let Some(unknown) = settings.keys().find(|k| !names.contains(&k.as_str())) {
            let hint = typed::closest(unknown, names.iter().copied())
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(FieldError {
                path: typed::join_path(root, unknown),
                message: format!(
                    "no compiled-in plugin is named {unknown:?}{hint} (compiled in: {})",
                    names.join(", ")
                ),
            });
        }
        let mut list = Vec::with_capacity(self.specs.len());
        for spec in &self.specs {
            let value = settings.get(spec.name).unwrap_or(&Value::Null);
            let at = typed::join_path(root, spec.name);
            let mut settings = PluginSettings::new(at, value, runtime);
            settings.earlier = Plugins::new(list.clone());
            list.push((spec.build)(&settings)?);
        }
        Ok(Plugins::new(list))
    }

    /// Every plugin with empty settings: enough to check app configs, not to deploy.
    pub fn without_settings(&self) -> Result<Plugins, FieldError> {
        self.build(&Map::new(), "plugins", &RuntimeInfo::default())
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::plugin::{StageConfigError, StepContext, StepError, StepOutcome};

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Target {
        name: String,
        #[serde(default)]
        zone: Option<String>,
    }

    impl Named for Target {
        fn name(&self) -> &str {
            &self.name
        }
    }

    #[derive(Default)]
    struct Fake;

    #[async_trait]
    impl Plugin for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn stage_names(&self) -> &'static [&'static str] {
            &["FAKE"]
        }
        fn validate_stage(&self, _: &str, w: &Value) -> Result<Value, StageConfigError> {
            crate::stage_options::none(w)
        }
        async fn execute_step(&self, _: StepContext<'_>) -> Result<StepOutcome, StepError> {
            Err(StepError::permanent("registry tests run no steps"))
        }
        async fn live_state(&self, _: LiveContext<'_>) -> Result<Live, StepError> {
            Ok(Live::NotRead)
        }
        fn approvable(&self, stage: &str) -> bool {
            stage == "FAKE"
        }
    }

    impl FromSettings for Fake {
        fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
            let _: Vec<Target> =
                settings.deploy_targets(|at, t: &Target| match t.zone.as_deref() {
                    Some("") => Err(FieldError {
                        path: format!("{at}.zone"),
                        message: "must not be empty".into(),
                    }),
                    _ => Ok(()),
                })?;
            Ok(Fake)
        }
    }

    fn registry() -> Registry {
        Registry::new(vec![
            PluginSpec::new::<Fake>("fake"),
            PluginSpec::without_settings::<Fake>("quiet"),
        ])
    }

    fn check(settings: Value) -> Result<usize, String> {
        let map = settings.as_object().cloned().unwrap_or_default();
        registry()
            .build(&map, "plugins", &RuntimeInfo::default())
            .map(|p| p.iter().count())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn settings_go_to_the_plugin_that_owns_the_name() {
        assert_eq!(check(json!({})), Ok(2));
        assert_eq!(
            check(json!({"fake": {"deployTargets": [{"name": "a"}, {"name": "b"}]}})),
            Ok(2)
        );
        let cases = [
            (
                json!({"faek": {}}),
                "plugins.faek: no compiled-in plugin is named \"faek\"; did you mean `fake`? (compiled in: fake, quiet)",
            ),
            (
                json!({"kubernetes": {}}),
                "plugins.kubernetes: no compiled-in plugin is named \"kubernetes\" (compiled in: fake, quiet)",
            ),
            (
                json!({"fake": {"targets": []}}),
                "plugins.fake.targets: unknown field `targets`; did you mean `deployTargets`?",
            ),
            (
                json!({"fake": {"deployTargets": [{"nam": "a"}]}}),
                "plugins.fake.deployTargets[0].nam: unknown field `nam`; did you mean `name`?",
            ),
            (
                json!({"fake": {"deployTargets": [{"name": "a"}, {"name": "a"}]}}),
                "plugins.fake.deployTargets[1].name: a is listed twice",
            ),
            (
                json!({"fake": {"deployTargets": [{"name": " "}]}}),
                "plugins.fake.deployTargets[0].name: must not be empty",
            ),
            (
                json!({"fake": {"deployTargets": [{"name": "a", "zone": ""}]}}),
                "plugins.fake.deployTargets[0].zone: must not be empty",
            ),
            (
                json!({"quiet": {"deployTargets": []}}),
                "plugins.quiet.deployTargets: unknown field `deployTargets`; there are no fields here",
            ),
            (
                json!({"fake": "all"}),
                "plugins.fake: expected a map of settings, got a string",
            ),
            (
                json!({"fake": []}),
                "plugins.fake: expected a map of settings, got a list",
            ),
        ];
        for (settings, want) in cases {
            let got = check(settings.clone()).unwrap_err();
            assert!(got.starts_with(want), "{settings}: {got}");
        }
    }

    #[test]
    fn a_later_spec_replaces_one_of_the_same_name() {
        let r = registry().with(PluginSpec::without_settings::<Fake>("fake"));
        assert_eq!(r.names(), ["quiet", "fake"]);
        assert!(r.without_settings().is_ok());
    }

    #[test]
    fn a_planning_face_checks_and_approves_as_its_plugin_but_reads_nothing_live() {
        let runtime = RuntimeInfo::default();
        for spec in [
            PluginSpec::new::<Fake>("fake"),
            PluginSpec::without_settings::<Fake>("quiet"),
        ] {
            let planning = spec.planning_only();
            assert_eq!(planning.name, spec.name);
            let settings = Value::Null;
            let plugin = (planning.build)(&PluginSettings::new(spec.name, &settings, &runtime))
                .expect("builds");
            assert_eq!(plugin.stage_names(), ["FAKE"]);
            assert!(plugin.approvable("FAKE"));
            assert!(plugin.validate_stage("FAKE", &json!({})).is_ok());
            assert!(plugin.validate_stage("FAKE", &json!({"x": 1})).is_err());

            let app = crate::config::parse_app_config(
                "app.pipecd.yaml",
                "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec: {name: web}\n",
            )
            .expect("parses");
            let id = crate::AppId::new(&crate::RepoId::parse("r").unwrap(), "app.pipecd.yaml");
            let head = crate::ids::CommitSha::parse(&"0".repeat(40)).unwrap();
            let ctx = LiveContext {
                app_id: &id,
                app: &app,
                app_dir: std::path::Path::new("."),
                head: &head,
                last_deployed: None,
                now: Millis(0),
                jobs: &crate::jobs::NoJobs,
            };
            // The planning face answers at once: polled once, with a waker that is never used.
            let mut live = plugin.live_state(ctx);
            let mut poll = std::task::Context::from_waker(std::task::Waker::noop());
            let std::task::Poll::Ready(Err(err)) =
                std::future::Future::poll(live.as_mut(), &mut poll)
            else {
                panic!("the planning face read live state");
            };
            assert_eq!(
                err.to_string(),
                "the fake plugin is built here to plan only: this process cannot read the live state of an app"
            );
        }
    }
}
