//! ECS_TRAFFIC_ROUTING `{primary|canary}` and ECS_CANARY_CLEAN.
//!
//! - Routing rewrites every listener rule, default rules included, whose forward action sends
//!   traffic to exactly the primary and canary target groups, on every listener of the load
//!   balancers that serve the primary target group. The listeners and the weights each rule had
//!   are saved before anything changes. A load balancer with no rule forwarding to the pair
//!   fails the stage: routing would silently do nothing (PipeCD logs it and succeeds).
//! - Canary clean deletes the canary task set this deployment's ECS_CANARY_ROLLOUT made. If the
//!   canary target group still gets traffic, that traffic goes back to the primary first, so
//!   deleting the canary never leaves requests without targets.

use crate::spec::AccessType;
use gannet_domain::deployment::Stage;
use gannet_sdk::plugin::{StageResult, StepError, StepOutcome};

use crate::meta;
use crate::routing::{Pair, Weights};
use crate::step::Step;
use crate::STAGE_CANARY_ROLLOUT;

/// The primary and canary target group ARNs, or why the stage cannot route.
fn pair_arns(step: &Step<'_>) -> Result<(String, String), String> {
    let input = &step.desired.input;
    if input.access_type != AccessType::Elb {
        return Err(format!(
            "{}.accessType: ECS_TRAFFIC_ROUTING routes through a load balancer; it cannot route SERVICE_DISCOVERY traffic",
            step.desired.input_field
        ));
    }
    match (&input.target_groups.primary, &input.target_groups.canary) {
        (Some(p), Some(c)) => Ok((p.target_group_arn.clone(), c.target_group_arn.clone())),
        _ => Err(format!(
            "{}.targetGroups: ECS_TRAFFIC_ROUTING needs both the primary and the canary target group",
            step.desired.input_field
        )),
    }
}

pub(crate) async fn route(step: &mut Step<'_>, weights: Weights) -> Result<StepOutcome, StepError> {
    let (primary, canary) = pair_arns(step).map_err(StepError::permanent)?;
    let pair = Pair {
        primary: &primary,
        canary: &canary,
    };
    let listeners: Vec<String> = match step.meta.get(meta::LISTENERS) {
        Some(saved) => saved
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        None => {
            let listeners = step.listeners_of(&primary).await?;
            let before = step.pair_weights(&listeners, pair).await?;
            let before_json = serde_json::to_string(
                &before
                    .iter()
                    .map(|(rule, w)| (rule.clone(), w.to_metadata()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
            .unwrap_or_default();
            step.meta
                .save(&[
                    (meta::LISTENERS, listeners.join(",")),
                    (meta::PRIMARY_TARGET_GROUP, primary.clone()),
                    (meta::CANARY_TARGET_GROUP, canary.clone()),
                    (meta::ROUTING_BEFORE, before_json),
                    (meta::WEIGHTS, weights.to_metadata()),
                ])
                .await?;
            listeners
        }
    };
    let related = step.route(&listeners, pair, weights).await?;
    if related == 0 {
        return Ok(StepOutcome::Done(StageResult::Failure {
            reason: format!(
                "no listener rule of the load balancers serving {primary} forwards to both {primary} and {canary}; make the listener's forward action (or a rule's) send traffic to both target groups (primary 100, canary 0) so gannet can shift weights between them"
            ),
        }));
    }
    step.log(&format!("{related} listener rule(s) route {weights}"))
        .await;
    Ok(StepOutcome::Done(StageResult::Success))
}

/// The last ECS_CANARY_ROLLOUT before `stage` that recorded a task set.
fn canary_stage<'d>(stages: &'d [Stage], stage: &Stage) -> Option<&'d Stage> {
    let upto = stages.iter().position(|s| s.id == stage.id)?;
    stages[..upto].iter().rev().find(|s| {
        !s.rollback && s.name == STAGE_CANARY_ROLLOUT && s.metadata.contains_key(meta::TASK_SET)
    })
}

pub(crate) async fn clean(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let Some(canary_arn) = canary_stage(&step.ctx.deployment.stages, step.ctx.stage)
        .and_then(|s| s.metadata.get(meta::TASK_SET))
        .cloned()
    else {
        step.log(
            "No ECS_CANARY_ROLLOUT of this deployment made a canary task set; nothing to clean",
        )
        .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    };
    let service = match step.service().await? {
        Ok(s) => s,
        Err(reason) => return Ok(StepOutcome::Done(StageResult::Failure { reason })),
    };
    if let Ok((primary, canary)) = pair_arns(step) {
        let pair = Pair {
            primary: &primary,
            canary: &canary,
        };
        let listeners = step.listeners_of(&primary).await?;
        let live = step.pair_weights(&listeners, pair).await?;
        if live.values().any(|w| w.canary > 0) {
            step.log("The canary target group still gets traffic: routing it all to the primary before deleting the canary").await;
            step.route(&listeners, pair, Weights::ALL_PRIMARY).await?;
        }
    }
    let sets = step.task_sets(&service).await?;
    step.delete_managed(&service, &sets, &|s| s.arn != canary_arn, "the canary")
        .await?;
    if !sets.iter().any(|s| s.arn == canary_arn) {
        step.log(&format!("Canary task set {canary_arn} is already gone"))
            .await;
    }
    Ok(StepOutcome::Done(StageResult::Success))
}
