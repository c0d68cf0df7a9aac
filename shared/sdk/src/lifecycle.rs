//! Keptn-style lifecycle phases: `preDeployment` and `postDeployment`, each a set of tasks
//! (commands run as jobs, with SCRIPT_RUN's options) and evaluations (checks with ANALYSIS's
//! options), all of a phase's items at the same time.
//!
//! They are written in a file beside the app config, `<name>.gannet.yaml` for
//! `<name>.pipecd.yaml` (`app.gannet.yaml` beside `app.pipecd.yaml`). A file, not a key:
//! PipeCD reads `app.pipecd.yaml` strictly (an unknown field at the top or in `spec` fails its
//! whole config), and it never reads a file whose name does not end in `.pipecd.yaml`, so a
//! repository with the file still works with PipeCD.
//!
//! ```yaml
//! apiVersion: gannet.dev/v1
//! kind: Lifecycle
//! spec:
//!   preDeployment:
//!     tasks:
//!       - name: migrate
//!         run: ./migrate.sh
//!     evaluations:
//!       - name: upstream
//!         duration: 2m
//!         https:
//!           - url: https://upstream.example.com/healthz
//!             expectedCode: 200
//!   postDeployment:
//!     evaluations: [...]
//! ```
//!
//! The planner makes each phase one stage (the pre-deployment phase first, the post-deployment
//! one after the last deploying stage), named and run by the plugin that runs the phases
//! ([`crate::plugin::Plugin::phase_stage`]); the stage's `with` is
//! [`Phase::with`]: `{"tasks": [{"name", "with"}], "evaluations": [...]}`.

use serde_json::{Map, Value};

use crate::plugin::{Plugins, StageConfigError};
use crate::stage_options::json_kind;
use gannet_config::{load_yaml, ConfigError, LineIndex};
use gannet_domain::deployment::Stage;
use gannet_domain::ids::StageId;
use gannet_domain::machine;

/// The lifecycle file's `apiVersion`.
pub const API_VERSION: &str = "gannet.dev/v1";
/// The lifecycle file's `kind`.
pub const KIND: &str = "Lifecycle";
/// An item's name: what its log lines and job are named by.
const MAX_NAME: usize = 40;

/// The lifecycle file beside the app config at `config_path`: `apps/web/app.gannet.yaml` for
/// `apps/web/app.pipecd.yaml` (and for the legacy `apps/web/app.pipe.yaml`).
pub fn file_for(config_path: &str) -> String {
    let stem = config_path
        .strip_suffix(".pipecd.yaml")
        .or_else(|| config_path.strip_suffix(".pipe.yaml"))
        .unwrap_or(config_path);
    format!("{stem}.gannet.yaml")
}

/// The two phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseKind {
    Pre,
    Post,
}

impl PhaseKind {
    pub const ALL: [Self; 2] = [Self::Pre, Self::Post];

    /// The key under `spec`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Pre => "preDeployment",
            Self::Post => "postDeployment",
        }
    }

    /// The id of the phase's stage in a deployment.
    pub fn stage_id(self) -> &'static str {
        match self {
            Self::Pre => machine::PRE_DEPLOYMENT_STAGE_ID,
            Self::Post => machine::POST_DEPLOYMENT_STAGE_ID,
        }
    }
}

/// One task or evaluation: its name and its options.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub name: String,
    pub with: Value,
}

/// One phase's items as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Phase {
    pub tasks: Vec<Item>,
    pub evaluations: Vec<Item>,
}

impl Phase {
    /// The phase as its stage's `with`.
    pub fn with(&self) -> Value {
        let list = |items: &[Item]| {
            Value::Array(
                items
                    .iter()
                    .map(|i| serde_json::json!({"name": i.name, "with": i.with}))
                    .collect(),
            )
        };
        serde_json::json!({"tasks": list(&self.tasks), "evaluations": list(&self.evaluations)})
    }
}

/// A parsed lifecycle file.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    /// The file, as errors name it.
    pub path: String,
    pub pre: Option<Phase>,
    pub post: Option<Phase>,
    index: LineIndex,
}

impl Lifecycle {
    pub fn phase(&self, kind: PhaseKind) -> Option<&Phase> {
        match kind {
            PhaseKind::Pre => self.pre.as_ref(),
            PhaseKind::Post => self.post.as_ref(),
        }
    }

    fn error(&self, field: String, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: self.path.clone(),
            line: self.index.line_of(&field),
            field,
            message: message.into(),
        }
    }

    /// The phase's stage, its options validated by the plugin that runs it; `None` when the
    /// file has no such phase. Errors name the field in this file.
    pub fn stage(&self, kind: PhaseKind, plugins: &Plugins) -> Result<Option<Stage>, ConfigError> {
        let Some(phase) = self.phase(kind) else {
            return Ok(None);
        };
        let at = format!("spec.{}", kind.key());
        let runner = plugins
            .iter()
            .find_map(|p| p.phase_stage(kind).map(|name| (p, name)));
        let Some((plugin, name)) = runner else {
            return Err(self.error(
                at,
                format!(
                    "no compiled-in plugin runs the {} phase (the lifecycle plugin is missing)",
                    kind.key()
                ),
            ));
        };
        let with = plugin
            .validate_stage(name, &phase.with())
            .map_err(|e: StageConfigError| {
                let inner = item_field(&e.field);
                self.error(gannet_config::typed::join_path(&at, &inner), e.message)
            })?;
        let id = StageId::parse(kind.stage_id()).expect("a valid stage id");
        let mut stage = Stage::planned(id, name, 0, with);
        stage.desc = match kind {
            PhaseKind::Pre => "Pre-deployment tasks and evaluations".to_owned(),
            PhaseKind::Post => "Post-deployment tasks and evaluations".to_owned(),
        };
        stage.timeout = plugin.default_timeout(&stage);
        Ok(Some(stage))
    }
}

