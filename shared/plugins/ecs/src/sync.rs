//! ECS_SYNC, the quick sync:
//! 1. register the task definition;
//! 2. create or update the service;
//! 3. create a task set at 100% on the primary target group;
//! 4. once it is steady, make it the PRIMARY task set;
//! 5. with both target groups configured, route all traffic to the primary;
//! 6. delete the old task sets gannet (or PipeCD) made.
//!
//! With `quickSync.recreate` the old task sets are scaled to 0 first, so old and new never run
//! side by side (the app is briefly unavailable). A standalone task (no service definition) is
//! registered and, with `runStandaloneTask`, run once through RunTask.

use crate::spec::AccessType;
use gannet_sdk::plugin::{StageResult, StepError, StepOutcome};

use crate::api::StandaloneTask;
use crate::meta;
use crate::routing::{Pair, Weights};
use crate::step::{Step, Variant, POLL};

pub(crate) async fn run(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let key = step.ctx.deployment.id.to_string();
    let task_definition = step.task_definition(&key).await?;
    if step.desired.service.is_none() {
        return standalone(step, &task_definition).await;
    }
    let service = match step.service().await? {
        Ok(s) => s,
        Err(reason) => return Ok(StepOutcome::Done(StageResult::Failure { reason })),
    };
    let input = step.desired.input.clone();
    let elb = input.access_type == AccessType::Elb;
    let own_key = meta::stage_key(step.ctx.deployment, step.ctx.stage);
    if step.desired.recreate && step.meta.get(meta::OLD_SCALED_DOWN).is_none() {
        for old in step.task_sets(&service).await? {
            if old.external_id != own_key && crate::source::is_managed(&old.tags) {
                step.api.scale_task_set(&service, &old.arn, 0.0).await?;
                step.log(&format!(
                    "Scaled task set {} to 0 (quickSync.recreate)",
                    old.id
                ))
                .await;
            }
        }
        step.meta
            .save(&[(meta::OLD_SCALED_DOWN, "true".to_owned())])
            .await?;
    }
    let primary_group = input.target_groups.primary.as_ref().filter(|_| elb);
    let set = step
        .task_set(
            &service,
            Variant::Primary,
            100.0,
            primary_group,
            &task_definition,
        )
        .await?;
    if !set.is_steady() {
        step.log(&format!("Waiting: {}", set.progress())).await;
        return Ok(StepOutcome::Continue { after: POLL });
    }
    step.make_primary(&service, &set).await?;
    if let (true, Some(primary), Some(canary)) = (
        elb,
        input.target_groups.primary.as_ref(),
        input.target_groups.canary.as_ref(),
    ) {
        // Old canaries are deleted below: no traffic may still go to them.
        let listeners = step.listeners_of(&primary.target_group_arn).await?;
        let pair = Pair {
            primary: &primary.target_group_arn,
            canary: &canary.target_group_arn,
        };
        step.route(&listeners, pair, Weights::ALL_PRIMARY).await?;
    }
    let sets = step.task_sets(&service).await?;
    step.delete_managed(
        &service,
        &sets,
        &|s| s.arn == set.arn,
        "replaced by the quick sync",
    )
    .await?;
    step.log(&format!(
        "ECS service {} runs task set {} ({task_definition}) at 100%",
        service.name, set.id
    ))
    .await;
    Ok(StepOutcome::Done(StageResult::Success))
}

/// A standalone task: registered, and run once when `runStandaloneTask` is on.
async fn standalone(step: &mut Step<'_>, task_definition: &str) -> Result<StepOutcome, StepError> {
    let input = step.desired.input.clone();
    if !input.run_standalone_task {
        step.log("The task definition is registered; runStandaloneTask is off, so no task runs")
            .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    }
    if let Some(task) = step.meta.get(meta::TASK) {
        step.log(&format!("Task {task} was started by an earlier attempt"))
            .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    }
    // ECS's startedBy takes at most 128 characters: the deployment and stage ids fit.
    let started_by: String = format!(
        "gannet/{}",
        meta::stage_key(step.ctx.deployment, step.ctx.stage)
    )
    .chars()
    .take(128)
    .collect();
    if step.meta.get(meta::STARTED_BY) == Some(started_by.as_str()) {
        if let Some(task) = step
            .api
            .tasks_started_by(&input.cluster_arn, &started_by)
            .await?
            .first()
        {
            step.meta.save(&[(meta::TASK, task.clone())]).await?;
            step.log(&format!("Task {task} was started by an earlier attempt"))
                .await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
    }
    step.meta
        .save(&[(meta::STARTED_BY, started_by.clone())])
        .await?;
    let launch_type = serde_json::to_value(input.launch_type)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "FARGATE".to_owned());
    let awsvpc = crate::manifest::AwsVpc {
        subnets: input.awsvpc_configuration.subnets.clone(),
        security_groups: input.awsvpc_configuration.security_groups.clone(),
        assign_public_ip: input
            .awsvpc_configuration
            .assign_public_ip
            .and_then(|a| serde_json::to_value(a).ok())
            .and_then(|v| v.as_str().map(str::to_owned)),
    };
    let tags = step.managed_tags();
    let task = step
        .api
        .run_task(&StandaloneTask {
            cluster: &input.cluster_arn,
            task_definition,
            launch_type: &launch_type,
            awsvpc: Some(&awsvpc),
            started_by: &started_by,
            tags: &tags,
        })
        .await?;
    step.meta.save(&[(meta::TASK, task.clone())]).await?;
    step.log(&format!(
        "Started standalone task {task} in cluster {}",
        input.cluster_arn
    ))
    .await;
    Ok(StepOutcome::Done(StageResult::Success))
}
