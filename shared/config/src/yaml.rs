//! Reading YAML. Every YAML text gannet reads (a repository's app configs, lifecycle files and
//! manifests, a CloudWatch query, gannet.yaml, the tokens file) is parsed here, by serde-saphyr
//! under one budget built from [`crate::bounded`]'s limits: the text's size is measured first,
//! and the parser itself refuses a text whose aliases expand past [`MAX_NODES`] nodes (or its
//! anchors past [`MAX_ANCHORED_NODES`]) or [`MAX_EXPANDED_BYTES`] bytes of scalars, or that
//! nests deeper than [`MAX_DEPTH`], while it reads it (nothing is built past the limits).
//!
//! Free-form YAML is read as [`serde_json::Value`], as Kubernetes' and PipeCD's
//! `sigs.k8s.io/yaml` reads YAML as JSON: keys are strings, and tags (`!Ref x`) are dropped.
//! Scalars resolve as serde_yaml resolved them (YAML 1.2's core schema): `yes`, `no`, `on` and
//! `off` are strings (as in Go's yaml.v3 for untyped values), `true`/`True`/`TRUE` booleans;
//! `012` and `1_000` are strings; `.inf` and `.nan` are floats (null in a JSON value). Merge
//! keys (`<<: *defaults`) are merged, as Go's yaml.v2 and v3 do (serde_yaml kept `<<` as a key).
//! A duplicate key is an error, as in yaml.v3.
//!
//! [`MAX_NODES`]: crate::bounded::MAX_NODES
//! [`MAX_ANCHORED_NODES`]: crate::bounded::MAX_ANCHORED_NODES
//! [`MAX_EXPANDED_BYTES`]: crate::bounded::MAX_EXPANDED_BYTES
//! [`MAX_DEPTH`]: crate::bounded::MAX_DEPTH

use std::fmt;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{MessageFormatter, Spanned};

use crate::bounded::{
    check_size, LimitError, MAX_ANCHORED_NODES, MAX_DEPTH, MAX_EXPANDED_BYTES, MAX_NODES,
};

/// A node with its tag, if it has one (`!Ref x` reads as `Tagged("x", Some("!Ref"))`), for
/// the few readers that need tags, such as CloudFormation's short forms; serde-saphyr's own.
pub use serde_saphyr::Tagged;

/// Why a YAML text was not read: a limit it passes, or what is wrong at a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    line: Option<usize>,
    path: String,
    message: String,
    limit: Option<LimitError>,
}

impl Error {
    /// The 1-based line at fault; `None` for a limit (it is the whole text's) and where the
    /// parser knows none.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The path of the field at fault, as serde_path_to_error writes it (`spec.items[1].name`):
    /// for a syntax error, the field being read when it was met (`spec.name` for
    /// `spec: {name: [x`); empty at the document itself and for a limit. An unknown field is
    /// named itself, at the top level too (`spec.extra`, `extra`; serde_yaml named its parent).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong, without the position or the path.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The limit the text passes, if that is why it was refused.
    pub fn limit(&self) -> Option<LimitError> {
        self.limit
    }

    /// The error with its line and field, for a file that has no `file:line: field:` report
    /// of its own: `line 3: api.tls: missing field `keyFile``.
    pub fn located(&self) -> String {
        let mut out = String::new();
        if let Some(line) = self.line {
            out.push_str(&format!("line {line}: "));
        }
        if !self.path.is_empty() {
            out.push_str(&self.path);
            out.push_str(": ");
        }
        out.push_str(&self.message);
        out
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<LimitError> for Error {
    fn from(limit: LimitError) -> Self {
        Self {
            line: None,
            path: String::new(),
            message: limit.to_string(),
            limit: Some(limit),
        }
    }
}

/// serde-saphyr's options: the budget from [`crate::bounded`]'s limits, and the YAML 1.2 core
/// schema for scalars (see the module's documentation).
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: MAX_NODES,
            max_depth: MAX_DEPTH,
            max_total_scalar_bytes: MAX_EXPANDED_BYTES,
            // What the parser keeps of anchored nodes to replay them (an anchor holding
            // aliases keeps their expansion).
            max_recorded_anchor_events: MAX_ANCHORED_NODES,
            max_recorded_anchor_bytes: MAX_EXPANDED_BYTES,
            // The node count bounds what aliases expand to; a file that uses one anchor a
            // hundred times is fine.
            enforce_alias_anchor_ratio: false,
        },
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::PassThrough,
        with_snippet: false,
    }
}

/// Reads the one document of `text` as a `T` (an empty text is YAML's null: `Option<T>` reads
/// it as `None`). More than one document is an error.
///
/// A text past a limit is refused for that limit whatever `T` makes of its fields: a typed
/// read stops at the first field it does not know, which may come before the limit, so a
/// read that fails for anything else reads the text again under the budget, building nothing
/// (a read that succeeds has passed every event of the text through the budget already).
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    check_size(text)?;
    let mut path = String::new();
    serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| error(e, path))
    .map_err(|e| match e.limit {
        Some(_) => e,
        None => limit_passed(text).unwrap_or(e),
    })
}

/// The limit `text` passes, read under the budget building nothing; `None` if it passes none
/// (a syntax error is not a limit).
fn limit_passed(text: &str) -> Option<Error> {
    serde_saphyr::from_multiple_with_options::<IgnoredAny>(text, options())
        .err()
        .map(|e| error(e, ""))
        .filter(|e| e.limit.is_some())
}

/// Every document of the stream `text` that holds something (empty ones and ones of comments
/// only are skipped), with the line its content starts at. All the documents share the one
/// budget.
pub fn documents(text: &str) -> Result<Vec<(usize, Value)>, Error> {
    check_size(text)?;
    let documents: Vec<Spanned<Value>> =
        serde_saphyr::from_multiple_with_options(text, options()).map_err(|e| error(e, ""))?;
    Ok(documents
        .into_iter()
        .map(|d| {
            (
                usize::try_from(d.referenced.line()).unwrap_or(1).max(1),
                d.value,
            )
        })
        .filter(|(_, v)| !v.is_null())
        .collect())
}

fn error(err: serde_saphyr::Error, path: impl Into<String>) -> Error {
    // An error met while replaying an alias is wrapped with where the alias was used.
    let mut inner = &err;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    if let Some(limit) = limit_of(inner) {
        return limit.into();
    }
    let path = path.into();
    Error {
        line: err
            .location()
            .and_then(|l| usize::try_from(l.line()).ok())
            .filter(|l| *l > 0),
        path: if path == "." { String::new() } else { path },
        message: serde_saphyr::DefaultMessageFormatter
            .format_message(inner)
            .into_owned(),
        limit: None,
    }
}

/// The limit a budget error stands for.
fn limit_of(err: &serde_saphyr::Error) -> Option<LimitError> {
    use serde_saphyr::Error as E;
    match err {
        E::Budget { breach, .. } => Some(match breach {
            BudgetBreach::Depth { .. } => LimitError::TooDeep,
            BudgetBreach::ScalarBytes { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
                LimitError::TooLargeExpanded
            }
            BudgetBreach::RecordedAnchorEvents { .. } => LimitError::TooManyAnchoredNodes,
            // Nodes, and what only a text of very many nodes or aliases reaches first
            // (events, aliases, anchors, documents, merge keys).
            _ => LimitError::TooManyNodes,
        }),
        E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayCounterOverflow { .. } => Some(LimitError::TooManyNodes),
        E::AliasReplayStackDepthExceeded { .. } => Some(LimitError::TooDeep),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
