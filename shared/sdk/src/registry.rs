//! The plugin registry: how each compiled-in plugin is built from its settings. gannet.yaml's
//! `plugins:` map and the AWS runtime's `GANNET_PLUGINS` (the same map, as JSON) are read here
//! once, generically: each `plugins.<name>` goes to the plugin that owns the name, and a name no
//! compiled-in plugin owns is an error that lists the ones that are.
//!
//! The list itself lives outside the core (the `gannet-plugins` crate), because the core and
//! the controller must not depend on any plugin.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::plugin::{Faces, LiveStates, Plugin, Plugins, Steps};
use crate::previews::{self, Previews};
use crate::targets::{self, Named};
use gannet_config::typed::{self, FieldError};

/// Builds a plugin's faces from its settings; errors name the field at fault.
pub type BuildFn = fn(&PluginSettings<'_>) -> Result<Faces, FieldError>;

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
    /// The fields of its deploy targets that carry credentials: a target's `planPreview`
    /// replaces them for plan previews ([`crate::previews`]). Empty: no `planPreview`.
    pub preview_credentials: &'static [&'static str],
}

impl PluginSpec {
    /// A plugin that runs stages and reads no live state, built from its settings.
    pub const fn stages<P: FromSettings + Steps>(name: &'static str) -> Self {
        Self {
            name,
            build: build_stages::<P>,
            planning: build_planning::<P>,
            preview_credentials: &[],
        }
    }

    /// A platform plugin (it runs stages and reads live state), built from its settings.
    pub const fn platform<P: FromSettings + Steps + LiveStates>(name: &'static str) -> Self {
        Self {
            name,
            build: build_platform::<P>,
            planning: build_planning::<P>,
            preview_credentials: &[],
        }
    }

    /// A plugin that runs stages, takes no settings and is built by `P::default()`.
    pub const fn stages_without_settings<P: Plugin + Steps + Default + 'static>(
        name: &'static str,
    ) -> Self {
        Self {
            name,
            build: build_default::<P>,
            planning: build_default_planning::<P>,
            preview_credentials: &[],
        }
    }

    /// The same plugin, built to check, plan, present and approve but never to run a step or
    /// read live state ([`Faces::planning`]). A binary that names only this entry (a `const`
    /// evaluated at compile time) does not link the plugin's steps, nor the SDKs they call:
    /// the functions that check configs, plan and approve stay small.
    #[must_use]
    pub const fn preview_credentials(self, fields: &'static [&'static str]) -> Self {
        Self {
            preview_credentials: fields,
            ..self
        }
    }

    #[must_use]
    pub const fn planning_only(self) -> Self {
        Self {
            build: self.planning,
            ..self
        }
    }
}

fn build_stages<P: FromSettings + Steps>(s: &PluginSettings<'_>) -> Result<Faces, FieldError> {
    Ok(Faces::stages(Arc::new(P::from_settings(s)?)))
}

fn build_platform<P: FromSettings + Steps + LiveStates>(
    s: &PluginSettings<'_>,
) -> Result<Faces, FieldError> {
    Ok(Faces::platform(Arc::new(P::from_settings(s)?)))
}

fn build_planning<P: FromSettings>(s: &PluginSettings<'_>) -> Result<Faces, FieldError> {
    Ok(Faces::planning(Arc::new(P::from_settings(s)?)))
}

fn build_default<P: Plugin + Steps + Default + 'static>(
    s: &PluginSettings<'_>,
) -> Result<Faces, FieldError> {
    s.none()?;
    Ok(Faces::stages(Arc::new(P::default())))
}

fn build_default_planning<P: Plugin + Default + 'static>(
    s: &PluginSettings<'_>,
) -> Result<Faces, FieldError> {
    s.none()?;
    Ok(Faces::planning(Arc::new(P::default())))
}

/// What the runtime tells every plugin, beside its own settings.
#[derive(Clone, Debug, Default)]
pub struct RuntimeInfo {
    /// Environment variables that hold gannet's own secrets: no script may see them.
    pub secret_env: Vec<String>,
    /// Whether a job may run as an IAM role of its own (a deploy target's `jobRoleArn`).
    pub job_roles: crate::jobs::JobRoles,
    /// Whose settings these are, so a plugin knows what planning may check against them.
    pub installation: Installation,
}

