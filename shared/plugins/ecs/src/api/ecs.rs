//! The ECS calls: services, tags, task definitions, task sets and standalone tasks.

use std::collections::BTreeMap;

use crate::spec::TargetGroup;
use aws_sdk_ecs::types::{
    CapacityProviderStrategyItem, DeploymentController, DeploymentControllerType, LaunchType,
    LoadBalancer, PropagateTags, Scale, ScaleUnit, SchedulingStrategy, ServiceField,
    ServiceRegistry, SortOrder, TaskDefinitionField, TaskDefinitionStatus, TaskSetField,
};

use super::convert::{
    client_token, deployment_configuration, live_task_set, network_configuration,
    placement_constraints, placement_strategy, tag_map, tags,
};
use super::EcsApi;
use crate::errors::{build_error, classify, ApiError};
use crate::live::{LiveService, LiveTaskSet};
use crate::manifest::{AwsVpc, ServiceDefinition, TaskDefinition};

/// At most this many revisions of a family are read when looking for one by its tags.
const MAX_REVISIONS: i32 = 10;

/// A service to create.
pub(crate) struct NewService<'a> {
    pub def: &'a ServiceDefinition,
    pub tags: &'a BTreeMap<String, String>,
}

/// A task set to create.
pub(crate) struct NewTaskSet<'a> {
    pub cluster: &'a str,
    pub service: &'a str,
    pub def: &'a ServiceDefinition,
    pub task_definition: &'a str,
    /// The target group and container the task set registers in, if any.
    pub load_balancer: Option<&'a TargetGroup>,
    pub scale: f64,
    /// `<deployment>/<stage>`: finds the task set again after a crash.
    pub external_id: &'a str,
    pub tags: &'a BTreeMap<String, String>,
}

/// A standalone task to run.
pub(crate) struct StandaloneTask<'a> {
    pub cluster: &'a str,
    pub task_definition: &'a str,
    pub launch_type: &'a str,
    pub awsvpc: Option<&'a AwsVpc>,
    /// Finds the task again after a crash (ECS's `startedBy`, at most 128 characters).
    pub started_by: &'a str,
    pub tags: &'a BTreeMap<String, String>,
}

impl EcsApi {
    /// The service `name` in `cluster`; `None` when it does not exist or is INACTIVE (a name
    /// that may be created again).
    pub(crate) async fn service(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<LiveService>, ApiError> {
        let out = match self
            .ecs
            .describe_services()
            .cluster(cluster)
            .services(name)
            .include(ServiceField::Tags)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                return match classify("ECS DescribeServices", e) {
                    ApiError::NotFound { .. } => Ok(None),
                    other => Err(other),
                }
            }
        };
        let Some(s) = out
            .services()
            .iter()
            .find(|s| s.status() != Some("INACTIVE"))
        else {
            return Ok(None);
        };
        let text = |v: Option<&str>| v.unwrap_or_default().to_owned();
        Ok(Some(LiveService {
            arn: text(s.service_arn()),
            name: text(s.service_name()),
            cluster_arn: text(s.cluster_arn()),
            status: text(s.status()),
            controller: s
                .deployment_controller()
                .map_or("ECS", |c| c.r#type().as_str())
                .to_owned(),
            desired_count: s.desired_count(),
            running_count: s.running_count(),
            pending_count: s.pending_count(),
            task_set_arns: s
                .task_sets()
                .iter()
                .filter_map(|t| t.task_set_arn())
                .map(str::to_owned)
                .collect(),
            tags: tag_map(s.tags()),
            latest_event: s
                .events()
                .first()
                .and_then(|e| e.message())
                .map(str::to_owned),
        }))
    }

    /// Creates the service with the EXTERNAL deployment controller.
    pub(crate) async fn create_service(&self, new: &NewService<'_>) -> Result<(), ApiError> {
        let def = new.def;
        let controller = DeploymentController::builder()
            .r#type(DeploymentControllerType::External)
            .build()
            .map_err(|e| build_error("ECS CreateService", e))?;
        let mut req = self
            .ecs
            .create_service()
            .cluster(&def.cluster)
            .service_name(&def.name)
            .deployment_controller(controller)
            .set_deployment_configuration(deployment_configuration(def))
            .set_scheduling_strategy(
                def.scheduling_strategy
                    .as_deref()
                    .map(SchedulingStrategy::from),
            )
            .set_enable_ecs_managed_tags(def.enable_ecs_managed_tags)
            .set_enable_execute_command(def.enable_execute_command)
            .set_propagate_tags(def.propagate_tags.as_deref().map(PropagateTags::from))
            .set_placement_constraints(placement_constraints(def))
            .set_placement_strategy(placement_strategy(def))
            .set_health_check_grace_period_seconds(def.health_check_grace_period_seconds)
            .set_role(def.role.clone())
            .set_tags(Some(tags(new.tags)));
        if def.scheduling_strategy.as_deref() != Some("DAEMON") {
            req = req.desired_count(def.managed_desired_count().unwrap_or(0));
        }
        req.send()
            .await
            .map_err(|e| classify("ECS CreateService", e))?;
        Ok(())
    }

