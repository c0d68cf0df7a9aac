//! A Terraform deploy target (`plugins.terraform.deployTargets[i]`): which terraform runs the
//! commands, what environment and shared `-var`s they get, the IAM role they run as (AWS),
//! and how often drift is checked.

use std::collections::BTreeMap;

use gannet_config::typed::FieldError;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{self, JobRoleArn, JobRoles};
use gannet_sdk::registry::RuntimeInfo;
use gannet_sdk::targets::Named;
use serde::Deserialize;

/// PipeCD's drift interval for Terraform: a plan is slow, and may cost the providers' API calls.
pub const DEFAULT_DRIFT_INTERVAL: GoDuration = GoDuration::from_secs(600);

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployTarget {
    pub name: String,
    /// The terraform command: a path, or a name looked up on the job's `PATH`.
    #[serde(default = "default_terraform")]
    pub terraform: String,
    /// Other terraform binaries by version, for apps that pin `spec.input.terraformVersion`.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// `-var name=value` given to every plan of this target's apps (before the app's own).
    #[serde(default)]
    pub vars: Vec<String>,
    /// Environment variables every command gets, as written (settings, not secrets).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names of gannet's environment variables the commands get (such as `AWS_PROFILE`, or
    /// credentials kept in gannet's environment); never one of gannet's own secrets.
    #[serde(default)]
    pub allow_env: Vec<String>,
    /// The IAM role this target's commands run as, on the AWS runtime: each job's CodeBuild
    /// build runs as it instead of the stack's `JobRole`, so it holds this target's rights
    /// alone (the stage and drift functions may pass exactly the stack's `JobTargetRoleArns`).
    #[serde(default)]
    pub job_role_arn: Option<JobRoleArn>,
    /// PipeCD's switch for drift detection (on by default).
    #[serde(default = "yes")]
    pub drift_detection_enabled: bool,
    /// How often drift is checked with a plan (a new plan per interval, per branch head).
    #[serde(default = "default_drift_interval")]
    pub drift_interval: GoDuration,
    /// Whether this target's jobs keep `init`'s work between them (on by default): a plugin
    /// cache, and `.terraform` reused while its key holds ([`crate::cache`]). Off, every job
    /// runs `init` from nothing, as before.
    #[serde(default = "yes")]
    pub init_cache: bool,
}

fn default_terraform() -> String {
    "terraform".into()
}

fn yes() -> bool {
    true
}

fn default_drift_interval() -> GoDuration {
    DEFAULT_DRIFT_INTERVAL
}

impl Named for DeployTarget {
    fn name(&self) -> &str {
        &self.name
    }
}

impl DeployTarget {
    /// A target named `name` running `terraform` from the job's PATH, with nothing else set.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            terraform: default_terraform(),
            versions: BTreeMap::new(),
            vars: Vec::new(),
            env: BTreeMap::new(),
            allow_env: Vec::new(),
            job_role_arn: None,
            drift_detection_enabled: true,
            drift_interval: DEFAULT_DRIFT_INTERVAL,
            init_cache: true,
        }
    }

    /// Checks the target written at `at` for the runtime `runtime` (which names gannet's own
    /// secrets, and says whether a job may run as a role of its own).
    pub fn check(&self, at: &str, runtime: &RuntimeInfo) -> Result<(), FieldError> {
        let error = |field: &str, message: String| FieldError {
            path: format!("{at}.{field}"),
            message,
        };
        if self.terraform.trim().is_empty() {
            return Err(error("terraform", "must not be empty".into()));
        }
        for (version, path) in &self.versions {
            if path.trim().is_empty() {
                return Err(error(
                    &format!("versions.{version}"),
                    "must not be empty".into(),
                ));
            }
        }
        for (i, var) in self.vars.iter().enumerate() {
            check_assignment(var, "-var").map_err(|m| error(&format!("vars[{i}]"), m))?;
        }
        for name in self.env.keys() {
            if !jobs::valid_env_name(name) {
                return Err(error("env", format!("{name:?} is not a variable name")));
            }
        }
        jobs::check_allowed_env(
            &format!("{at}.allowEnv"),
            &self.allow_env,
            &runtime.secret_env,
            "give terraform credentials of its own: an assume_role in the provider block, a \
             credentials file of its own named in this target's env \
             (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE), or keys under other names read by the \
             provider block through TF_VAR_* variables listed here",
        )?;
        if self.job_role_arn.is_some() && runtime.job_roles == JobRoles::Refused {
            return Err(error("jobRoleArn", jobs::JOB_ROLE_IS_FOR_AWS.into()));
        }
        if self.drift_interval < GoDuration::from_secs(1) {
            return Err(error(
                "driftInterval",
                format!(
                    "{} is too often for a terraform plan; at least 1s",
                    self.drift_interval
                ),
            ));
        }
        Ok(())
    }

    /// The terraform to run for an app that pins `version` (empty: none).
    pub fn binary(&self, version: &str) -> &str {
        self.versions
            .get(version)
            .map_or(self.terraform.as_str(), String::as_str)
    }
}

/// `name=value`, as `-var` and PipeCD's `commandEnvs` take them.
pub fn check_assignment(text: &str, what: &str) -> Result<(), String> {
    match text.split_once('=') {
        Some((name, _)) if !name.trim().is_empty() => Ok(()),
        _ => Err(format!("{text:?} is not a {what} (name=value)")),
    }
}
