//! A LambdaApp's own fields: the app config's `spec.input` and `spec.quickSync`, which this plugin
//! owns ([`gannet_config::V0_KINDS`]), with PipeCD's names and defaults.

use gannet_config::EmptyOptions;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LambdaSpec {
    pub input: LambdaInput,
    pub quick_sync: EmptyOptions,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LambdaInput {
    /// The function manifest in the app directory.
    pub function_manifest_file: String,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
}

impl Default for LambdaInput {
    fn default() -> Self {
        Self {
            function_manifest_file: "function.yaml".to_owned(),
            auto_rollback: None,
        }
    }
}
