//! Preview credentials: a deploy target's `planPreview`, the credentials a plan preview of a
//! pull request reads with, never the target's own.
//!
//! A preview runs what an unmerged commit holds (Terraform providers, Helm charts), so it must
//! not hold the rights a deployment has. Each platform plugin names the fields of its targets
//! that carry credentials ([`crate::registry::PluginSpec::preview_credentials`]: `roleArn` for
//! the AWS plugins, `allowEnv` and `jobRoleArn` for Terraform, the connection fields for
//! Kubernetes, ...). A target's `planPreview` may set only those fields, and must set one.
//! The plugins a preview reads with are built from the targets that have a `planPreview`, each
//! with its credential fields taken out and `planPreview`'s put in; a target without one is
//! not among them at all, so an app deployed through it is previewed without reading the
//! platform (see [`Previews::credentials_for`]).

use std::collections::BTreeMap;

use gannet_config::typed::{self, FieldError};
use gannet_config::AppConfig;
use serde_json::{Map, Value};

use crate::plugin::Plugins;

/// The key of a deploy target's preview credentials.
pub const PLAN_PREVIEW: &str = "planPreview";

/// The targets of one plugin, by name: all of them, and those with preview credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PreviewTargets {
    pub(crate) all: Vec<String>,
    pub(crate) credentialed: Vec<String>,
}

/// The plugins a plan preview reads with, and which targets they hold.
#[derive(Clone, Default)]
pub struct Previews {
    pub plugins: Plugins,
    pub(crate) targets: BTreeMap<String, PreviewTargets>,
}

impl std::fmt::Debug for Previews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Previews")
            .field("targets", &self.targets)
            .finish_non_exhaustive()
    }
}