/// Whose settings a plugin is built from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Installation {
    /// None: `config check` reads a repository without gannet's settings, so what an
    /// installation defines (analysis providers, their credentials) is not checked.
    #[default]
    None,
    /// `gannet up`: one process plans and runs every stage, so a secret a stage will read can
    /// be checked when the deployment is planned.
    OneProcess,
    /// The AWS functions: the plan function checks what the settings define, but does not
    /// hold the secrets only the stage function is given.
    Functions,
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
        self.build_with_previews(settings, root, runtime)
            .map(|(plugins, _)| plugins)
    }

    /// [`Registry::build`], and the plugins plan previews read with: built from the deploy
    /// targets that have a `planPreview`, with those credentials instead of their own
    /// ([`crate::previews`]).
    pub fn build_with_previews(
        &self,
        settings: &Map<String, Value>,
        root: &str,
        runtime: &RuntimeInfo,
    ) -> Result<(Plugins, Previews), FieldError> {
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
        let credentials = |name: &str| {
            self.specs
                .iter()
                .find(|s| s.name == name)
                .map_or(&[][..], |s| s.preview_credentials)
        };
        let split = previews::split(settings, root, &credentials)?;
        let plugins = self.build_each(&split.deploy, root, runtime)?;
        let preview_plugins = self.build_each(&split.preview, root, runtime)?;
        Ok((
            plugins,
            Previews {
                plugins: preview_plugins,
                targets: split.targets,
            },
        ))
    }

    fn build_each(
        &self,
        settings: &Map<String, Value>,
        root: &str,
        runtime: &RuntimeInfo,
    ) -> Result<Plugins, FieldError> {
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
    use crate::plugin::{
        Live, LiveContext, Presenter, StageConfigError, StepContext, StepError, StepOutcome,
    };

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
    }

    impl Presenter for Fake {
        fn approvable(&self, stage: &str) -> bool {
            stage == "FAKE"
        }
    }

    #[async_trait]
    impl Steps for Fake {
        async fn execute_step(&self, _: StepContext<'_>) -> Result<StepOutcome, StepError> {
            Err(StepError::permanent("registry tests run no steps"))
        }
    }

    #[async_trait]
    impl LiveStates for Fake {
        async fn live_state(&self, _: LiveContext<'_>) -> Result<Live, StepError> {
            Ok(Live::NotRead)
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
            PluginSpec::platform::<Fake>("fake"),
            PluginSpec::stages_without_settings::<Fake>("quiet"),
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
        let r = registry().with(PluginSpec::stages_without_settings::<Fake>("fake"));
        assert_eq!(r.names(), ["quiet", "fake"]);
        assert!(r.without_settings().is_ok());
    }

    #[test]
    fn a_planning_build_checks_and_approves_as_its_plugin_but_runs_and_reads_nothing() {
        let runtime = RuntimeInfo::default();
        for spec in [
            PluginSpec::platform::<Fake>("fake"),
            PluginSpec::stages_without_settings::<Fake>("quiet"),
        ] {
            let settings = Value::Null;
            let build = |spec: PluginSpec| {
                (spec.build)(&PluginSettings::new(spec.name, &settings, &runtime)).expect("builds")
            };
            let whole = build(spec);
            let planning = build(spec.planning_only());
            for plugin in [&whole, &planning] {
                assert_eq!(plugin.stage_names(), ["FAKE"]);
                assert!(plugin.approvable("FAKE"));
                assert!(plugin.validate_stage("FAKE", &json!({})).is_ok());
                assert!(plugin.validate_stage("FAKE", &json!({"x": 1})).is_err());
            }
            assert!(whole.steps().is_ok());
            let refused = |e: StepError| e.to_string();
            assert_eq!(
                planning.steps().err().map(refused).as_deref(),
                Some("the fake plugin is built here to plan only: this process cannot run or stop the stages of fake")
            );
            assert_eq!(
                planning.live().err().map(refused).as_deref(),
                Some("the fake plugin is built here to plan only: this process cannot read live state with fake")
            );
            assert!(
                whole.live().is_ok(),
                "a plugin with no live face reads nothing"
            );
        }
    }
}
