//! What every ECS step shares: the app's manifests at a commit, the target's clients, the
//! stage's metadata, and the idempotent building blocks the stages are made of (register the
//! task definition once, apply the service, create a task set once, route the pair, delete task
//! sets). Each block checks metadata or AWS first, and records what it made before the step
//! depends on it.

use std::collections::BTreeMap;

use crate::spec::TargetGroup;
use gannet_domain::CommitSha;
use gannet_sdk::plugin::{StepContext, StepError};

use crate::api::{EcsApi, NewService, NewTaskSet};
use crate::live::{LiveService, LiveTaskSet, TaskSetStatus};
use crate::manifest::{ServiceDefinition, CONTROLLER_EXTERNAL};
use crate::meta::{self, Meta};
use crate::routing::{rewrite, weights_in, Pair, Rewrite, Weights};
use crate::source::{self, Desired, TAG_REGISTERED_BY, TAG_VARIANT};

/// How long to wait before looking at a task set that is stabilising again.
pub(crate) const POLL: gannet_domain::GoDuration = gannet_domain::GoDuration::from_secs(10);

/// A task set's role, as its `gannet.dev/variant` tag says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Primary,
    Canary,
}

impl Variant {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Canary => "canary",
        }
    }
}

/// One step of an ECS stage.
pub(crate) struct Step<'a> {
    pub ctx: &'a StepContext<'a>,
    pub api: &'a EcsApi,
    pub meta: Meta<'a>,
    /// What the commit being deployed (or, in rollback, the running commit) has.
    pub desired: Desired,
    /// That commit, for the tags.
    pub commit: CommitSha,
}

impl<'a> Step<'a> {
    pub(crate) async fn log(&self, line: &str) {
        self.ctx.io.log(line).await;
    }

    /// gannet's tags for resources made from this commit.
    pub(crate) fn managed_tags(&self) -> BTreeMap<String, String> {
        source::managed_tags(&self.ctx.deployment.app, &self.commit)
    }

    /// The service definition; a standalone task has none.
    pub(crate) fn service_def(&self) -> Result<&ServiceDefinition, StepError> {
        self.desired.service.as_ref().ok_or_else(|| {
            StepError::permanent(format!(
                "stage {} needs a service, but the app has no serviceDefinitionFile (it runs a standalone task)",
                self.ctx.stage.name
            ))
        })
    }

    /// Registers the task definition once for `key`, or finds the revision an earlier attempt
    /// registered (it carries the key as a tag); returns its ARN.
    pub(crate) async fn task_definition(&mut self, key: &str) -> Result<String, StepError> {
        if let Some(arn) = self.meta.get(meta::TASK_DEFINITION) {
            return Ok(arn.to_owned());
        }
        let family = self.desired.task.family.clone();
        // Another stage of this deployment may have registered the same commit's definition.
        let earlier = self.ctx.deployment.stages.iter().find_map(|s| {
            (s.metadata.get(meta::REGISTERING).map(String::as_str) == Some(key))
                .then(|| s.metadata.get(meta::TASK_DEFINITION).cloned())
                .flatten()
        });
        if let Some(arn) = earlier {
            self.meta
                .save(&[
                    (meta::REGISTERING, key.to_owned()),
                    (meta::TASK_DEFINITION, arn.clone()),
                ])
                .await?;
            self.log(&format!(
                "Using task definition {arn}, registered earlier in this deployment"
            ))
            .await;
            return Ok(arn);
        }
        if self.meta.get(meta::REGISTERING) == Some(key) {
            if let Some(arn) = self
                .api
                .task_definition_tagged(&family, TAG_REGISTERED_BY, key)
                .await?
            {
                self.log(&format!(
                    "Found task definition {arn}, registered by an earlier attempt"
                ))
                .await;
                self.meta
                    .save(&[(meta::TASK_DEFINITION, arn.clone())])
                    .await?;
                return Ok(arn);
            }
        }
        self.meta
            .save(&[(meta::REGISTERING, key.to_owned())])
            .await?;
        let mut tags = self.desired.task.tags.clone();
        tags.extend(self.managed_tags());
        tags.insert(TAG_REGISTERED_BY.to_owned(), key.to_owned());
        let arn = self
            .api
            .register_task_definition(&self.desired.task, &tags)
            .await?;
        self.meta
            .save(&[(meta::TASK_DEFINITION, arn.clone())])
            .await?;
        self.log(&format!(
            "Registered task definition {arn} from {}",
            self.desired.task_file
        ))
        .await;
        Ok(arn)
    }

