//! A deployment and its stages, with PipeCD's statuses, trigger kinds and sync strategies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::chain::{ChainLink, ChainMatcher};
use crate::duration::{GoDuration, Millis};
use crate::ids::{AppId, CommitSha, DeploymentId, StageId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeploymentStatus {
    Pending,
    Planned,
    Running,
    RollingBack,
    Success,
    Failure,
    Cancelled,
}

impl DeploymentStatus {
    pub const ALL: [DeploymentStatus; 7] = [
        Self::Pending,
        Self::Planned,
        Self::Running,
        Self::RollingBack,
        Self::Success,
        Self::Failure,
        Self::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Success | Self::Failure | Self::Cancelled)
    }

    /// Holds the app's deployment lock.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Planned | Self::Running | Self::RollingBack)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Planned => "PLANNED",
            Self::Running => "RUNNING",
            Self::RollingBack => "ROLLING_BACK",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StageStatus {
    NotStartedYet,
    Running,
    Success,
    Failure,
    Cancelled,
    Skipped,
    Exited,
}

impl StageStatus {
    pub fn is_finished(self) -> bool {
        !matches!(self, Self::NotStartedYet | Self::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStartedYet => "NOT_STARTED_YET",
            Self::Running => "RUNNING",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Cancelled => "CANCELLED",
            Self::Skipped => "SKIPPED",
            Self::Exited => "EXITED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TriggerKind {
    OnCommit,
    OnCommand,
    OnOutOfSync,
    OnChain,
}

impl TriggerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnCommit => "ON_COMMIT",
            Self::OnCommand => "ON_COMMAND",
            Self::OnOutOfSync => "ON_OUT_OF_SYNC",
            Self::OnChain => "ON_CHAIN",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SyncStrategy {
    #[default]
    Auto,
    QuickSync,
    Pipeline,
}

impl SyncStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "AUTO",
            Self::QuickSync => "QUICK_SYNC",
            Self::Pipeline => "PIPELINE",
        }
    }
}

/// The commit a deployment deploys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub sha: CommitSha,
    pub branch: String,
    pub message: String,
    pub author: String,
}

/// What caused a deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    pub kind: TriggerKind,
    /// Who asked, for commands; empty otherwise.
    pub commander: String,
    /// Who pushed the commit, for a deployment a push webhook triggered (GitHub's user name);
    /// empty when the poll found the commit. Not PipeCD's commander, which stays empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pushed_by: String,
    /// The strategy a command forced; `Auto` lets the planner decide.
    pub strategy: SyncStrategy,
    /// An admin's decision that this deployment may go past the app's approval stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_skip: Option<GateSkip>,
}

/// Who let a deployment skip the app's approval gate (its pipeline's approval stages), and
/// why. Only an admin may; the planner runs the approval stages of any deployment without one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateSkip {
    pub by: String,
    pub reason: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelMode {
    WithRollback,
    WithoutRollback,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub mode: CancelMode,
    pub by: String,
    pub at: Millis,
}

/// One stage of a deployment, as planned and as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub id: StageId,
    /// The stage kind as PipeCD names it: `WAIT`, `SCRIPT_RUN`, `SCRIPT_RUN_ROLLBACK`, ...
    pub name: String,
    pub desc: String,
    /// Position in the configured pipeline; rollback stages carry the index they follow.
    pub index: usize,
    /// Runs only while rolling back.
    pub rollback: bool,
    /// Shown to users; rollback stages stay hidden until they run.
    pub visible: bool,
    pub status: StageStatus,
    pub status_reason: String,
    /// The stage's validated `with` options.
    pub with: serde_json::Value,
    pub timeout: GoDuration,
    pub started_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    /// What the stage's steps recorded so far (created resources, start times, approvals).
    pub metadata: BTreeMap<String, String>,
}

