//! One step of a Kubernetes stage: the desired objects at a commit, applied, waited for,
//! routed, cleaned and pruned. Every step is safe to repeat: server-side apply of the same
//! object changes nothing, a delete of what is gone is a no-op, and what a stage has done is
//! saved in its metadata before the next part depends on it.

use std::collections::{BTreeMap, BTreeSet};

use crate::spec::{KubernetesSpec, TrafficRoutingMethod};
use gannet_domain::ids::CommitSha;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{StageResult, StepContext, StepError, StepOutcome};
use gannet_sdk::stage_meta::StageMeta;
use serde_json::{json, Value};

use crate::cluster::{Cluster, Owner};
use crate::kinds::{self, Kind};
use crate::manifest::{self, Manifest, ObjectRef};
use crate::objects::{self, Stamp, Variant};
use crate::options::Split;
use crate::rollout::{self, Rollout};
use crate::routing;

/// Stage metadata: the commit whose objects the stage applied (so later steps only wait).
pub const META_APPLIED: &str = "applied";
/// The objects the stage applied, one per line (`Deployment/default/web`).
pub const META_OBJECTS: &str = "objects";
/// The last rollout line logged, so a waiting step logs only what changed.
pub const META_WAITING: &str = "waiting";
/// Set once prune has run.
pub const META_PRUNED: &str = "pruned";
/// The traffic split a routing stage applied (JSON of [`Split`]).
pub const META_SPLIT: &str = "split";

/// A desired object: where it goes, its kind, and the body to apply.
#[derive(Clone, Debug)]
pub(crate) struct Desired {
    pub at: ObjectRef,
    pub kind: Kind,
    pub body: Value,
}

impl Desired {
    /// The same object as a variant's copy named `<name>-<suffix>` (the name and PipeCD's
    /// resource key follow).
    pub fn rename_with_suffix(&mut self, suffix: &str) {
        self.at = self.at.renamed(format!("{}-{suffix}", self.at.name));
        self.body["metadata"]["name"] = json!(self.at.name);
        self.body["metadata"]["annotations"][objects::ANNOTATION_RESOURCE_KEY] =
            json!(self.at.pipecd_key());
    }
}

pub(crate) struct Step<'a> {
    pub ctx: &'a StepContext<'a>,
    pub cluster: &'a Cluster,
    pub spec: KubernetesSpec,
    pub manifests: Vec<Manifest>,
    pub commit: CommitSha,
    pub app_label: String,
    pub meta: StageMeta<'a>,
    /// The running commit's manifests, or why there are none (a first deployment, or they do
    /// not load).
    pub running: Result<Vec<Manifest>, String>,
}

