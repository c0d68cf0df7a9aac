//! LAMBDA_PROMOTE `{percent}`: the alias gives the version the canary published `percent` of the
//! traffic, and `RoutingConfig.AdditionalVersionWeights` gives the version that carried the
//! traffic before the deployment the rest. At 100 the routing config is cleared.
//!
//! The version and the function come from the last LAMBDA_CANARY_ROLLOUT before this stage; the
//! previous version from the routing saved when the deployment first touched the alias, so a
//! repeated or resumed promote computes the same weights.

use gannet_domain::deployment::{Deployment, Stage};
use gannet_sdk::plugin::{StageResult, StepContext, StepError, StepOutcome};

use crate::api::LambdaApi;
use crate::meta::{self, Meta};
use crate::rollout::route;
use crate::routing::AliasRouting;
use crate::target::DeployTarget;
use crate::{STAGE_CANARY_ROLLOUT, STAGE_PROMOTE, STAGE_SYNC};

pub(crate) async fn run(
    ctx: &StepContext<'_>,
    target: &DeployTarget,
    api: &LambdaApi,
    percent: u8,
) -> Result<StepOutcome, StepError> {
    let d = ctx.deployment;
    let Some(canary) = last_canary_before(d, ctx.stage) else {
        return Err(StepError::permanent(format!(
            "{STAGE_PROMOTE} needs a {STAGE_CANARY_ROLLOUT} stage before it that published a version"
        )));
    };
    let (Some(function), Some(new)) = (
        canary.metadata.get(meta::FUNCTION),
        canary.metadata.get(meta::VERSION),
    ) else {
        return Err(StepError::permanent(format!(
            "stage {} recorded no published version",
            canary.id
        )));
    };
    let alias = &target.alias;
    let original = original_routing(d)?;
    let want = match &original {
        Some(Some(before)) => AliasRouting::promote(new, before.dominant_version(), percent),
        _ if percent == 100 => AliasRouting::all_to(new),
        _ => {
            return Err(StepError::permanent(format!(
                "alias {alias} of {function} did not exist before this deployment, so no version can keep {}% of the traffic; promote to 100, or deploy with LAMBDA_SYNC first",
                100 - percent
            )))
        }
    };
    let mut own = Meta::new(ctx.io, ctx.stage);
    if own.get(meta::ALIAS_BEFORE).is_none() {
        let before = api.alias(function, alias).await?;
        own.save(&[
            (meta::FUNCTION, function.clone()),
            (
                meta::ALIAS_BEFORE,
                AliasRouting::to_metadata(before.as_ref()),
            ),
        ])
        .await?;
    }
    ctx.io
        .log(&format!(
            "Promoting version {new} of {function} to {percent}% of the traffic"
        ))
        .await;
    route(ctx, api, function, alias, &want).await?;
    Ok(StepOutcome::Done(StageResult::Success))
}

/// The last LAMBDA_CANARY_ROLLOUT that ran before `stage`.
fn last_canary_before<'d>(d: &'d Deployment, stage: &Stage) -> Option<&'d Stage> {
    let upto = d.stages.iter().position(|s| s.id == stage.id)?;
    d.stages[..upto]
        .iter()
        .rev()
        .find(|s| !s.rollback && s.name == STAGE_CANARY_ROLLOUT && s.started_at.is_some())
}

/// The alias routing before the deployment changed it: saved by its first Lambda stage that
/// saved any. `None` when no stage saved one; `Some(None)` when there was no alias.
pub(crate) fn original_routing(d: &Deployment) -> Result<Option<Option<AliasRouting>>, StepError> {
    for stage in d.stages.iter().filter(|s| is_forward(s)) {
        if let Some(saved) = meta::saved_routing(stage)? {
            return Ok(Some(saved));
        }
    }
    Ok(None)
}

/// A Lambda stage that deploys (not a rollback).
pub(crate) fn is_forward(stage: &Stage) -> bool {
    !stage.rollback
        && [STAGE_SYNC, STAGE_CANARY_ROLLOUT, STAGE_PROMOTE].contains(&stage.name.as_str())
}
