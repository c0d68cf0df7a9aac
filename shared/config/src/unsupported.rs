//! PipeCD features that a config may use but gannet does not support yet. Using one is not a
//! parse error (a PipeCD repository must load unchanged); the planner and `config check`
//! name each one.

use serde::Serialize;

use crate::AppConfig;

/// One unsupported feature a config uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unsupported {
    /// The config field that uses it, such as `spec.encryption`.
    pub field: String,
    pub message: String,
}

impl Unsupported {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

pub(super) fn find(app: &AppConfig) -> Vec<Unsupported> {
    let spec = app.spec();
    let mut out = Vec::new();
    if !spec.event_watcher.is_empty() {
        out.push(Unsupported::new(
            "spec.eventWatcher",
            "event watchers are not supported yet",
        ));
    }
    out
}

/// `spec.driftDetection.ignoreFields`: honoured by the platforms whose drift reads them
/// ([`AppConfig::platform_features`]).
pub const DRIFT_IGNORE_FIELDS: &str = "spec.driftDetection.ignoreFields";

pub(super) fn platform_dependent(app: &AppConfig) -> Vec<Unsupported> {
    let mut out = Vec::new();
    if app
        .spec()
        .drift_detection
        .as_ref()
        .is_some_and(|d| !d.ignore_fields.is_empty())
    {
        out.push(Unsupported::new(
            DRIFT_IGNORE_FIELDS,
            "ignoring fields in drift detection is not supported yet",
        ));
    }
    out
}