/// A plugin's field inside the phase's `with` (`tasks[0].with.run`) as the file writes it
/// (`tasks[0].run`: an item's options sit beside its name).
fn item_field(field: &str) -> String {
    match field.find("].with") {
        Some(at) => {
            let (head, tail) = field.split_at(at + 1);
            let rest = tail.strip_prefix(".with").unwrap_or(tail);
            format!("{head}{rest}")
        }
        None => field.to_owned(),
    }
}

/// Parses the lifecycle file at `path` (used in errors only) from `text`.
pub fn parse(path: &str, text: &str) -> Result<Lifecycle, ConfigError> {
    let doc = load_yaml(path, text)?;
    let mut file = Lifecycle {
        path: path.to_owned(),
        pre: None,
        post: None,
        index: LineIndex::build(text),
    };
    let (pre, post) = read_document(&doc).map_err(|(field, message)| file.error(field, message))?;
    file.pre = pre;
    file.post = post;
    Ok(file)
}

type Found<T> = Result<T, (String, String)>;

fn fail<T>(field: impl Into<String>, message: impl Into<String>) -> Found<T> {
    Err((field.into(), message.into()))
}

/// The map at `field`, its keys checked against `known`.
fn mapping<'a>(value: &'a Value, field: &str, known: &[&str]) -> Found<&'a Map<String, Value>> {
    let Value::Object(map) = value else {
        return fail(field, format!("expected a map, got {}", json_kind(value)));
    };
    for key in map.keys() {
        let key = key.as_str();
        if !known.contains(&key) {
            let hint = gannet_config::typed::closest(key, known.iter().copied())
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            return fail(
                gannet_config::typed::join_path(field, key),
                format!(
                    "unknown field `{key}`{hint} (expected one of: {})",
                    known.join(", ")
                ),
            );
        }
    }
    Ok(map)
}

fn read_document(doc: &Value) -> Found<(Option<Phase>, Option<Phase>)> {
    let top = mapping(doc, "", &["apiVersion", "kind", "spec"])?;
    let text_of = |key: &str| top.get(key).and_then(Value::as_str);
    match text_of("apiVersion") {
        Some(API_VERSION) => {}
        Some(other) => {
            return fail(
                "apiVersion",
                format!("must be {API_VERSION}, not {other:?}"),
            )
        }
        None => {
            return fail(
                "apiVersion",
                format!("missing: write apiVersion: {API_VERSION}"),
            )
        }
    }
    match text_of("kind") {
        Some(KIND) => {}
        Some(other) => return fail("kind", format!("must be {KIND}, not {other:?}")),
        None => return fail("kind", format!("missing: write kind: {KIND}")),
    }
    let Some(spec) = top.get("spec") else {
        return fail(
            "spec",
            "missing: write spec.preDeployment or spec.postDeployment",
        );
    };
    let keys: Vec<&str> = PhaseKind::ALL.iter().map(|k| k.key()).collect();
    let spec = mapping(spec, "spec", &keys)?;
    let phase = |kind: PhaseKind| -> Found<Option<Phase>> {
        spec.get(kind.key())
            .map(|v| read_phase(v, &format!("spec.{}", kind.key())))
            .transpose()
    };
    let (pre, post) = (phase(PhaseKind::Pre)?, phase(PhaseKind::Post)?);
    if pre.is_none() && post.is_none() {
        return fail(
            "spec",
            "declares no phase: write spec.preDeployment or spec.postDeployment",
        );
    }
    Ok((pre, post))
}

fn read_phase(value: &Value, at: &str) -> Found<Phase> {
    let map = mapping(value, at, &["tasks", "evaluations"])?;
    let mut names: Vec<String> = Vec::new();
    let mut list = |key: &str| -> Found<Vec<Item>> {
        let field = format!("{at}.{key}");
        let items = match map.get(key) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return fail(field, format!("expected a list, got {}", json_kind(other)))
            }
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let item = read_item(item, &format!("{field}[{i}]"))?;
                if names.contains(&item.name) {
                    return fail(
                        format!("{field}[{i}].name"),
                        format!("{:?} names another item of this phase already", item.name),
                    );
                }
                names.push(item.name.clone());
                Ok(item)
            })
            .collect()
    };
    let phase = Phase {
        tasks: list("tasks")?,
        evaluations: list("evaluations")?,
    };
    if phase.tasks.is_empty() && phase.evaluations.is_empty() {
        return fail(at, "has no tasks and no evaluations");
    }
    Ok(phase)
}

fn read_item(value: &Value, at: &str) -> Found<Item> {
    let Value::Object(map) = value else {
        return fail(at, format!("expected a map, got {}", json_kind(value)));
    };
    let name = match map.get("name") {
        Some(Value::String(n)) => n.clone(),
        Some(other) => {
            return fail(
                format!("{at}.name"),
                format!("expected a string, got {}", json_kind(other)),
            )
        }
        None => {
            return fail(
                format!("{at}.name"),
                "missing: every task and evaluation has a name",
            )
        }
    };
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return fail(
            format!("{at}.name"),
            format!("{name:?}: use 1 to {MAX_NAME} letters, digits, '-' or '_', starting with a letter or digit"),
        );
    }
    let mut with = Map::new();
    for (key, v) in map {
        if key != "name" {
            with.insert(key.clone(), v.clone());
        }
    }
    Ok(Item {
        name,
        with: Value::Object(with),
    })
}

#[cfg(test)]
mod tests;
