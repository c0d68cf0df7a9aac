//! A CloudRunApp's own fields: the app config's `spec.input` and `spec.quickSync`, which this
//! plugin owns ([`gannet_config::V0_KINDS`]), with PipeCD's names and defaults.

use gannet_config::EmptyOptions;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CloudRunSpec {
    pub input: CloudRunInput,
    pub quick_sync: EmptyOptions,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CloudRunInput {
    /// The service manifest in the app directory.
    pub service_manifest_file: String,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
}

impl Default for CloudRunInput {
    fn default() -> Self {
        Self {
            service_manifest_file: "service.yaml".to_owned(),
            auto_rollback: None,
        }
    }
}
