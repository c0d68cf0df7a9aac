//! The ECS manifests an app names: the task definition and the service definition, in YAML or
//! JSON, in AWS's shapes as PipeCD reads them (see [`schema`] for how keys and values are
//! matched). Each parses into a checked value whose every error names the file, the line where
//! it can be found, and the field.

mod locate;
mod schema;
mod service;
mod shapes;
mod task;

use std::fmt;

use serde_json::Value;

pub use service::{
    AwsVpc, CapacityProvider, PlacementConstraint, PlacementStrategy, ServiceDefinition,
    ServiceRegistry, Tag, CONTROLLER_EXTERNAL,
};
pub use task::{Container, TaskDefinition};

/// A manifest that did not parse or validate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest file, relative to the app's directory.
    pub file: String,
    /// 1-based, when known.
    pub line: Option<usize>,
    /// Such as `containerDefinitions[0].image`; empty for a syntax error.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// A manifest's text, parsed and checked against `shape`, for errors that name its fields.
struct Document<'a> {
    file: &'a str,
    text: &'a str,
    /// With AWS's key spellings and value types.
    value: Value,
}

impl<'a> Document<'a> {
    /// Parses `text` (JSON when `file` ends with `.json`, YAML otherwise) and normalises it.
    fn parse(
        file: &'a str,
        text: &'a str,
        shape: &'static schema::Shape,
    ) -> Result<Self, ManifestError> {
        let syntax = |line: Option<usize>, message: String| ManifestError {
            file: file.to_owned(),
            line,
            field: String::new(),
            message: gannet_domain::report::bound_quotes(&message),
        };
        let raw: Value = if file.ends_with(".json") {
            gannet_config::bounded::check_json(text).map_err(|e| syntax(None, e.to_string()))?;
            serde_json::from_str(text).map_err(|e| {
                let message = e.to_string();
                let message = message
                    .split(" at line ")
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                syntax(Some(e.line()), format!("invalid JSON: {message}"))
            })?
        } else {
            // Read under gannet's YAML limits (alias bombs, nesting).
            gannet_config::yaml::from_str(text).map_err(|e| match e.limit() {
                Some(limit) => syntax(None, limit.to_string()),
                None => syntax(e.line(), format!("invalid YAML: {}", e.message())),
            })?
        };
        if raw.is_null() {
            return Err(syntax(None, "the file is empty".to_owned()));
        }
        let value = schema::normalize(&raw, shape).map_err(|e| ManifestError {
            file: file.to_owned(),
            line: schema_line(text, &e.path),
            field: e.field,
            message: e.message,
        })?;
        Ok(Self { file, text, value })
    }

    /// An error at `field` (AWS's spelling, such as `containerDefinitions[1].image`), on the
    /// line of the field, or of the nearest enclosing field found when it is missing.
    fn error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let mut line = None;
        let mut at = field;
        while line.is_none() && !at.is_empty() {
            line = line_of_field(self.text, at);
            at = at.rfind(['.', '[']).map_or("", |i| &at[..i]);
        }
        ManifestError {
            file: self.file.to_owned(),
            line,
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

fn schema_line(text: &str, path: &[schema::Seg]) -> Option<usize> {
    locate::line_of(text, path)
}

/// The line of `field` written as `a.b[1].c`, looked up with AWS's spelling of each key.
fn line_of_field(text: &str, field: &str) -> Option<usize> {
    let mut path = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, indexes) = part
            .split_once('[')
            .map_or((part, ""), |(k, rest)| (k, rest));
        if !key.is_empty() {
            path.push(schema::Seg::Key(key.to_owned()));
        }
        for index in indexes.split('[') {
            if let Ok(n) = index.trim_end_matches(']').parse() {
                path.push(schema::Seg::Index(n));
            }
        }
    }
    locate::line_of(text, &path)
}

/// The image's name and version (tag, or digest), as PipeCD reports artifact versions.
pub fn image_name_and_version(image: &str) -> (String, String) {
    let (path, digest) = match image.split_once('@') {
        Some((p, d)) => (p, Some(d)),
        None => (image, None),
    };
    let last = path.rsplit('/').next().unwrap_or(path);
    let (name, tag) = match last.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (last, None),
    };
    (
        name.to_owned(),
        digest.or(tag).unwrap_or("latest").to_owned(),
    )
}

#[cfg(test)]
mod tests;
