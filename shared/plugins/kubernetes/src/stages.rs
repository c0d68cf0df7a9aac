//! The stages, each a function of one step (see the crate docs for what each does).

use gannet_domain::deployment::Stage;
use gannet_sdk::plugin::{StageResult, StepError, StepOutcome};

use crate::configs::{self, ConfigKind};
use crate::objects::{self, Variant};
use crate::options::{self, PrimaryOptions, RoutingOptions, Split, SyncOptions};
use crate::patch;
use crate::step::{done, Desired, Step, META_SPLIT};

/// Rollback's metadata: set once traffic is back on the primary and the variants are gone.
const META_RESTORED: &str = "restored";

fn invalid(stage: &Stage, e: impl std::fmt::Display) -> StepError {
    StepError::permanent(format!("stage {}: invalid with.{e}", stage.id))
}

/// A variant copy's name suffix: the stage's `suffix`, or the variant's name.
fn suffix_of(suffix: &str, variant: Variant) -> &str {
    if suffix.is_empty() {
        variant.name()
    } else {
        suffix
    }
}

/// K8S_SYNC: apply everything, wait for the rollout, prune.
pub(crate) async fn sync(
    step: &mut Step<'_>,
    options: SyncOptions,
) -> Result<StepOutcome, StepError> {
    let manifests = step.manifests.clone();
    let desired = step
        .desired(
            &manifests,
            Variant::Primary,
            options.add_variant_label_to_selector,
        )
        .await?;
    if !step.applied() {
        step.apply_all(&desired).await?;
    }
    if let Some(waiting) = step.wait_rollout(&desired).await? {
        return Ok(waiting);
    }
    if options.prune {
        step.prune(&desired, true).await?;
    }
    done(
        step,
        &format!(
            "Synced {} object(s) at {}",
            desired.len(),
            step.commit.short()
        ),
    )
    .await
}

/// K8S_CANARY_ROLLOUT and K8S_BASELINE_ROLLOUT: copies of the workloads (of this commit for a
/// canary, of the running commit for a baseline) as the variant.
pub(crate) async fn variant_rollout(
    step: &mut Step<'_>,
    variant: Variant,
) -> Result<StepOutcome, StepError> {
    let stage = step.ctx.stage;
    let opts =
        options::rollout(&stage.with, variant == Variant::Canary).map_err(|e| invalid(stage, e))?;
    let copies = variant_copies(step, variant, &opts).await?;
    if !step.applied() {
        step.apply_all(&copies).await?;
    }
    if let Some(waiting) = step.wait_rollout(&copies).await? {
        return Ok(waiting);
    }
    done(
        step,
        &format!(
            "The {} variant runs: {} object(s)",
            variant.name(),
            copies.len()
        ),
    )
    .await
}

async fn variant_copies(
    step: &mut Step<'_>,
    variant: Variant,
    opts: &options::RolloutOptions,
) -> Result<Vec<Desired>, StepError> {
    let suffix = suffix_of(&opts.suffix, variant).to_owned();
    // The primary's replica counts come from this commit; a baseline runs the running commit.
    let primary = step.manifests.clone();
    let source = if variant == Variant::Baseline {
        step.running.clone().map_err(|why| {
            StepError::permanent(format!(
                "a baseline runs the running commit's workloads: {why}"
            ))
        })?
    } else {
        // The canary's copies get the stage's patches; the primary keeps Git's manifests.
        let mut patched = primary.clone();
        patch::apply(&mut patched, &opts.patches).map_err(|e| {
            StepError::permanent(format!("stage {}: with.patches: {e}", step.ctx.stage.id))
        })?;
        patched
    };
    let mut picked: Vec<_> = step.workloads(&source).into_iter().cloned().collect();
    if picked.is_empty() {
        return Err(StepError::permanent("the app has no workload to copy: add a Deployment, or name the workloads in spec.workloads"));
    }
    let key = step.spec.variant_label.key.clone();
    for w in &picked {
        if w.body
            .pointer("/spec/selector/matchLabels")
            .and_then(|l| l.get(&key))
            .is_none()
            && !step.applied()
        {
            step.log(&format!(
                "Warning: {} {}'s selector has no {key} label, so it also selects the {} pods; PipeCD asks for {key}: primary in the selector and the pod template",
                w.kind, w.name, variant.name()
            )).await;
        }
    }
    // The ConfigMaps and Secrets in Git that the workloads use get copies of their own, so the
    // variant runs with its commit's config (PipeCD's config-change canary).
    let mut configs: Vec<(ConfigKind, String)> = Vec::new();
    for w in &picked {
        for (kind, name) in configs::used_by(&w.body) {
            let in_git = source
                .iter()
                .any(|m| m.kind == kind.kind() && m.name == name);
            if in_git && !configs.contains(&(kind, name.clone())) {
                configs.push((kind, name));
            }
        }
    }
    for (kind, name) in &configs {
        if let Some(m) = source
            .iter()
            .find(|m| m.kind == kind.kind() && m.name == *name)
        {
            picked.push(m.clone());
        }
    }
    if opts.create_service {
        if let Some(service) = step.service(&source) {
            picked.push(service.clone());
        }
    }
    let mut copies = step.desired(&picked, variant, true).await?;
    let value = variant.value(&step.spec.variant_label).to_owned();
    for (copy, m) in copies.iter_mut().zip(&picked) {
        copy.rename_with_suffix(&suffix);
        if m.kind == "Service" {
            objects::variant_service(&mut copy.body, &key, &value);
        } else if m.kind == "ConfigMap" || m.kind == "Secret" {
            // A copy of the config, as it is.
        } else {
            configs::refer_to_copies(&mut copy.body, &configs, &suffix);
            let in_git = primary
                .iter()
                .find(|p| p.kind == m.kind && p.name == m.name)
                .unwrap_or(m);
            objects::set_replicas(
                &mut copy.body,
                opts.replicas.of(objects::replicas(&in_git.body)),
            );
        }
    }
    Ok(copies)
}