impl Previews {
    /// Preview plugins reading through the targets named: per plugin, all its targets and
    /// those with preview credentials (the registry builds them from the settings:
    /// [`crate::registry::Registry::build_with_previews`]).
    pub fn new<'a>(
        plugins: Plugins,
        targets: impl IntoIterator<Item = (&'a str, &'a [&'a str], &'a [&'a str])>,
    ) -> Self {
        let names = |list: &[&str]| list.iter().map(|t| (*t).to_owned()).collect();
        Self {
            plugins,
            targets: targets
                .into_iter()
                .map(|(plugin, all, credentialed)| {
                    let targets = PreviewTargets {
                        all: names(all),
                        credentialed: names(credentialed),
                    };
                    (plugin.to_owned(), targets)
                })
                .collect(),
        }
    }

    /// Whether a preview of `app` (deployed by `plugin`) may read the platform with preview
    /// credentials; `Err` says why not, for the preview to show.
    pub fn credentials_for(&self, plugin: &str, app: &AppConfig) -> Result<(), String> {
        let targets = self.targets.get(plugin).cloned().unwrap_or_default();
        match app.deploy_targets().first() {
            Some(name) if targets.credentialed.iter().any(|t| t == name) => Ok(()),
            Some(name) => Err(format!(
                "deploy target {name} has no {PLAN_PREVIEW} credentials (plugins.{plugin}.deployTargets)"
            )),
            None if targets.all.len() == 1 && targets.credentialed.len() == 1 => Ok(()),
            None if targets.all.len() == 1 => Err(format!(
                "deploy target {} has no {PLAN_PREVIEW} credentials (plugins.{plugin}.deployTargets)",
                targets.all[0]
            )),
            None => Err(format!(
                "the app names no deploy target and plugins.{plugin} has {} of them",
                targets.all.len()
            )),
        }
    }
}

/// The `plugins:` map split by [`split`].
pub(crate) struct Split {
    /// The plugins' own settings, every target's `planPreview` taken out.
    pub(crate) deploy: Map<String, Value>,
    /// The settings the preview plugins are built from.
    pub(crate) preview: Map<String, Value>,
    pub(crate) targets: BTreeMap<String, PreviewTargets>,
}

/// `settings` (the `plugins:` map) split in two ([`Split`]). `credentials` names each
/// plugin's credential fields.
pub(crate) fn split(
    settings: &Map<String, Value>,
    root: &str,
    credentials: &dyn Fn(&str) -> &'static [&'static str],
) -> Result<Split, FieldError> {
    let mut deploy = settings.clone();
    let mut preview = settings.clone();
    let mut found = BTreeMap::new();
    for (plugin, value) in settings {
        let Some(list) = value.get("deployTargets").and_then(Value::as_array) else {
            continue;
        };
        let fields = credentials(plugin);
        let at = typed::join_path(&typed::join_path(root, plugin), "deployTargets");
        let mut kept = Vec::with_capacity(list.len());
        let mut credentialed = Vec::new();
        let mut names = PreviewTargets::default();
        for (i, target) in list.iter().enumerate() {
            let Some(object) = target.as_object() else {
                kept.push(target.clone());
                continue;
            };
            let name = object
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            names.all.push(name.to_owned());
            let mut own = object.clone();
            let Some(asked) = own.remove(PLAN_PREVIEW) else {
                kept.push(Value::Object(own));
                continue;
            };
            let at = format!("{at}[{i}].{PLAN_PREVIEW}");
            let with = preview_target(&own, &asked, fields, plugin, &at)?;
            names.credentialed.push(name.to_owned());
            credentialed.push(Value::Object(with));
            kept.push(Value::Object(own));
        }
        set_targets(&mut deploy, plugin, kept);
        set_targets(&mut preview, plugin, credentialed);
        found.insert(plugin.clone(), names);
    }
    Ok(Split {
        deploy,
        preview,
        targets: found,
    })
}

fn set_targets(settings: &mut Map<String, Value>, plugin: &str, targets: Vec<Value>) {
    if let Some(Value::Object(entry)) = settings.get_mut(plugin) {
        entry.insert("deployTargets".into(), Value::Array(targets));
    }
}

/// `target` with its credential `fields` replaced by those `asked` sets.
fn preview_target(
    target: &Map<String, Value>,
    asked: &Value,
    fields: &[&str],
    plugin: &str,
    at: &str,
) -> Result<Map<String, Value>, FieldError> {
    let refuse = |path: String, message: String| Err(FieldError { path, message });
    if fields.is_empty() {
        return refuse(
            at.to_owned(),
            format!("the {plugin} plugin reads nothing a preview would need credentials for"),
        );
    }
    let Some(asked) = asked.as_object() else {
        return refuse(
            at.to_owned(),
            format!(
                "expected a map of credential fields ({})",
                fields.join(", ")
            ),
        );
    };
    if asked.is_empty() {
        return refuse(
            at.to_owned(),
            format!(
                "name the credentials previews read with: one of {}",
                fields.join(", ")
            ),
        );
    }
    if let Some(other) = asked.keys().find(|k| !fields.contains(&k.as_str())) {
        return refuse(
            typed::join_path(at, other),
            format!(
                "not a credential field of the {plugin} plugin; {PLAN_PREVIEW} takes {}",
                fields.join(", ")
            ),
        );
    }
    let mut with = target.clone();
    with.retain(|k, _| !fields.contains(&k.as_str()));
    with.extend(asked.clone());
    Ok(with)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn credentials(plugin: &str) -> &'static [&'static str] {
        match plugin {
            "lambda" => &["roleArn"],
            "terraform" => &["allowEnv", "jobRoleArn"],
            _ => &[],
        }
    }

    fn split_json(
        v: Value,
    ) -> Result<(Value, Value, BTreeMap<String, PreviewTargets>), FieldError> {
        let Value::Object(map) = v else { panic!() };
        split(&map, "plugins", &credentials)
            .map(|s| (Value::Object(s.deploy), Value::Object(s.preview), s.targets))
    }