    /// Creates the service, or applies the definition to the live one, once per stage; returns
    /// the live service, or why the stage must fail (a service on another deployment
    /// controller).
    pub(crate) async fn service(&mut self) -> Result<Result<LiveService, String>, StepError> {
        let def = self.service_def()?.clone();
        let live = self.api.service(&def.cluster, &def.name).await?;
        if let Some(live) = &live {
            if live.controller != CONTROLLER_EXTERNAL {
                return Ok(Err(format!(
                    "ECS service {} in cluster {} uses the {} deployment controller; gannet (like PipeCD) deploys through task sets, which need the EXTERNAL deployment controller. Recreate the service with `deploymentController: {{type: EXTERNAL}}` (or delete it and let gannet create it from {}), or move its deployment controller to EXTERNAL",
                    live.name, def.cluster, live.controller, self.desired.input.service_definition_file
                )));
            }
        }
        if self.meta.get(meta::SERVICE).is_some() {
            return match live {
                Some(live) => Ok(Ok(live)),
                None => Ok(Err(format!(
                    "ECS service {} in cluster {} no longer exists",
                    def.name, def.cluster
                ))),
            };
        }
        for ignored in def.ignored_fields() {
            self.log(&format!(
                "Note: {} in the service definition is not applied: {ignored}",
                self.desired.input.service_definition_file
            ))
            .await;
        }
        let mut tags: BTreeMap<String, String> = def
            .tags
            .iter()
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        tags.extend(self.managed_tags());
        match live {
            Some(live) => {
                self.api.update_service(&live, &def).await?;
                self.sync_tags(&live, &tags).await?;
                let kept = match def.managed_desired_count() {
                    Some(n) => format!("desired count {n}"),
                    None => format!(
                        "desired count left at {} (0 or unset in Git)",
                        live.desired_count
                    ),
                };
                self.log(&format!("Updated ECS service {} ({kept})", live.name))
                    .await;
            }
            None => {
                self.api
                    .create_service(&NewService {
                        def: &def,
                        tags: &tags,
                    })
                    .await?;
                self.log(&format!(
                    "Created ECS service {} in cluster {} (EXTERNAL deployment controller)",
                    def.name, def.cluster
                ))
                .await;
            }
        }
        let Some(live) = self.api.service(&def.cluster, &def.name).await? else {
            return Ok(Err(format!(
                "ECS service {} in cluster {} was not found after it was applied",
                def.name, def.cluster
            )));
        };
        self.meta.save(&[(meta::SERVICE, live.arn.clone())]).await?;
        Ok(Ok(live))
    }

    /// Makes the service's tags `want`, removing the user's tags Git no longer has.
    async fn sync_tags(
        &self,
        live: &LiveService,
        want: &BTreeMap<String, String>,
    ) -> Result<(), StepError> {
        let stale: Vec<String> = live
            .tags
            .keys()
            .filter(|k| {
                !want.contains_key(*k) && !k.starts_with("aws:") && !k.starts_with("gannet.dev/")
            })
            .cloned()
            .collect();
        if !stale.is_empty() {
            self.api.untag(&live.arn, &stale).await?;
        }
        if want.iter().any(|(k, v)| live.tags.get(k) != Some(v)) {
            self.api.tag(&live.arn, want).await?;
        }
        Ok(())
    }

    /// The service's task sets that are not draining.
    pub(crate) async fn task_sets(
        &self,
        service: &LiveService,
    ) -> Result<Vec<LiveTaskSet>, StepError> {
        let sets = self.api.task_sets(service).await?;
        Ok(sets
            .into_iter()
            .filter(|t| t.status != TaskSetStatus::Draining)
            .collect())
    }

