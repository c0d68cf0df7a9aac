//! LAMBDA_SYNC and LAMBDA_CANARY_ROLLOUT: make the function match the manifest, wait while it
//! updates, publish a version; LAMBDA_SYNC then routes all traffic to it.
//!
//! One step goes as far as it can without waiting: every action is followed by a fresh read of
//! the function, and a function that is still updating ends the step with `Continue`. The
//! alias's routing is saved before anything changes, and the published version is saved as soon
//! as it exists, so a repeated step never publishes twice and rollback knows what to restore.

use gannet_domain::GoDuration;
use gannet_sdk::plugin::{StageResult, StepContext, StepError, StepOutcome};

use crate::api::LambdaApi;
use crate::function::{next_action, Desired, LiveFunction, Next};
use crate::gitzip::Tree;
use crate::meta::{self, Meta};
use crate::routing::{describe, AliasRouting};
use crate::source::{self, Origin};
use crate::target::DeployTarget;

/// How long to wait before looking at a function that is updating again.
pub(crate) const POLL: GoDuration = GoDuration::from_secs(2);
/// Actions one step may take before it yields (create, code, configuration, tags: 4 suffice).
const MAX_ACTIONS: usize = 6;

/// Whether the stage moves the alias once the version is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterPublish {
    /// LAMBDA_SYNC: all traffic to the new version.
    RouteAll,
    /// LAMBDA_CANARY_ROLLOUT: leave the alias alone.
    KeepAlias,
}

/// Where a function's convergence stands after one step.
pub(crate) enum Converged {
    Ready(Box<LiveFunction>),
    Wait(String),
    Failed(String),
}

pub(crate) async fn run(
    ctx: &StepContext<'_>,
    target: &DeployTarget,
    api: &LambdaApi,
    after: AfterPublish,
) -> Result<StepOutcome, StepError> {
    let d = ctx.deployment;
    let origin = Origin {
        app_dir: ctx.app_dir,
        app_id: &d.app,
        commit: &d.commit.sha,
    };
    let loaded = match source::for_step(ctx, &target.git, Tree::This, &origin, "").await? {
        Ok(loaded) => loaded,
        Err(outcome) => return Ok(outcome),
    };
    let want = &loaded.desired;
    let name = want.name();
    let mut meta = Meta::new(ctx.io, ctx.stage);
    if meta.get(meta::FUNCTION).is_none() {
        let artifact = want.manifest.artifact_version(zip_hex(want));
        ctx.io
            .log(&format!(
                "Deploying function {name} ({artifact}) from {} at commit {} to {} ({})",
                loaded.manifest_file,
                d.commit.sha.short(),
                target.name,
                target.region
            ))
            .await;
        meta.save(&[
            (meta::FUNCTION, name.to_owned()),
            (meta::ARTIFACT_VERSION, artifact.to_string()),
        ])
        .await?;
    }
    if meta.get(meta::ALIAS_BEFORE).is_none() {
        let before = api.alias(name, &target.alias).await?;
        meta.save(&[(
            meta::ALIAS_BEFORE,
            AliasRouting::to_metadata(before.as_ref()),
        )])
        .await?;
        ctx.io
            .log(&format!(
                "Alias {} routes: {}",
                target.alias,
                describe(before.as_ref())
            ))
            .await;
    }
    let version = match meta.get(meta::VERSION) {
        Some(v) => v.to_owned(),
        None => match converge(api, want, &mut meta).await? {
            Converged::Ready(live) => publish(ctx, api, want, &live, &mut meta).await?,
            Converged::Wait(why) => {
                ctx.io.log(&format!("Waiting: {why}")).await;
                return Ok(StepOutcome::Continue { after: POLL });
            }
            Converged::Failed(reason) => {
                return Ok(StepOutcome::Done(StageResult::Failure { reason }))
            }
        },
    };
    match after {
        AfterPublish::KeepAlias => {
            ctx.io
                .log(&format!(
                    "Version {version} is ready; alias {} is unchanged until LAMBDA_PROMOTE",
                    target.alias
                ))
                .await;
        }
        AfterPublish::RouteAll => {
            route(
                ctx,
                api,
                name,
                &target.alias,
                &AliasRouting::all_to(&version),
            )
            .await?;
        }
    }
    Ok(StepOutcome::Done(StageResult::Success))
}

fn zip_hex(want: &Desired) -> Option<&str> {
    match &want.code {
        crate::function::Code::Zip { hex, .. } => Some(hex),
        _ => None,
    }
}

