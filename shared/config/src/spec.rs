//! The generic part of every app config (PipeCD's `GenericApplicationSpec`): name, labels,
//! planner, commit matcher, pipeline, trigger, timeout, and the features around them.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::glob::Glob;
use gannet_domain::deployment::NotificationMention;
use gannet_domain::duration::GoDuration;
use gannet_domain::ids::StageId;

/// The generic fields of an app config, with defaults applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenericSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub description: String,
    pub planner: PlannerOptions,
    pub commit_matcher: CommitMatcher,
    /// `spec.pipeline.stages`; empty when no pipeline is configured.
    pub stages: Vec<StageConfig>,
    pub trigger: TriggerConfig,
    pub post_sync: Option<PostSync>,
    /// How long a deployment may run before it fails.
    pub timeout: GoDuration,
    pub encryption: Option<SecretEncryption>,
    pub attachment: Option<Attachment>,
    pub notification: Option<DeploymentNotification>,
    pub event_watcher: Vec<EventWatcherConfig>,
    pub drift_detection: Option<DriftDetection>,
    /// `spec.plugins`: each plugin's own config, free-form (the plugin validates it).
    pub plugins: BTreeMap<String, serde_json::Value>,
}

/// `spec.planner`, with the deprecated `spec.input.autoRollback` folded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannerOptions {
    /// Always run the pipeline, never a quick sync chosen by the planner.
    pub always_use_pipeline: bool,
    /// Roll back automatically when a stage fails.
    pub auto_rollback: bool,
}

/// `spec.commitMatcher`: regular expressions on the commit message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CommitMatcher {
    pub quick_sync: Option<CommitPattern>,
    pub pipeline: Option<CommitPattern>,
}

/// A regular expression (RE2 syntax, as PipeCD uses Go's) compiled when the config is read.
#[derive(Clone)]
pub struct CommitPattern(Regex);

impl CommitPattern {
    pub fn parse(pattern: &str) -> Result<Self, regex::Error> {
        Regex::new(pattern).map(Self)
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

impl fmt::Debug for CommitPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommitPattern({:?})", self.as_str())
    }
}

impl PartialEq for CommitPattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for CommitPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CommitPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CommitPattern::parse(&text).map_err(|e| {
            let reason = e.to_string();
            let reason = reason.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            let reason = reason.trim().trim_start_matches("error: ");
            serde::de::Error::custom(format!("invalid regular expression {text:?}: {reason}"))
        })
    }
}

/// One configured pipeline stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageConfig {
    pub id: Option<StageId>,
    /// The stage kind, such as `WAIT`.
    pub name: String,
    pub desc: String,
    pub timeout: Option<GoDuration>,
    /// The stage's options for its plugin, `skipOn` taken out; `{}` when none are given.
    pub with: serde_json::Value,
    pub skip_on: SkipOn,
}

/// When a stage is skipped at plan time. PipeCD reads it from `with.skipOn`; gannet also
/// accepts it beside `with`, as PipeCD's plugin-era configs write it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SkipOn {
    /// Skip when the commit message starts with any of these.
    pub commit_message_prefixes: Vec<String>,
    /// Skip when every changed file matches these patterns.
    pub paths: Vec<Glob>,
}

impl SkipOn {
    pub fn is_empty(&self) -> bool {
        self.commit_message_prefixes.is_empty() && self.paths.is_empty()
    }
}

/// `spec.trigger`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TriggerConfig {
    pub on_commit: OnCommit,
    pub on_command: OnCommand,
    pub on_out_of_sync: OnOutOfSync,
    pub on_chain: OnChain,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnCommit {
    pub disabled: bool,
    /// Changes to these paths (relative to the repository root) trigger the app.
    pub paths: Vec<Glob>,
    /// Changes to these paths keep the app from triggering.
    pub ignores: Vec<Glob>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnCommand {
    pub disabled: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OnOutOfSync {
    /// Off unless the config turns it on.
    pub disabled: bool,
    /// The least time since the last deployment finished before a drift triggers another.
    pub min_window: GoDuration,
}

impl Default for OnOutOfSync {
    fn default() -> Self {
        Self {
            disabled: true,
            min_window: GoDuration::from_secs(5 * 60),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnChain {
    pub disabled: bool,
}

impl Default for OnChain {
    fn default() -> Self {
        Self { disabled: true }
    }
}

/// `spec.postSync`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostSync {
    pub chain: Option<DeploymentChain>,
}

/// `spec.postSync.chain`: apps to deploy once this one has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeploymentChain {
    pub applications: Vec<ChainApplicationMatcher>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChainApplicationMatcher {
    pub name: String,
    pub kind: String,
    pub labels: BTreeMap<String, String>,
}

/// `spec.encryption`: sealed secrets and the files to decrypt them into.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SecretEncryption {
    pub encrypted_secrets: BTreeMap<String, String>,
    pub decryption_targets: Vec<String>,
}

/// `spec.attachment`: files embedded into manifests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Attachment {
    pub sources: BTreeMap<String, String>,
    pub targets: Vec<String>,
}

/// `spec.notification`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeploymentNotification {
    pub mentions: Vec<NotificationMention>,
}

/// The events a notification mention may name (PipeCD's `NotificationEventType` less `EVENT_`).
pub(crate) const NOTIFICATION_EVENTS: &[&str] = &[
    "DEPLOYMENT_TRIGGERED",
    "DEPLOYMENT_PLANNED",
    "DEPLOYMENT_APPROVED",
    "DEPLOYMENT_ROLLING_BACK",
    "DEPLOYMENT_SUCCEEDED",
    "DEPLOYMENT_FAILED",
    "DEPLOYMENT_CANCELLED",
    "DEPLOYMENT_WAIT_APPROVAL",
    "DEPLOYMENT_TRIGGER_FAILED",
    "DEPLOYMENT_STARTED",
    "APPLICATION_SYNCED",
    "APPLICATION_OUT_OF_SYNC",
    "APPLICATION_HEALTHY",
    "PIPED_STARTED",
    "PIPED_STOPPED",
    "STAGE_STARTED",
    "STAGE_SKIPPED",
    "STAGE_SUCCEEDED",
    "STAGE_FAILED",
    "STAGE_CANCELLED",
];

/// One `spec.eventWatcher` entry: update files in git when an event arrives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventWatcherConfig {
    pub matcher: EventWatcherMatcher,
    pub handler: EventWatcherHandler,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventWatcherMatcher {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventWatcherHandler {
    /// `GIT_UPDATE`.
    #[serde(rename = "type")]
    pub handler_type: String,
    pub config: EventWatcherHandlerConfig,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EventWatcherHandlerConfig {
    pub commit_message: String,
    pub make_pull_request: bool,
    pub replacements: Vec<EventWatcherReplacement>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EventWatcherReplacement {
    pub file: String,
    pub yaml_field: String,
    pub json_field: String,
    #[serde(rename = "HCLField")]
    pub hcl_field: String,
    pub regex: String,
}

/// `spec.driftDetection`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DriftDetection {
    /// Fields to ignore, each `apiVersion:kind:namespace:name#fieldPath`.
    pub ignore_fields: Vec<String>,
}