impl Stage {
    /// A stage as the planner lays it out, not started.
    pub fn planned(id: StageId, name: &str, index: usize, with: serde_json::Value) -> Self {
        Self {
            id,
            name: name.to_owned(),
            desc: String::new(),
            index,
            rollback: false,
            visible: true,
            status: StageStatus::NotStartedYet,
            status_reason: String::new(),
            with,
            timeout: GoDuration::from_secs(6 * 3600),
            started_at: None,
            completed_at: None,
            metadata: BTreeMap::new(),
        }
    }

    /// A stage a plugin adds itself (a quick sync, a hidden rollback): its own fixed id, its
    /// options and its description.
    pub fn of_plugin(id: &str, name: &str, with: serde_json::Value, desc: &str) -> Self {
        let id = StageId::parse(id).unwrap_or_else(|_| StageId::by_index(0));
        let mut stage = Self::planned(id, name, 0, with);
        stage.desc = desc.to_owned();
        stage
    }

    /// A platform plugin's hidden rollback stage, when `planned` has a stage that changes the
    /// platform (`forward`): it stands at the last such stage's index, so it runs when any of
    /// them has started. `None` when no stage needs undoing.
    pub fn rollback_after(
        planned: &[Stage],
        forward: impl Fn(&Stage) -> bool,
        id: &str,
        name: &str,
        desc: &str,
    ) -> Option<Self> {
        let last = planned.iter().rfind(|s| forward(s))?;
        let mut stage = Self::of_plugin(id, name, serde_json::json!({}), desc);
        stage.index = last.index;
        Some(stage)
    }
}

/// A deployment of one app at one commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    pub id: DeploymentId,
    pub app: AppId,
    pub app_name: String,
    /// The app's config kind (`LambdaApp`, `Application`, ...).
    pub kind: String,
    pub labels: BTreeMap<String, String>,
    pub commit: Commit,
    pub trigger: Trigger,
    pub status: DeploymentStatus,
    pub status_reason: String,
    /// The strategy the planner chose, and why.
    pub strategy: Option<SyncStrategy>,
    pub summary: String,
    pub stages: Vec<Stage>,
    /// The commit that was live when this deployment was planned; rollback returns to it.
    pub running_commit: Option<CommitSha>,
    pub timeout: GoDuration,
    /// Step sequence number: bumped by every state change, so a stale message is detected.
    pub seq: u64,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub planned_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    /// When the next step is due; the resume sweep re-drives a deployment that is past it.
    pub due_at: Millis,
    pub cancel: Option<CancelRequest>,
    /// For a PENDING deployment: the deployment that holds the app's lock.
    pub blocked_by: Option<DeploymentId>,
    /// Who notifications mention, per event (the app config's `spec.notification.mentions`
    /// at the deployment's commit, kept when it is planned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<NotificationMention>,
    /// For a rollback (`gannet rollback`): the earlier successful deployment whose commit this
    /// one deploys again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<DeploymentId>,
    /// The chain this deployment was started by, and its block there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainLink>,
    /// The apps to deploy once this one succeeds (the config's `spec.postSync.chain` at the
    /// deployment's commit, kept when it is planned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain_next: Vec<ChainMatcher>,
}

impl Deployment {
    pub fn stage(&self, id: &StageId) -> Option<&Stage> {
        self.stages.iter().find(|s| &s.id == id)
    }

    pub fn stage_mut(&mut self, id: &StageId) -> Option<&mut Stage> {
        self.stages.iter_mut().find(|s| &s.id == id)
    }
}

/// Who a deployment's notifications mention, as its app config says (`spec.notification`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationMention {
    /// An event such as `DEPLOYMENT_WAIT_APPROVAL`, or `*` for all.
    pub event: String,
    /// Deprecated in PipeCD in favour of `slackusers`.
    pub slack: Vec<String>,
    pub slackusers: Vec<String>,
    pub slackgroups: Vec<String>,
    pub email: Vec<String>,
}