/// K8S_PRIMARY_ROLLOUT: this commit's objects as the primary. The routed object (the Service
/// or VirtualService a routing stage rewrites) is left to the routing stages once it exists.
pub(crate) async fn primary(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let stage = step.ctx.stage;
    let opts: PrimaryOptions =
        gannet_sdk::stage_options::parse(&stage.with).map_err(|e| invalid(stage, e))?;
    let manifests = step.manifests.clone();
    let mut desired = step
        .desired(
            &manifests,
            Variant::Primary,
            opts.add_variant_label_to_selector,
        )
        .await?;
    let keep_all = desired.clone();
    if let Some(routed) = step.routed(&manifests) {
        let name = routed.name.clone();
        let kind = routed.kind.clone();
        if let Some(i) = desired
            .iter()
            .position(|d| d.at.kind == kind && d.at.name == name)
        {
            if step
                .cluster
                .get(&desired[i].kind, &desired[i].at)
                .await?
                .is_some()
            {
                desired.remove(i);
            }
        }
    }
    if opts.create_service {
        if let Some(service) = step.service(&manifests).cloned() {
            let mut copy = step
                .desired(std::slice::from_ref(&service), Variant::Primary, true)
                .await?
                .remove(0);
            copy.rename_with_suffix(suffix_of(&opts.suffix, Variant::Primary));
            let (key, value) = (
                step.spec.variant_label.key.clone(),
                step.spec.variant_label.primary_value.clone(),
            );
            objects::variant_service(&mut copy.body, &key, &value);
            desired.push(copy);
        }
    }
    if !step.applied() {
        step.apply_all(&desired).await?;
    }
    if let Some(waiting) = step.wait_rollout(&desired).await? {
        return Ok(waiting);
    }
    if opts.prune {
        let mut keep = keep_all;
        keep.extend(desired);
        step.prune(&keep, false).await?;
    }
    done(step, &format!("The primary runs {}", step.commit.short())).await
}

/// K8S_TRAFFIC_ROUTING.
pub(crate) async fn route(step: &mut Step<'_>) -> Result<StepOutcome, StepError> {
    let stage = step.ctx.stage;
    let opts: RoutingOptions =
        gannet_sdk::stage_options::parse(&stage.with).map_err(|e| invalid(stage, e))?;
    let split = opts.split().map_err(|e| invalid(stage, e))?;
    let manifests = step.manifests.clone();
    // Saved first: rollback routes back whatever a started routing stage may have changed.
    step.meta
        .save(&[(
            META_SPLIT,
            serde_json::to_string(&split).unwrap_or_default(),
        )])
        .await?;
    step.route(&manifests, split).await?;
    Ok(StepOutcome::Done(StageResult::Success))
}

/// K8S_CANARY_CLEAN and K8S_BASELINE_CLEAN.
pub(crate) async fn clean(step: &mut Step<'_>, variant: Variant) -> Result<StepOutcome, StepError> {
    let deleted = step.clean(variant).await?;
    done(
        step,
        &format!(
            "Removed the {} variant ({deleted} object(s) deleted)",
            variant.name()
        ),
    )
    .await
}

/// The hidden rollback: the running commit's objects as the primary (with all traffic, when a
/// routing stage ran), no canary or baseline left, and the primary rolled out.
pub(crate) async fn rollback(
    step: &mut Step<'_>,
    routed_before: bool,
) -> Result<StepOutcome, StepError> {
    let manifests = step.manifests.clone();
    let desired = step.desired(&manifests, Variant::Primary, false).await?;
    if !step.applied() {
        step.apply_all(&desired).await?;
    }
    if step.meta.get(META_RESTORED).is_none() {
        if routed_before && step.routed(&manifests).is_some() {
            step.route(&manifests, Split::ALL_PRIMARY).await?;
        }
        let mut deleted = 0;
        for variant in [Variant::Canary, Variant::Baseline] {
            deleted += step.clean(variant).await?;
        }
        step.meta
            .save(&[(META_RESTORED, deleted.to_string())])
            .await?;
    }
    if let Some(waiting) = step.wait_rollout(&desired).await? {
        return Ok(waiting);
    }
    done(step, &format!("Rolled back to {}", step.commit.short())).await
}
