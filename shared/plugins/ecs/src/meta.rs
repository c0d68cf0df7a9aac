//! Stage metadata: what a step records before it depends on it, so a repeated step (a
//! duplicate message, a restart) picks up where the last one stopped, and rollback knows what
//! the deployment changed.

use gannet_domain::deployment::{Deployment, Stage};

/// The task definition ARN the stage deploys.
pub const TASK_DEFINITION: &str = "taskDefinition";
/// The registration key, saved before RegisterTaskDefinition (the revision carries it as a tag).
pub const REGISTERING: &str = "registering";
/// The service ARN, saved once the service definition is applied.
pub const SERVICE: &str = "service";
/// The task set this stage created (its ARN); saved right after CreateTaskSet. Before the call
/// the stage's `<deployment>/<stage>` key goes to AWS as the task set's external id, so a task
/// set made by a step that died before saving is found again.
pub const TASK_SET: &str = "taskSet";
/// The PRIMARY task set before the stage changed anything (`none` when there was none).
pub const PREVIOUS_PRIMARY: &str = "previousPrimary";
/// Rollback's decision, saved before it acts: `keep <arn>` (the primary from before the
/// deployment still runs) or `create`.
pub const RESTORE: &str = "restore";
/// Recreate (quick sync): the old task sets were scaled to 0.
pub const OLD_SCALED_DOWN: &str = "oldScaledDown";
/// The listeners a routing stage rewrote (comma-separated ARNs), saved before rewriting.
pub const LISTENERS: &str = "listeners";
/// The primary and canary target groups a routing stage routed between.
pub const PRIMARY_TARGET_GROUP: &str = "primaryTargetGroup";
pub const CANARY_TARGET_GROUP: &str = "canaryTargetGroup";
/// The weights of every rule forwarding to the pair before the stage (JSON).
pub const ROUTING_BEFORE: &str = "routingBefore";
/// The weights the stage routes: `primary/canary`.
pub const WEIGHTS: &str = "weights";
/// A standalone task's `startedBy`, saved before RunTask, and the task it started.
pub const STARTED_BY: &str = "startedBy";
pub const TASK: &str = "task";

/// A stage's metadata as this step sees it, saved through the step's IO.
pub(crate) use gannet_plugin_aws_common::StageMeta as Meta;

/// The `<deployment>/<stage>` key of a stage: the external id of the task set it creates.
pub(crate) fn stage_key(d: &Deployment, stage: &Stage) -> String {
    format!("{}/{}", d.id, stage.id)
}