    /// Updates what an EXTERNAL service lets UpdateService change. The desired count is sent
    /// only when Git has one above 0 (PipeCD #5027).
    pub(crate) async fn update_service(
        &self,
        live: &LiveService,
        def: &ServiceDefinition,
    ) -> Result<(), ApiError> {
        self.ecs
            .update_service()
            .cluster(&live.cluster_arn)
            .service(&live.arn)
            .set_desired_count(def.managed_desired_count())
            .set_deployment_configuration(deployment_configuration(def))
            .set_placement_constraints(placement_constraints(def))
            .set_placement_strategy(placement_strategy(def))
            .set_health_check_grace_period_seconds(def.health_check_grace_period_seconds)
            .set_enable_ecs_managed_tags(def.enable_ecs_managed_tags)
            .set_enable_execute_command(def.enable_execute_command)
            .set_propagate_tags(def.propagate_tags.as_deref().map(PropagateTags::from))
            .send()
            .await
            .map_err(|e| classify("ECS UpdateService", e))?;
        Ok(())
    }

    pub(crate) async fn tag(
        &self,
        arn: &str,
        tags_to_set: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.ecs
            .tag_resource()
            .resource_arn(arn)
            .set_tags(Some(tags(tags_to_set)))
            .send()
            .await
            .map_err(|e| classify("ECS TagResource", e))?;
        Ok(())
    }

    pub(crate) async fn untag(&self, arn: &str, keys: &[String]) -> Result<(), ApiError> {
        self.ecs
            .untag_resource()
            .resource_arn(arn)
            .set_tag_keys(Some(keys.to_vec()))
            .send()
            .await
            .map_err(|e| classify("ECS UntagResource", e))?;
        Ok(())
    }