impl Step<'_> {
    pub async fn log(&self, line: &str) {
        self.ctx.io.log(line).await;
    }

    /// Who applies: the app, by its label, under its own field manager.
    fn owner(&self) -> Owner {
        Owner::new(&self.app_label)
    }

    fn stamp(&self) -> Stamp<'_> {
        Stamp {
            app: &self.ctx.deployment.app,
            app_label: &self.app_label,
            commit: &self.commit,
            variant_label: &self.spec.variant_label,
            namespace_override: &self.spec.input.namespace,
            default_namespace: self.cluster.default_namespace(),
        }
    }

    /// The objects of `manifests` as `variant`, resolved to their kinds and namespaces.
    pub async fn desired(
        &self,
        manifests: &[Manifest],
        variant: Variant,
        variant_selector: bool,
    ) -> Result<Vec<Desired>, StepError> {
        let stamp = self.stamp();
        let mut out = Vec::with_capacity(manifests.len());
        for m in manifests {
            let kind = self.cluster.kind(&m.api_version, &m.kind).await?;
            let at = stamp.object_ref(m, kind.namespaced);
            let body = stamp.object(m, &at, variant, variant_selector);
            out.push(Desired { at, kind, body });
        }
        Ok(out)
    }

    /// Applies `objects`: namespaces first (and the app's namespace when
    /// `autoCreateNamespace`), then the rest in file order. Saves what it applied.
    pub async fn apply_all(&mut self, objects: &[Desired]) -> Result<(), StepError> {
        if self.spec.input.auto_create_namespace {
            let namespaces: BTreeSet<&str> = objects
                .iter()
                .map(|o| o.at.namespace.as_str())
                .filter(|n| !n.is_empty())
                .collect();
            let kind = self.cluster.kind("v1", "Namespace").await?;
            for ns in namespaces {
                let at = ObjectRef {
                    api_version: "v1".into(),
                    kind: "Namespace".into(),
                    namespace: String::new(),
                    name: ns.to_owned(),
                };
                if self.cluster.get(&kind, &at).await?.is_none() {
                    let body =
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                    self.cluster.apply(&kind, &at, &body, &self.owner()).await?;
                    self.log(&format!("Created namespace {ns} (autoCreateNamespace)"))
                        .await;
                }
            }
        }
        let (first, rest): (Vec<&Desired>, Vec<&Desired>) =
            objects.iter().partition(|o| o.at.kind == "Namespace");
        for o in first.into_iter().chain(rest) {
            let taken_back = self
                .cluster
                .apply(&o.kind, &o.at, &o.body, &self.owner())
                .await?;
            self.log(&format!("Applied {}", o.at)).await;
            if !taken_back.is_empty() {
                self.log(&format!(
                    "Took back from a change by hand on {}: {}",
                    o.at,
                    taken_back.join("; ")
                ))
                .await;
            }
        }
        let listed: Vec<String> = objects.iter().map(|o| o.at.to_string()).collect();
        self.meta
            .save(&[
                (META_APPLIED, self.commit.as_str().to_owned()),
                (META_OBJECTS, listed.join("\n")),
            ])
            .await
    }

    /// True once this stage applied its objects at this commit.
    pub fn applied(&self) -> bool {
        self.meta.get(META_APPLIED) == Some(self.commit.as_str())
    }

    /// Waits for the workloads among `objects` to roll out: `Continue` while one has not. One
    /// list per workload kind (by the app's label), not a read per workload.
    pub async fn wait_rollout(
        &mut self,
        objects: &[Desired],
    ) -> Result<Option<StepOutcome>, StepError> {
        let workloads: Vec<&Desired> = objects
            .iter()
            .filter(|o| kinds::is_workload(&o.at.kind))
            .collect();
        let mut live: BTreeMap<ObjectRef, Value> = BTreeMap::new();
        let selector = objects::owned_selector(&self.app_label);
        let mut listed: Vec<&str> = Vec::new();
        for o in &workloads {
            if listed.contains(&o.at.kind.as_str()) {
                continue;
            }
            listed.push(&o.at.kind);
            for object in self.cluster.list(&o.kind, &selector).await? {
                live.insert(ObjectRef::of(&object), object);
            }
        }
        let mut waiting = Vec::new();
        for o in workloads {
            let Some(live) = live.get(&o.at) else {
                waiting.push(format!("{}: not found yet", o.at));
                continue;
            };
            match rollout::of(live) {
                Rollout::Done(_) => {}
                Rollout::Waiting(line) => waiting.push(format!("{}: {line}", o.at)),
                Rollout::Failed(reason) => {
                    let reason = format!("{}: {reason}", o.at);
                    self.log(&reason).await;
                    return Ok(Some(StepOutcome::Done(StageResult::Failure { reason })));
                }
            }
        }
        if waiting.is_empty() {
            return Ok(None);
        }
        let line = format!("Waiting for the rollout: {}", waiting.join("; "));
        if self.meta.get(META_WAITING) != Some(line.as_str()) {
            self.log(&line).await;
            self.meta.save(&[(META_WAITING, line)]).await?;
        }
        Ok(Some(StepOutcome::Continue {
            after: self.poll_interval(),
        }))
    }

    /// Every second for the first half minute of a stage, then every 5 seconds.
    fn poll_interval(&self) -> GoDuration {
        let started = self.ctx.stage.started_at.unwrap_or(self.ctx.now);
        let elapsed = self.ctx.now.0.saturating_sub(started.0);
        GoDuration::from_secs(if elapsed < 30_000 { 1 } else { 5 })
    }

    /// Deletes what gannet applied for the app (by its labels) that `keep` does not hold,
    /// among the kinds of `keep` and of the running commit's manifests. Canary and baseline
    /// copies stay unless `variants_too`.
    pub async fn prune(&mut self, keep: &[Desired], variants_too: bool) -> Result<(), StepError> {
        if self.meta.get(META_PRUNED).is_some() {
            return Ok(());
        }
        let mut kinds: Vec<Kind> = Vec::new();
        let mut add = |k: &Kind| {
            if !kinds.iter().any(|x| {
                x.resource.api_version == k.resource.api_version
                    && x.resource.kind == k.resource.kind
            }) {
                kinds.push(k.clone());
            }
        };
        for o in keep {
            add(&o.kind);
        }
        match &self.running {
            Ok(running) => {
                for m in running {
                    add(&self.cluster.kind(&m.api_version, &m.kind).await?);
                }
            }
            Err(why) => {
                self.log(&format!(
                    "Prune looks only at the kinds in this commit: {why}"
                ))
                .await;
            }
        }
        let wanted: BTreeSet<&ObjectRef> = keep.iter().map(|o| &o.at).collect();
        let selector = objects::owned_selector(&self.app_label);
        let key = self.spec.variant_label.key.clone();
        let variant_values = [
            self.spec.variant_label.canary_value.clone(),
            self.spec.variant_label.baseline_value.clone(),
        ];
        let mut pruned = 0;
        for kind in &kinds {
            for live in self.cluster.list(kind, &selector).await? {
                let at = ObjectRef::of(&live);
                if wanted.contains(&at) || live.pointer("/metadata/deletionTimestamp").is_some() {
                    continue;
                }
                let variant = live
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(&key))
                    .and_then(Value::as_str);
                if !variants_too && variant.is_some_and(|v| variant_values.iter().any(|x| x == v)) {
                    continue;
                }
                if self.cluster.delete(kind, &at).await? {
                    pruned += 1;
                    self.log(&format!(
                        "Pruned {at}: gannet applied it before, and it is no longer in Git"
                    ))
                    .await;
                }
            }
        }
        if pruned == 0 {
            self.log("Prune: nothing to remove").await;
        }
        self.meta.save(&[(META_PRUNED, pruned.to_string())]).await
    }

    /// The app's workloads: `spec.workloads`, or every Deployment.
    pub fn workloads<'m>(&self, manifests: &'m [Manifest]) -> Vec<&'m Manifest> {
        manifest::workloads(&self.spec, manifests)
    }

    /// The app's Service: `spec.service`, or the first Service.
    pub fn service<'m>(&self, manifests: &'m [Manifest]) -> Option<&'m Manifest> {
        let want = &self.spec.service;
        manifests
            .iter()
            .find(|m| m.kind == "Service" && (want.name.is_empty() || m.name == want.name))
    }

    /// The object the app's traffic routing rewrites (the Service for `podselector`, the
    /// VirtualService for `istio`), when the app routes traffic.
    pub fn routed<'m>(&self, manifests: &'m [Manifest]) -> Option<&'m Manifest> {
        let routing = self.spec.traffic_routing.as_ref()?;
        match routing.method {
            TrafficRoutingMethod::PodSelector => self.service(manifests),
            TrafficRoutingMethod::Istio => routing::virtual_service(routing, manifests),
            TrafficRoutingMethod::Smi => None,
        }
    }

    /// Applies the routed object of `manifests` with `split`.
    pub async fn route(&mut self, manifests: &[Manifest], split: Split) -> Result<(), StepError> {
        let routing = self.spec.traffic_routing.clone().unwrap_or_default();
        let Some(m) = self.routed(manifests) else {
            return Err(StepError::permanent(match routing.method {
                TrafficRoutingMethod::Istio => "traffic routing by istio: no VirtualService in the manifests (spec.trafficRouting.istio.virtualService names it, or the first one is used)".to_owned(),
                _ => "traffic routing by podselector: no Service in the manifests (spec.service names it, or the first one is used)".to_owned(),
            }));
        };
        let mut desired = self
            .desired(std::slice::from_ref(m), Variant::Primary, false)
            .await?;
        let mut o = desired.remove(0);
        match routing.method {
            TrafficRoutingMethod::Istio => {
                let istio = routing.istio.clone().unwrap_or_default();
                routing::set_weights(&mut o.body, &istio, &self.spec.variant_label, split)
                    .map_err(|e| StepError::permanent(format!("{}:{}: {e}", m.file, m.line)))?;
            }
            _ => {
                let Some(variant) = split.only() else {
                    return Err(StepError::permanent(format!(
                        "traffic routing by podselector switches the Service's selector, so one variant takes all traffic; {split} needs istio"
                    )));
                };
                let key = self.spec.variant_label.key.clone();
                let value = variant.value(&self.spec.variant_label).to_owned();
                // Only the selector changes: the Service keeps what Git gives it (addresses,
                // node ports), or the apply would drop them.
                objects::select_variant(&mut o.body, &key, &value);
            }
        }
        self.cluster
            .apply(&o.kind, &o.at, &o.body, &self.owner())
            .await?;
        self.log(&format!("Routed {}: {split}", o.at)).await;
        Ok(())
    }

    /// Deletes every canary or baseline object gannet made for the app, among the kinds of
    /// its workloads, Services, ConfigMaps and Secrets.
    pub async fn clean(&mut self, variant: Variant) -> Result<usize, StepError> {
        let value = variant.value(&self.spec.variant_label).to_owned();
        let selector = format!(
            "{},{}={value}",
            objects::owned_selector(&self.app_label),
            self.spec.variant_label.key
        );
        let mut kinds: Vec<(String, String)> = self
            .workloads(&self.manifests)
            .iter()
            .map(|m| (m.api_version.clone(), m.kind.clone()))
            .collect();
        for kind in ["Service", "ConfigMap", "Secret"] {
            kinds.push(("v1".into(), kind.into()));
        }
        kinds.sort();
        kinds.dedup();
        let mut deleted = 0;
        for (api_version, kind) in kinds {
            let kind = self.cluster.kind(&api_version, &kind).await?;
            for live in self.cluster.list(&kind, &selector).await? {
                let at = ObjectRef::of(&live);
                if self.cluster.delete(&kind, &at).await? {
                    deleted += 1;
                    self.log(&format!("Deleted {at} ({})", variant.name()))
                        .await;
                }
            }
        }
        Ok(deleted)
    }
}

/// A stage's end, logged.
pub(crate) async fn done(step: &Step<'_>, line: &str) -> Result<StepOutcome, StepError> {
    step.log(line).await;
    Ok(StepOutcome::Done(StageResult::Success))
}
