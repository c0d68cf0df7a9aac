//! ECS_CANARY_ROLLOUT `{scale}` and ECS_PRIMARY_ROLLOUT.
//!
//! - The canary rollout puts a task set of the new task definition at `scale`% of the service's
//!   desired count on the canary target group (no target group with SERVICE_DISCOVERY). Once it
//!   is steady, older task sets gannet made that are not PRIMARY (canaries of earlier, cancelled
//!   deployments) are deleted, so repeated cancels never reach ECS's task set limit (PipeCD
//!   #4692). The new canary is already serving the canary target group by then.
//! - The primary rollout records the PRIMARY task set, creates a new one at 100% on the primary
//!   target group, makes it PRIMARY once steady, then deletes the old primary. The canary stays:
//!   it is removed by ECS_CANARY_CLEAN once traffic has left it (PipeCD #4710, where deleting it
//!   here gave users 503s).

use crate::spec::AccessType;
use gannet_sdk::plugin::{StageConfigError, StageResult, StepError, StepOutcome};
use serde_json::Value;

use crate::live::TaskSetStatus;
use crate::meta;
use crate::step::{Step, Variant, POLL};

/// ECS_CANARY_ROLLOUT's `with.scale`: the canary's share of the service's desired count.
/// ECS_CANARY_ROLLOUT's `with`.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CanaryOptions {
    /// The canary's share of the primary's task count, in percent.
    pub(crate) scale: gannet_config::Percentage,
}

pub(crate) fn canary_options(with: &Value) -> Result<u8, StageConfigError> {
    gannet_sdk::stage_options::parse::<CanaryOptions>(with).map(|o| o.scale.get())
}

pub(crate) async fn canary(step: &mut Step<'_>, scale: u8) -> Result<StepOutcome, StepError> {
    let key = step.ctx.deployment.id.to_string();
    let task_definition = step.task_definition(&key).await?;
    let service = match step.service().await? {
        Ok(s) => s,
        Err(reason) => return Ok(StepOutcome::Done(StageResult::Failure { reason })),
    };
    let input = step.desired.input.clone();
    let group = match input.access_type {
        AccessType::Elb => match input.target_groups.canary.as_ref() {
            Some(g) => Some(g),
            None => {
                return Err(StepError::permanent(format!(
                    "{}.targetGroups.canary: ECS_CANARY_ROLLOUT puts the canary on the canary target group; configure one (or use accessType: SERVICE_DISCOVERY)",
                    step.desired.input_field
                )))
            }
        },
        AccessType::ServiceDiscovery => None,
    };
    let set = step
        .task_set(
            &service,
            Variant::Canary,
            f64::from(scale),
            group,
            &task_definition,
        )
        .await?;
    if !set.is_steady() {
        step.log(&format!("Waiting: {}", set.progress())).await;
        return Ok(StepOutcome::Continue { after: POLL });
    }
    let sets = step.task_sets(&service).await?;
    step.delete_managed(
        &service,
        &sets,
        &|s| s.arn == set.arn || s.status == TaskSetStatus::Primary,
        "a stale task set of an earlier deployment",
    )
    .await?;
    step.log(&format!(
        "Canary task set {} runs at {scale}% and is steady",
        set.id
    ))
    .await;
    Ok(StepOutcome::Done(StageResult::Success))
}

pub(crate) async fn primary(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let key = step.ctx.deployment.id.to_string();
    let task_definition = step.task_definition(&key).await?;
    let service = match step.service().await? {
        Ok(s) => s,
        Err(reason) => return Ok(StepOutcome::Done(StageResult::Failure { reason })),
    };
    let own_key = meta::stage_key(step.ctx.deployment, step.ctx.stage);
    if step.meta.get(meta::PREVIOUS_PRIMARY).is_none() {
        let sets = step.task_sets(&service).await?;
        let previous = sets
            .iter()
            .find(|s| s.status == TaskSetStatus::Primary && s.external_id != own_key)
            .map_or_else(|| "none".to_owned(), |s| s.arn.clone());
        step.meta
            .save(&[(meta::PREVIOUS_PRIMARY, previous)])
            .await?;
    }
    let input = step.desired.input.clone();
    let group = input
        .target_groups
        .primary
        .as_ref()
        .filter(|_| input.access_type == AccessType::Elb);
    let set = step
        .task_set(&service, Variant::Primary, 100.0, group, &task_definition)
        .await?;
    if !set.is_steady() {
        step.log(&format!("Waiting: {}", set.progress())).await;
        return Ok(StepOutcome::Continue { after: POLL });
    }
    step.make_primary(&service, &set).await?;
    let previous = step
        .meta
        .get(meta::PREVIOUS_PRIMARY)
        .unwrap_or("none")
        .to_owned();
    let sets = step.task_sets(&service).await?;
    step.delete_managed(
        &service,
        &sets,
        &|s| s.arn != previous || s.arn == set.arn,
        "the previous primary",
    )
    .await?;
    step.log(&format!(
        "Task set {} ({task_definition}) is the primary at 100%; any canary stays until ECS_CANARY_CLEAN",
        set.id
    ))
    .await;
    Ok(StepOutcome::Done(StageResult::Success))
}