    /// Registers `def` with `tags` as a new revision; returns its ARN.
    ///
    /// The request body is the manifest itself, normalised (see `manifest::schema`), so every
    /// field AWS takes reaches it, as PipeCD sends every field of its manifest; mapping the
    /// ~150 nested fields of a task definition onto the SDK's builders by hand would drop the
    /// ones it forgot. The SDK still builds, signs and sends the request: only the body is
    /// replaced, before signing.
    pub(crate) async fn register_task_definition(
        &self,
        def: &TaskDefinition,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ApiError> {
        let body = def.register_body(tags).to_string();
        let out = self
            .ecs
            .register_task_definition()
            .family(&def.family)
            .customize()
            .mutate_request(move |req| {
                let length = body.len().to_string();
                *req.body_mut() = body.clone().into();
                req.headers_mut().insert("content-length", length);
            })
            .send()
            .await
            .map_err(|e| classify("ECS RegisterTaskDefinition", e))?;
        out.task_definition()
            .and_then(|t| t.task_definition_arn())
            .map(str::to_owned)
            .ok_or_else(|| {
                ApiError::incomplete("ECS RegisterTaskDefinition", "task definition ARN")
            })
    }

    /// The newest ACTIVE revision of `family` whose tag `key` is `value`, among the last few.
    pub(crate) async fn task_definition_tagged(
        &self,
        family: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<String>, ApiError> {
        let out = self
            .ecs
            .list_task_definitions()
            .family_prefix(family)
            .status(TaskDefinitionStatus::Active)
            .sort(SortOrder::Desc)
            .max_results(MAX_REVISIONS)
            .send()
            .await
            .map_err(|e| classify("ECS ListTaskDefinitions", e))?;
        let own = format!(":task-definition/{family}:");
        for arn in out
            .task_definition_arns()
            .iter()
            .filter(|a| a.contains(&own))
        {
            let described = self
                .ecs
                .describe_task_definition()
                .task_definition(arn)
                .include(TaskDefinitionField::Tags)
                .send()
                .await
                .map_err(|e| classify("ECS DescribeTaskDefinition", e))?;
            if tag_map(described.tags()).get(key).map(String::as_str) == Some(value) {
                return Ok(Some(arn.clone()));
            }
        }
        Ok(None)
    }

    /// The service's task sets (DRAINING ones included), with their tags.
    pub(crate) async fn task_sets(
        &self,
        service: &LiveService,
    ) -> Result<Vec<LiveTaskSet>, ApiError> {
        if service.task_set_arns.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .ecs
            .describe_task_sets()
            .cluster(&service.cluster_arn)
            .service(&service.arn)
            .set_task_sets(Some(service.task_set_arns.clone()))
            .include(TaskSetField::Tags)
            .send()
            .await
            .map_err(|e| classify("ECS DescribeTaskSets", e))?;
        Ok(out.task_sets().iter().map(live_task_set).collect())
    }

    /// Creates a task set; returns it.
    pub(crate) async fn create_task_set(
        &self,
        new: &NewTaskSet<'_>,
    ) -> Result<LiveTaskSet, ApiError> {
        let def = new.def;
        let network = match def.awsvpc() {
            Some(vpc) => {
                Some(network_configuration(vpc).map_err(|e| build_error("ECS CreateTaskSet", e))?)
            }
            None => None,
        };
        let registries = def
            .service_registries
            .iter()
            .map(|r| {
                ServiceRegistry::builder()
                    .registry_arn(&r.registry_arn)
                    .set_port(r.port)
                    .set_container_name(r.container_name.clone())
                    .set_container_port(r.container_port)
                    .build()
            })
            .collect::<Vec<_>>();
        let capacity = def
            .capacity_provider_strategy
            .iter()
            .map(|c| {
                CapacityProviderStrategyItem::builder()
                    .capacity_provider(&c.capacity_provider)
                    .set_weight(c.weight)
                    .set_base(c.base)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| build_error("ECS CreateTaskSet", e))?;
        let load_balancers = new.load_balancer.map(|tg| {
            vec![LoadBalancer::builder()
                .target_group_arn(&tg.target_group_arn)
                .container_name(&tg.container_name)
                .container_port(i32::from(tg.container_port))
                .set_load_balancer_name(
                    Some(tg.load_balancer_name.clone()).filter(|n| !n.is_empty()),
                )
                .build()]
        });
        let out = self
            .ecs
            .create_task_set()
            .cluster(new.cluster)
            .service(new.service)
            .task_definition(new.task_definition)
            .external_id(new.external_id)
            .client_token(client_token(new.external_id))
            .set_network_configuration(network)
            .set_load_balancers(load_balancers)
            .set_service_registries(Some(registries).filter(|r| !r.is_empty()))
            .set_launch_type(def.launch_type.as_deref().map(LaunchType::from))
            .set_capacity_provider_strategy(Some(capacity).filter(|c| !c.is_empty()))
            .set_platform_version(def.platform_version.clone())
            .scale(
                Scale::builder()
                    .unit(ScaleUnit::Percent)
                    .value(new.scale)
                    .build(),
            )
            .set_tags(Some(tags(new.tags)))
            .send()
            .await
            .map_err(|e| classify("ECS CreateTaskSet", e))?;
        out.task_set()
            .map(live_task_set)
            .ok_or_else(|| ApiError::incomplete("ECS CreateTaskSet", "task set"))
    }

    /// Deletes a task set; one that is already gone is fine.
    pub(crate) async fn delete_task_set(
        &self,
        service: &LiveService,
        arn: &str,
    ) -> Result<(), ApiError> {
        match self
            .ecs
            .delete_task_set()
            .cluster(&service.cluster_arn)
            .service(&service.arn)
            .task_set(arn)
            .force(true)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match classify("ECS DeleteTaskSet", e) {
                ApiError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
        }
    }

    /// Sets a task set's scale (percent of the service's desired count).
    pub(crate) async fn scale_task_set(
        &self,
        service: &LiveService,
        arn: &str,
        percent: f64,
    ) -> Result<(), ApiError> {
        self.ecs
            .update_task_set()
            .cluster(&service.cluster_arn)
            .service(&service.arn)
            .task_set(arn)
            .scale(
                Scale::builder()
                    .unit(ScaleUnit::Percent)
                    .value(percent)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify("ECS UpdateTaskSet", e))?;
        Ok(())
    }

    pub(crate) async fn make_primary(
        &self,
        service: &LiveService,
        arn: &str,
    ) -> Result<(), ApiError> {
        self.ecs
            .update_service_primary_task_set()
            .cluster(&service.cluster_arn)
            .service(&service.arn)
            .primary_task_set(arn)
            .send()
            .await
            .map_err(|e| classify("ECS UpdateServicePrimaryTaskSet", e))?;
        Ok(())
    }

    /// Runs one standalone task; returns its ARN.
    pub(crate) async fn run_task(&self, task: &StandaloneTask<'_>) -> Result<String, ApiError> {
        let network = match task.awsvpc.filter(|v| !v.subnets.is_empty()) {
            Some(vpc) => {
                Some(network_configuration(vpc).map_err(|e| build_error("ECS RunTask", e))?)
            }
            None => None,
        };
        let out = self
            .ecs
            .run_task()
            .cluster(task.cluster)
            .task_definition(task.task_definition)
            .launch_type(LaunchType::from(task.launch_type))
            .set_network_configuration(network)
            .started_by(task.started_by)
            .count(1)
            .set_tags(Some(tags(task.tags)))
            .send()
            .await
            .map_err(|e| classify("ECS RunTask", e))?;
        if let Some(failure) = out.failures().first() {
            return Err(ApiError::Rejected {
                operation: "ECS RunTask",
                code: failure.reason().unwrap_or("Failure").to_owned(),
                message: failure.detail().unwrap_or_default().to_owned(),
                source: None,
            });
        }
        out.tasks()
            .first()
            .and_then(|t| t.task_arn())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::incomplete("ECS RunTask", "task"))
    }

    /// The tasks in `cluster` started by `started_by`.
    pub(crate) async fn tasks_started_by(
        &self,
        cluster: &str,
        started_by: &str,
    ) -> Result<Vec<String>, ApiError> {
        let out = self
            .ecs
            .list_tasks()
            .cluster(cluster)
            .started_by(started_by)
            .send()
            .await
            .map_err(|e| classify("ECS ListTasks", e))?;
        Ok(out.task_arns().to_vec())
    }
}