    /// This stage's task set: found by its external id, or created (once) with `scale` percent
    /// on `target_group`.
    pub(crate) async fn task_set(
        &mut self,
        service: &LiveService,
        variant: Variant,
        scale: f64,
        target_group: Option<&TargetGroup>,
        task_definition: &str,
    ) -> Result<LiveTaskSet, StepError> {
        let key = meta::stage_key(self.ctx.deployment, self.ctx.stage);
        let sets = self.task_sets(service).await?;
        if let Some(found) = sets.into_iter().find(|t| t.external_id == key) {
            if self.meta.get(meta::TASK_SET) != Some(found.arn.as_str()) {
                self.meta
                    .save(&[(meta::TASK_SET, found.arn.clone())])
                    .await?;
            }
            return Ok(found);
        }
        if let Some(arn) = self.meta.get(meta::TASK_SET) {
            return Err(StepError::permanent(format!(
                "task set {arn}, which this stage created, no longer exists (was it deleted outside gannet?)"
            )));
        }
        let mut tags: BTreeMap<String, String> = self
            .service_def()?
            .tags
            .iter()
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        tags.extend(self.managed_tags());
        tags.insert(TAG_VARIANT.to_owned(), variant.as_str().to_owned());
        let def = self.service_def()?.clone();
        let created = self
            .api
            .create_task_set(&NewTaskSet {
                cluster: &service.cluster_arn,
                service: &service.arn,
                def: &def,
                task_definition,
                load_balancer: target_group,
                scale,
                external_id: &key,
                tags: &tags,
            })
            .await?;
        self.meta
            .save(&[(meta::TASK_SET, created.arn.clone())])
            .await?;
        let on = target_group.map_or_else(String::new, |g| {
            format!(" on target group {}", g.target_group_arn)
        });
        self.log(&format!(
            "Created {} task set {} at {scale}%{on} with {task_definition}",
            variant.as_str(),
            created.id
        ))
        .await;
        Ok(created)
    }

    /// Makes `set` the service's PRIMARY task set, unless it is already.
    pub(crate) async fn make_primary(
        &self,
        service: &LiveService,
        set: &LiveTaskSet,
    ) -> Result<(), StepError> {
        if set.status != TaskSetStatus::Primary {
            self.api.make_primary(service, &set.arn).await?;
            self.log(&format!(
                "Task set {} is now the PRIMARY task set of {}",
                set.id, service.name
            ))
            .await;
        }
        Ok(())
    }

    /// Deletes the task sets among `sets` that gannet or PipeCD made and `keep` does not hold;
    /// logs the others it leaves alone.
    pub(crate) async fn delete_managed(
        &self,
        service: &LiveService,
        sets: &[LiveTaskSet],
        keep: &(dyn Fn(&LiveTaskSet) -> bool + Sync),
        why: &str,
    ) -> Result<(), StepError> {
        for set in sets.iter().filter(|s| !keep(s)) {
            if source::is_managed(&set.tags) {
                self.api.delete_task_set(service, &set.arn).await?;
                self.log(&format!("Deleted task set {} ({why})", set.id))
                    .await;
            } else {
                self.log(&format!(
                    "Left task set {} alone: neither gannet nor PipeCD made it",
                    set.id
                ))
                .await;
            }
        }
        Ok(())
    }

    /// The listeners of every load balancer that forwards to `target_group`.
    pub(crate) async fn listeners_of(&self, target_group: &str) -> Result<Vec<String>, StepError> {
        let mut out = Vec::new();
        for lb in self.api.load_balancers_of(target_group).await? {
            out.extend(self.api.listeners(&lb).await?);
        }
        Ok(out)
    }

    /// The pair's weights in every rule of `listeners` that forwards to it (`rule` → weights).
    pub(crate) async fn pair_weights(
        &self,
        listeners: &[String],
        pair: Pair<'_>,
    ) -> Result<BTreeMap<String, Weights>, StepError> {
        let mut out = BTreeMap::new();
        for listener in listeners {
            for rule in self.api.rules(listener).await? {
                if let Some(w) = weights_in(&rule.actions, pair) {
                    out.insert(rule.describe(), w);
                }
            }
        }
        Ok(out)
    }

    /// Routes `weights` between the pair in every rule of `listeners` that forwards to it;
    /// returns how many rules forward to the pair.
    pub(crate) async fn route(
        &self,
        listeners: &[String],
        pair: Pair<'_>,
        weights: Weights,
    ) -> Result<usize, StepError> {
        let mut related = 0;
        for listener in listeners {
            for rule in self.api.rules(listener).await? {
                match rewrite(&rule.actions, pair, weights) {
                    Rewrite::Unrelated => {}
                    Rewrite::Already => related += 1,
                    Rewrite::Changed(actions) => {
                        related += 1;
                        self.api.set_actions(&rule, actions).await?;
                        self.log(&format!("Routed {weights} in the {}", rule.describe()))
                            .await;
                    }
                }
            }
        }
        Ok(related)
    }
}
