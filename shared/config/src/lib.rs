//! PipeCD application configs (`app.pipecd.yaml`, `*.pipecd.yaml`, legacy `.pipe.yaml`):
//! parsing, defaults, located errors, and the features gannet does not support yet.
//!
//! Field names and defaults follow PipeCD's `pkg/config` (v0 kinds) and `pkg/configv1`
//! (plugin-era `Application`). gannet is stricter than PipeCD in one way: an unknown field is
//! an error that names it (except under a stage's `with` and under `spec.plugins`, which
//! belong to plugins).

pub mod bounded;
#[cfg(any(test, feature = "test-util"))]
pub mod fixture;
pub mod glob;
mod lines;
mod parse;
mod platform;
mod spec;
pub mod trigger;
pub mod typed;
mod unsupported;
mod validate;
pub mod yaml;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use gannet_domain::duration::GoDuration;

pub use lines::LineIndex;
pub use parse::parse_app_config;
pub use parse::{load_yaml, without_position};
pub use platform::Percentage;
pub use spec::*;
pub use unsupported::{Unsupported, DRIFT_IGNORE_FIELDS};

/// The only apiVersion PipeCD has.
pub const API_VERSION: &str = "pipecd.dev/v1beta1";

/// True for a file that holds an app config.
pub fn is_app_config_path(path: &str) -> bool {
    path.ends_with(".pipecd.yaml") || path.ends_with(".pipe.yaml")
}

/// The config's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AppKind {
    LambdaApp,
    EcsApp,
    CloudRunApp,
    TerraformApp,
    KubernetesApp,
    /// The plugin-era kind: what deploys it is named by `spec.plugin` / `spec.plugins`.
    Application,
}

impl AppKind {
    pub const ALL: [AppKind; 6] = [
        Self::LambdaApp,
        Self::EcsApp,
        Self::CloudRunApp,
        Self::TerraformApp,
        Self::KubernetesApp,
        Self::Application,
    ];

    /// The kind as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LambdaApp => "LambdaApp",
            Self::EcsApp => "ECSApp",
            Self::CloudRunApp => "CloudRunApp",
            Self::TerraformApp => "TerraformApp",
            Self::KubernetesApp => "KubernetesApp",
            Self::Application => "Application",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for AppKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An app config that did not parse: the file, the 1-based line, the field, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub path: String,
    pub line: usize,
    /// Such as `spec.pipeline.stages[1].with.duration`; empty for a YAML syntax error.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.path, self.line)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// The platform part of a config. A v0 kind's own fields (`input`, `quickSync`, `service`,
/// ...) are kept as written: they belong to the kind's plugin ([`V0_KINDS`]), which reads them
/// as its own spec ([`AppConfig::platform_spec`]), as PipeCD v1 keeps `spec.plugins.<name>`
/// opaque to piped. An `Application`'s plugin-era fields are generic.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PlatformSpec {
    Fields(serde_json::Map<String, serde_json::Value>),
    Application(ApplicationSpec),
}

/// Each v0 platform kind and the plugin that deploys it (and owns its fields): the one place
/// a kind meets a plugin's name.
pub const V0_KINDS: [(AppKind, &str); 5] = [
    (AppKind::LambdaApp, "lambda"),
    (AppKind::EcsApp, "ecs"),
    (AppKind::CloudRunApp, "cloudrun"),
    (AppKind::TerraformApp, "terraform"),
    (AppKind::KubernetesApp, "kubernetes"),
];

/// The fields a v0 kind's spec may hold beside the generic ones; which of them a kind takes
/// is its plugin's to say.
pub(crate) const V0_FIELDS: [&str; 7] = [
    "input",
    "quickSync",
    "service",
    "workloads",
    "trafficRouting",
    "variantLabel",
    "resourceRoutes",
];

/// Options that take no fields (a `quickSync` with none, such as Lambda's or Cloud Run's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptyOptions {}

/// The plugin-era fields of an `Application`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApplicationSpec {
    /// The plugin that deploys the app; optional when `spec.plugins` names one platform.
    pub plugin: Option<String>,
    pub deploy_target: Option<String>,
    pub deploy_targets: Vec<String>,
}

/// A parsed app config. Only [`parse_app_config`] makes one, so it is always complete.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppConfig {
    pub kind: AppKind,
    spec: GenericSpec,
    platform: PlatformSpec,
    /// The plugin that deploys the app, resolved when parsing.
    platform_name: Option<String>,
}

