//! A TerraformApp's own fields: the app config's `spec.input` and `spec.quickSync`, which this
//! plugin owns ([`gannet_config::V0_KINDS`]), with PipeCD's names and defaults.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TerraformSpec {
    pub input: TerraformInput,
    pub quick_sync: TerraformQuickSync,
}

/// A TerraformApp's `quickSync` (PipeCD's TERRAFORM_SYNC options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerraformQuickSync {
    /// PipeCD retries a failed apply this many times; gannet does not (reported as unsupported).
    pub retries: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TerraformInput {
    /// Empty means the `default` workspace.
    pub workspace: String,
    /// Empty means the installed terraform.
    pub terraform_version: String,
    /// `-var` values, each `key=value`.
    pub vars: Vec<String>,
    /// `-var-file` files.
    pub var_files: Vec<String>,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
    pub command_flags: TerraformCommandLists,
    pub command_envs: TerraformCommandLists,
}

/// Extra flags or environment variables for each terraform command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerraformCommandLists {
    pub shared: Vec<String>,
    pub init: Vec<String>,
    pub plan: Vec<String>,
    pub apply: Vec<String>,
}
