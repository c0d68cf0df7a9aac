//! ECS_ROLLBACK, the hidden stage that undoes a deployment's ECS stages:
//! 1. traffic first: every listener rule a routing stage of this deployment rewrote routes the
//!    pair 100/0 again, so no request goes to a target group about to lose its tasks;
//! 2. the service definition of the running commit is applied again (tags name that commit);
//! 3. the primary: when the PRIMARY task set from before the deployment still runs, it stays;
//!    otherwise the running commit's task definition is registered and a task set at 100% on
//!    the primary target group becomes PRIMARY once steady;
//! 4. every other task set gannet made is deleted: the canary (which takes it out of the canary
//!    target group, PipeCD #4329), this deployment's primary, stale ones.
//!
//! The decision in 3 is saved before acting, so a repeated step makes the same one. Nothing to
//! undo when no ECS stage started; a first deployment cannot roll back and says so.

use crate::spec::AccessType;
use gannet_domain::deployment::Stage;
use gannet_sdk::plugin::{StageResult, StepError, StepOutcome};

use crate::live::TaskSetStatus;
use crate::meta;
use crate::routing::{Pair, Weights};
use crate::step::{Step, Variant, POLL};

/// True for an ECS stage that changes something (not a rollback).
pub(crate) fn is_forward(stage: &Stage) -> bool {
    !stage.rollback && crate::FORWARD_STAGES.contains(&stage.name.as_str())
}

/// The forward ECS stages of the deployment that started.
pub(crate) fn started(stages: &[Stage]) -> Vec<&Stage> {
    stages
        .iter()
        .filter(|s| is_forward(s) && s.started_at.is_some())
        .collect()
}

pub(crate) async fn run(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let d = step.ctx.deployment;
    // 1. Traffic.
    for stage in started(&d.stages) {
        let m = &stage.metadata;
        let (Some(listeners), Some(primary), Some(canary)) = (
            m.get(meta::LISTENERS),
            m.get(meta::PRIMARY_TARGET_GROUP),
            m.get(meta::CANARY_TARGET_GROUP),
        ) else {
            continue;
        };
        let listeners: Vec<String> = listeners
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let pair = Pair { primary, canary };
        step.route(&listeners, pair, Weights::ALL_PRIMARY).await?;
    }
    if step.desired.service.is_none() {
        step.log("The app runs a standalone task: there is no service to roll back")
            .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    }
    // 2. The service.
    let service = match step.service().await? {
        Ok(s) => s,
        Err(reason) => return Ok(StepOutcome::Done(StageResult::Failure { reason })),
    };
    // 3. The primary.
    let own = format!("{}/", d.id);
    if step.meta.get(meta::RESTORE).is_none() {
        let sets = step.task_sets(&service).await?;
        let decision = match sets
            .iter()
            .find(|s| s.status == TaskSetStatus::Primary && !s.external_id.starts_with(&own))
        {
            Some(kept) => format!("keep {}", kept.arn),
            None => "create".to_owned(),
        };
        step.meta.save(&[(meta::RESTORE, decision)]).await?;
    }
    let restore = step.meta.get(meta::RESTORE).unwrap_or("create").to_owned();
    let primary_arn = match restore.strip_prefix("keep ") {
        Some(arn) => {
            step.log(&format!(
                "The primary task set from before the deployment still runs: keeping {arn}"
            ))
            .await;
            arn.to_owned()
        }
        None => {
            let key = format!("{}/rollback", d.id);
            let task_definition = step.task_definition(&key).await?;
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
            set.arn
        }
    };
    // 4. Everything else gannet made.
    let sets = step.task_sets(&service).await?;
    step.delete_managed(&service, &sets, &|s| s.arn == primary_arn, "rolled back")
        .await?;
    step.log(&format!(
        "ECS service {} is back at commit {}",
        service.name,
        step.commit.short()
    ))
    .await;
    Ok(StepOutcome::Done(StageResult::Success))
}
