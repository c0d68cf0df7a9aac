//! What AWS says about an app's ECS resources, in the plugin's own types: the service and its
//! task sets. The stages decide from these; a drift check can compare them with the manifests.

use std::collections::BTreeMap;

/// An ECS service as DescribeServices reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LiveService {
    pub arn: String,
    pub name: String,
    pub cluster_arn: String,
    /// `ACTIVE`, `DRAINING` or `INACTIVE`.
    pub status: String,
    /// `ECS`, `CODE_DEPLOY` or `EXTERNAL`; `ECS` when AWS names none.
    pub controller: String,
    pub desired_count: i32,
    pub running_count: i32,
    pub pending_count: i32,
    pub task_set_arns: Vec<String>,
    pub tags: BTreeMap<String, String>,
    /// The newest service event's message, for logs while waiting.
    pub latest_event: Option<String>,
}

/// A task set's ECS status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskSetStatus {
    Primary,
    Active,
    Draining,
}

/// A task set as DescribeTaskSets reports it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LiveTaskSet {
    pub arn: String,
    pub id: String,
    pub status: TaskSetStatus,
    pub task_definition: String,
    /// What gannet set when it created the task set: `<deployment>/<stage>`.
    pub external_id: String,
    /// `STEADY_STATE`, `STABILIZING`, or empty when AWS says nothing.
    pub stability: String,
    pub computed_desired_count: i32,
    pub running_count: i32,
    pub pending_count: i32,
    /// Percent of the service's desired count.
    pub scale: Option<f64>,
    pub target_groups: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

impl LiveTaskSet {
    /// Steady: every task it wants is running and healthy (AWS's `STEADY_STATE`: running equals
    /// the computed desired count, none pending, and every health check passes).
    pub(crate) fn is_steady(&self) -> bool {
        self.stability == "STEADY_STATE"
            && self.pending_count == 0
            && self.running_count >= self.computed_desired_count
    }

    /// Why it is not steady yet, for the stage log.
    pub(crate) fn progress(&self) -> String {
        format!(
            "task set {} is {} ({} of {} tasks running, {} pending)",
            self.id,
            if self.stability.is_empty() {
                "not reported stable"
            } else {
                &self.stability
            },
            self.running_count,
            self.computed_desired_count,
            self.pending_count
        )
    }
}