    #[test]
    fn a_preview_target_has_its_own_credentials_and_never_the_targets() {
        let (deploy, preview, targets) = split_json(json!({
            "lambda": {"deployTargets": [
                {"name": "prod", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/deploy",
                 "planPreview": {"roleArn": "arn:aws:iam::1:role/read"}},
                {"name": "dev", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/dev"}
            ]},
            "terraform": {"deployTargets": [
                {"name": "tf", "allowEnv": ["TF_TOKEN"], "env": {"TF_IN_AUTOMATION": "1"},
                 "planPreview": {"allowEnv": ["TF_READ_TOKEN"]}}
            ]},
            "wait": {}
        }))
        .unwrap();
        assert_eq!(
            deploy["lambda"]["deployTargets"],
            json!([
                {"name": "prod", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/deploy"},
                {"name": "dev", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/dev"}
            ])
        );
        assert_eq!(
            preview["lambda"]["deployTargets"],
            json!([{"name": "prod", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/read"}])
        );
        assert_eq!(
            preview["terraform"]["deployTargets"],
            json!([{"name": "tf", "env": {"TF_IN_AUTOMATION": "1"}, "allowEnv": ["TF_READ_TOKEN"]}])
        );
        assert_eq!(preview["wait"], json!({}));
        assert_eq!(targets["lambda"].all, ["prod", "dev"]);
        assert_eq!(targets["lambda"].credentialed, ["prod"]);
    }

    #[test]
    fn a_preview_names_only_credential_fields_and_at_least_one() {
        let cases = [
            (
                json!({"lambda": {"deployTargets": [{"name": "a", "planPreview": {"region": "eu-west-1"}}]}}),
                "plugins.lambda.deployTargets[0].planPreview.region: not a credential field of the lambda plugin; planPreview takes roleArn",
            ),
            (
                json!({"lambda": {"deployTargets": [{"name": "a", "planPreview": {}}]}}),
                "plugins.lambda.deployTargets[0].planPreview: name the credentials previews read with: one of roleArn",
            ),
            (
                json!({"lambda": {"deployTargets": [{"name": "a", "planPreview": "arn"}]}}),
                "plugins.lambda.deployTargets[0].planPreview: expected a map of credential fields (roleArn)",
            ),
            (
                json!({"other": {"deployTargets": [{"name": "a", "planPreview": {"x": 1}}]}}),
                "plugins.other.deployTargets[0].planPreview: the other plugin reads nothing a preview would need credentials for",
            ),
        ];
        for (settings, want) in cases {
            let err = split_json(settings).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn an_app_reads_with_credentials_only_through_a_target_that_has_them() {
        let (_, _, targets) = split_json(json!({
            "lambda": {"deployTargets": [
                {"name": "prod", "planPreview": {"roleArn": "arn:aws:iam::1:role/read"}},
                {"name": "dev"}
            ]},
            "terraform": {"deployTargets": [{"name": "tf"}]}
        }))
        .unwrap();
        let previews = Previews {
            plugins: Plugins::default(),
            targets,
        };
        let app = |targets: &str| {
            gannet_config::parse_app_config(
                "app.pipecd.yaml",
                &format!("apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: a\n  plugins:\n    lambda: {{}}\n{targets}"),
            )
            .unwrap()
        };
        let named = |t: &str| app(&format!("  deployTargets: [{t}]\n"));
        assert_eq!(previews.credentials_for("lambda", &named("prod")), Ok(()));
        assert_eq!(
            previews.credentials_for("lambda", &named("dev")),
            Err(
                "deploy target dev has no planPreview credentials (plugins.lambda.deployTargets)"
                    .into()
            )
        );
        assert_eq!(
            previews.credentials_for("lambda", &app("")),
            Err("the app names no deploy target and plugins.lambda has 2 of them".into())
        );
        assert_eq!(
            previews.credentials_for("terraform", &app("")),
            Err(
                "deploy target tf has no planPreview credentials (plugins.terraform.deployTargets)"
                    .into()
            )
        );
    }
}
