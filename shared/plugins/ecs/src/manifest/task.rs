//! The task definition file: RegisterTaskDefinition's input, checked. It is registered as
//! written (after [`super::schema`]'s normalisation), so every field AWS takes reaches AWS, as
//! PipeCD sends every field its manifest has.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::shapes::TASK_DEFINITION;
use super::{Document, ManifestError};

/// A checked task definition.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskDefinition {
    pub family: String,
    pub containers: Vec<Container>,
    pub network_mode: Option<String>,
    /// The file's tags (`key` → `value`).
    pub tags: BTreeMap<String, String>,
    /// RegisterTaskDefinition's request, without tags.
    body: Value,
}

/// One container of a task definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub name: String,
    pub image: String,
    /// `portMappings[].containerPort`.
    pub ports: Vec<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[derive(Default)]
struct Raw {
    family: String,
    network_mode: Option<String>,
    container_definitions: Vec<RawContainer>,
    requires_compatibilities: Vec<String>,
    cpu: Option<String>,
    memory: Option<String>,
    tags: Vec<super::Tag>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct RawContainer {
    name: String,
    image: String,
    port_mappings: Vec<RawPort>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct RawPort {
    container_port: Option<i32>,
}

impl TaskDefinition {
    /// Parses and checks the task definition `file` (named in errors) from its text.
    pub fn parse(file: &str, text: &str) -> Result<Self, ManifestError> {
        let doc = Document::parse(file, text, &TASK_DEFINITION)?;
        let raw: Raw = serde_json::from_value(doc.value.clone())
            .map_err(|e| doc.error("", format!("unreadable after normalising: {e}")))?;
        if raw.family.trim().is_empty() {
            return Err(doc.error(
                "family",
                "missing: the task definition's family is required",
            ));
        }
        let family_ok = raw.family.len() <= 255
            && raw
                .family
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !family_ok {
            return Err(doc.error(
                "family",
                format!(
                    "{:?} is not a family name (up to 255 letters, digits, - and _)",
                    raw.family
                ),
            ));
        }
        if raw.container_definitions.is_empty() {
            return Err(doc.error(
                "containerDefinitions",
                "missing: a task definition needs at least one container",
            ));
        }
        let mut containers: Vec<Container> = Vec::new();
        for (i, c) in raw.container_definitions.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(doc.error(
                    &format!("containerDefinitions[{i}].name"),
                    "missing: every container needs a name",
                ));
            }
            if c.image.trim().is_empty() {
                return Err(doc.error(
                    &format!("containerDefinitions[{i}].image"),
                    "missing: every container needs an image",
                ));
            }
            if containers.iter().any(|o| o.name == c.name) {
                return Err(doc.error(
                    &format!("containerDefinitions[{i}].name"),
                    format!("{:?} names two containers", c.name),
                ));
            }
            containers.push(Container {
                name: c.name.clone(),
                image: c.image.clone(),
                ports: c
                    .port_mappings
                    .iter()
                    .filter_map(|p| p.container_port)
                    .collect(),
            });
        }
        if raw.requires_compatibilities.iter().any(|c| c == "FARGATE") {
            if raw.network_mode.as_deref() != Some("awsvpc") {
                return Err(doc.error(
                    "networkMode",
                    "must be awsvpc for a task definition that requires FARGATE",
                ));
            }
            for (field, value) in [("cpu", &raw.cpu), ("memory", &raw.memory)] {
                if value.as_deref().is_none_or(str::is_empty) {
                    return Err(doc.error(
                        field,
                        "missing: a task definition that requires FARGATE sets the task's cpu and memory",
                    ));
                }
            }
        }
        let mut body = doc.value;
        if let Value::Object(fields) = &mut body {
            fields.remove("tags");
        }
        Ok(Self {
            family: raw.family,
            containers,
            network_mode: raw.network_mode,
            tags: raw.tags.into_iter().map(|t| (t.key, t.value)).collect(),
            body,
        })
    }

    /// RegisterTaskDefinition's request body with `tags` (the file's, plus gannet's).
    pub(crate) fn register_body(&self, tags: &BTreeMap<String, String>) -> Value {
        let mut body = self.body.clone();
        if let Value::Object(fields) = &mut body {
            if !tags.is_empty() {
                let list = tags
                    .iter()
                    .map(|(k, v)| serde_json::json!({"key": k, "value": v}))
                    .collect();
                fields.insert("tags".to_owned(), Value::Array(list));
            }
        }
        body
    }

    /// The container named `name`.
    pub fn container(&self, name: &str) -> Option<&Container> {
        self.containers.iter().find(|c| c.name == name)
    }
}
