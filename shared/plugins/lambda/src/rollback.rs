//! LAMBDA_ROLLBACK, the hidden stage that undoes a deployment's Lambda stages: it puts the
//! alias's routing back exactly as it was before the deployment (deleting the alias if there was
//! none), then makes `$LATEST` match the running commit's manifest again (code, configuration,
//! tags), waiting while the function updates.
//!
//! Nothing to undo when no Lambda stage started. On a first deployment there is no running
//! commit to return to, and the stage fails saying so.

use gannet_sdk::plugin::{StageResult, StepContext, StepError, StepOutcome};

use crate::api::LambdaApi;
use crate::gitzip::Tree;
use crate::meta::{self, Meta};
use crate::promote::is_forward;
use crate::rollout::{converge, route, Converged, POLL};
use crate::routing::describe;
use crate::source::{self, Origin};
use crate::target::DeployTarget;

pub(crate) async fn run(
    ctx: &StepContext<'_>,
    target: &DeployTarget,
    api: &LambdaApi,
) -> Result<StepOutcome, StepError> {
    let d = ctx.deployment;
    let started: Vec<_> = d
        .stages
        .iter()
        .filter(|s| is_forward(s) && s.started_at.is_some())
        .collect();
    if started.is_empty() {
        ctx.io
            .log("No Lambda stage of this deployment started; nothing to roll back")
            .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    }
    let (Some(running_dir), Some(running)) = (ctx.running_app_dir, d.running_commit.as_ref())
    else {
        let function = started
            .iter()
            .find_map(|s| s.metadata.get(meta::FUNCTION))
            .map_or_else(|| "the function".to_owned(), |f| format!("function {f}"));
        let reason = format!(
            "cannot roll back: this is the app's first deployment, so there is no earlier commit to return to; {function} and alias {} are left as this deployment made them",
            target.alias
        );
        ctx.io.log(&reason).await;
        return Ok(StepOutcome::Done(StageResult::Failure { reason }));
    };

    // 1. Traffic first: the alias as it was before the deployment.
    let touched = started.iter().find_map(|s| {
        let function = s.metadata.get(meta::FUNCTION)?;
        Some((function, meta::saved_routing(s).transpose()?))
    });
    if let Some((function, saved)) = touched {
        match saved? {
            Some(before) => route(ctx, api, function, &target.alias, &before).await?,
            None => {
                let live = api.alias(function, &target.alias).await?;
                if live.is_some() {
                    api.delete_alias(function, &target.alias).await?;
                    ctx.io
                        .log(&format!(
                            "Deleted alias {} ({}): it did not exist before this deployment",
                            target.alias,
                            describe(live.as_ref())
                        ))
                        .await;
                }
            }
        }
    }

    // 2. `$LATEST` as the running commit has it.
    let origin = Origin {
        app_dir: running_dir,
        app_id: &d.app,
        commit: running,
    };
    let at = format!("at the running commit {}: ", running.short());
    let loaded = match source::for_step(ctx, &target.git, Tree::Running, &origin, &at).await? {
        Ok(loaded) => loaded,
        Err(outcome) => return Ok(outcome),
    };
    let mut own = Meta::new(ctx.io, ctx.stage);
    if own.get(meta::FUNCTION).is_none() {
        ctx.io
            .log(&format!(
                "Restoring function {} to the configuration of commit {}",
                loaded.desired.name(),
                running.short()
            ))
            .await;
        own.save(&[(meta::FUNCTION, loaded.desired.name().to_owned())])
            .await?;
    }
    match converge(api, &loaded.desired, &mut own).await? {
        Converged::Ready(_) => {
            ctx.io
                .log(&format!(
                    "Function {} is back at commit {}",
                    loaded.desired.name(),
                    running.short()
                ))
                .await;
            Ok(StepOutcome::Done(StageResult::Success))
        }
        Converged::Wait(why) => {
            ctx.io.log(&format!("Waiting: {why}")).await;
            Ok(StepOutcome::Continue { after: POLL })
        }
        Converged::Failed(reason) => Ok(StepOutcome::Done(StageResult::Failure { reason })),
    }
}