impl AppConfig {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.spec.labels
    }

    pub fn description(&self) -> &str {
        &self.spec.description
    }

    /// Every generic field.
    pub fn spec(&self) -> &GenericSpec {
        &self.spec
    }

    /// The configured pipeline stages; empty when there is no pipeline.
    pub fn stages(&self) -> &[StageConfig] {
        &self.spec.stages
    }

    pub fn has_pipeline(&self) -> bool {
        !self.spec.stages.is_empty()
    }

    pub fn planner(&self) -> PlannerOptions {
        self.spec.planner
    }

    pub fn commit_matcher(&self) -> &CommitMatcher {
        &self.spec.commit_matcher
    }

    pub fn trigger(&self) -> &TriggerConfig {
        &self.spec.trigger
    }

    /// The deployment timeout (6h unless configured).
    pub fn timeout(&self) -> GoDuration {
        self.spec.timeout
    }

    /// The plugin that deploys the app: `lambda`, `ecs`, `cloudrun`, `terraform` or
    /// `kubernetes` for the platform kinds; for the plugin era, `spec.plugin`, or the one
    /// platform plugin `spec.plugins` configures. `None` when the app has only generic stages.
    /// A platform plugin's `Plugin::deploys` (gannet-sdk) compares its name with this.
    pub fn platform(&self) -> Option<&str> {
        self.platform_name.as_deref()
    }

    /// `input.<key>` as the app writes it for `plugin` (a file it names, say), with the field
    /// that holds or would hold it: a v0 kind's `spec.input.<key>`, or a plugin-era app's
    /// `spec.plugins.<plugin>.input.<key>` (`spec.plugins.<plugin>` when it is not written).
    /// A value that is not a non-empty string reads as not written: the plugin's own check
    /// (`Plugin::app_files`, gannet-sdk) refuses it before anything deploys.
    pub fn input_field(&self, plugin: &str, key: &str) -> (Option<&str>, String) {
        fn written<'a>(input: Option<&'a serde_json::Value>, key: &str) -> Option<&'a str> {
            input
                .and_then(|i| i.get(key))
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
        }
        match &self.platform {
            PlatformSpec::Fields(fields) => (
                written(fields.get("input"), key),
                format!("spec.input.{key}"),
            ),
            PlatformSpec::Application(_) => {
                let input = self.plugin_config(plugin).and_then(|c| c.get("input"));
                match written(input, key) {
                    Some(value) => (Some(value), format!("spec.plugins.{plugin}.input.{key}")),
                    None => (None, format!("spec.plugins.{plugin}")),
                }
            }
        }
    }

    /// `spec.plugins.<name>`, free-form.
    pub fn plugin_config(&self, name: &str) -> Option<&serde_json::Value> {
        self.spec.plugins.get(name)
    }

    /// The kind's own fields read as its plugin's spec `T` (absent fields take `T`'s
    /// defaults). The error names the field (`spec.input.functionManifestFile`), and a field
    /// `T` does not know at the top of `spec` is "unknown for kind K". An `Application` has no
    /// such fields: its plugins read `spec.plugins.<name>` ([`AppConfig::plugin_config`]).
    pub fn platform_spec<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Result<T, crate::typed::FieldError> {
        let empty = serde_json::Map::new();
        let fields = match &self.platform {
            PlatformSpec::Fields(fields) => fields,
            PlatformSpec::Application(_) => &empty,
        };
        let value = serde_json::Value::Object(fields.clone());
        parse::typed::<T, _>(value, "spec").map_err(|e| {
            let message = match e.field.strip_prefix("spec.") {
                Some(key)
                    if !key.contains(['.', '[']) && e.message.starts_with("unknown field") =>
                {
                    format!("unknown field `{key}` for kind {}", self.kind)
                }
                _ => e.message,
            };
            crate::typed::FieldError {
                path: e.field,
                message,
            }
        })
    }

    pub fn application(&self) -> Option<&ApplicationSpec> {
        match &self.platform {
            PlatformSpec::Application(s) => Some(s),
            _ => None,
        }
    }

    /// The deploy targets the config names (`spec.deployTarget` and `spec.deployTargets`).
    pub fn deploy_targets(&self) -> Vec<&str> {
        self.application().map_or_else(Vec::new, |a| {
            a.deploy_target
                .iter()
                .chain(a.deploy_targets.iter())
                .map(String::as_str)
                .collect()
        })
    }

    /// The features this config uses that gannet does not support yet. They are not parse
    /// errors: the planner and `config check` report them by name.
    pub fn unsupported_features(&self) -> Vec<Unsupported> {
        unsupported::find(self)
    }

    /// The features this config uses that only some platforms support, each as what it is
    /// when the app's platform does not: `config check` asks the platform plugin
    /// (`Plugin::honours`) and reports the rest as unsupported.
    pub fn platform_features(&self) -> Vec<Unsupported> {
        unsupported::platform_dependent(self)
    }
}