/// Brings the function towards `want`, one action at a time, until it matches or must wait.
pub(crate) async fn converge(
    api: &LambdaApi,
    want: &Desired,
    meta: &mut Meta<'_>,
) -> Result<Converged, StepError> {
    let name = want.name();
    let log = meta.io();
    for _ in 0..MAX_ACTIONS {
        let live = api.function(name).await?;
        match next_action(live.as_ref(), want, &meta::applied(meta)) {
            Next::Create => {
                log.log(&format!("Creating function {name}")).await;
                let sha = api.create(want).await?;
                meta.save(&[
                    (
                        meta::APPLIED_CODE,
                        format!("{} {sha}", want.code.identity()),
                    ),
                    (meta::APPLIED_CONFIG, want.config_digest()),
                ])
                .await?;
            }
            Next::Wait { why } => return Ok(Converged::Wait(why)),
            Next::UpdateCode => {
                log.log(&format!("Updating the code of {name}")).await;
                let sha = api.update_code(want).await?;
                meta.save(&[(
                    meta::APPLIED_CODE,
                    format!("{} {sha}", want.code.identity()),
                )])
                .await?;
            }
            Next::UpdateConfig { fields } => {
                log.log(&format!(
                    "Updating the configuration of {name}: {}",
                    fields.join(", ")
                ))
                .await;
                // The `live` that decided this exists; `None` only before a create.
                let live = live.unwrap_or_default();
                api.update_config(want, &live).await?;
                meta.save(&[(meta::APPLIED_CONFIG, want.config_digest())])
                    .await?;
            }
            Next::Tag { tags } => {
                let live = live.unwrap_or_default();
                let keys: Vec<&str> = tags.keys().map(String::as_str).collect();
                log.log(&format!("Tagging {name}: {}", keys.join(", ")))
                    .await;
                api.tag(&live.arn, &tags).await?;
            }
            Next::Ready { ignored } => {
                if !ignored.is_empty() {
                    log.log(&format!(
                        "Warning: the Lambda API did not apply {} to {name}; going on with what it has",
                        ignored.join(", ")
                    ))
                    .await;
                }
                return Ok(Converged::Ready(Box::new(live.unwrap_or_default())));
            }
            Next::Failed { reason } => return Ok(Converged::Failed(reason)),
        }
    }
    Ok(Converged::Wait(format!(
        "{name} still differs from its manifest after {MAX_ACTIONS} changes"
    )))
}

/// Publishes `$LATEST` once for this stage: the description is the stage's key, saved before
/// the call, so a step that died after publishing finds its version instead of making another.
async fn publish(
    ctx: &StepContext<'_>,
    api: &LambdaApi,
    want: &Desired,
    live: &LiveFunction,
    meta: &mut Meta<'_>,
) -> Result<String, StepError> {
    let name = want.name();
    let description = publish_key(ctx);
    if meta.get(meta::PUBLISHING) == Some(description.as_str()) {
        if let Some(version) = api.version_described(name, &description).await? {
            ctx.io
                .log(&format!(
                    "Found version {version}, published by an earlier attempt"
                ))
                .await;
            meta.save(&[(meta::VERSION, version.clone())]).await?;
            return Ok(version);
        }
    }
    meta.save(&[(meta::PUBLISHING, description.clone())])
        .await?;
    let version = api.publish(name, live, &description).await?;
    meta.save(&[(meta::VERSION, version.clone())]).await?;
    ctx.io
        .log(&format!("Published version {version} of {name}"))
        .await;
    Ok(version)
}

/// The published version's description: which deployment and stage published it.
fn publish_key(ctx: &StepContext<'_>) -> String {
    let text = format!(
        "gannet deployment {} stage {}",
        ctx.deployment.id, ctx.stage.id
    );
    // Lambda allows 256 characters.
    text.chars().take(256).collect()
}

/// Points `alias` at `want` unless it already routes that way, then logs what AWS reports.
pub(crate) async fn route(
    ctx: &StepContext<'_>,
    api: &LambdaApi,
    function: &str,
    alias: &str,
    want: &AliasRouting,
) -> Result<(), StepError> {
    let live = api.alias(function, alias).await?;
    if live.as_ref().is_some_and(|l| l.same_as(want)) {
        ctx.io
            .log(&format!("Alias {alias} already routes: {want}"))
            .await;
        return Ok(());
    }
    api.put_alias(function, alias, want, live.is_some()).await?;
    let now = api.alias(function, alias).await?;
    ctx.io
        .log(&format!(
            "Alias {alias} routes: {} (was: {})",
            describe(now.as_ref()),
            describe(live.as_ref())
        ))
        .await;
    Ok(())
}
