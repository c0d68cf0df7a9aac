//! What a service serves, for the drift check, in two calls: DescribeServices (the service with
//! its task sets and tags), then DescribeTaskDefinition of the task definition that serves (the
//! PRIMARY task set's, or the service's own when it has no task sets). Fields come back as JSON
//! in AWS's shapes, so they compare with the manifests key by key.

use aws_sdk_ecs::types::{ServiceField, TaskDefinitionField};
use serde_json::{json, Map, Value};

use super::convert::tag_map;
use super::EcsApi;
use crate::errors::{classify, ApiError};

/// A service and what serves it, as AWS reports them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Served {
    /// The service in the service definition's shape (only the fields the check compares).
    pub service: Value,
    /// Its task sets that are not DRAINING.
    pub task_sets: Vec<ServedTaskSet>,
    /// The serving task definition in the task definition's shape; `None` when nothing serves.
    pub task_definition: Option<Value>,
    pub running: i32,
    pub desired: i32,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServedTaskSet {
    pub id: String,
    /// `PRIMARY` or `ACTIVE`.
    pub status: String,
    pub task_definition: String,
    /// Percent of the service's desired count.
    pub scale: f64,
    pub steady: bool,
    /// `networkConfiguration` in the service definition's shape.
    pub network: Value,
}

impl EcsApi {
    /// The service `name` in `cluster` and what serves it; `None` when the service does not
    /// exist (or is INACTIVE).
    pub(crate) async fn served(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<Served>, ApiError> {
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
        let task_sets: Vec<ServedTaskSet> = s
            .task_sets()
            .iter()
            .filter(|t| t.status() != Some("DRAINING"))
            .map(|t| ServedTaskSet {
                id: t.id().unwrap_or_default().to_owned(),
                status: t.status().unwrap_or_default().to_owned(),
                task_definition: t.task_definition().unwrap_or_default().to_owned(),
                scale: t.scale().map_or(0.0, |s| s.value()),
                steady: t.stability_status().map(|s| s.as_str()) == Some("STEADY_STATE"),
                network: network(t.network_configuration()),
            })
            .collect();
        let serving = if task_sets.is_empty() {
            s.task_definition().map(str::to_owned)
        } else {
            task_sets
                .iter()
                .find(|t| t.status == "PRIMARY")
                .map(|t| t.task_definition.clone())
        };
        let task_definition = match serving {
            Some(arn) => Some(self.task_definition_doc(&arn).await?),
            None => None,
        };
        let tags = tag_map(s.tags());
        Ok(Some(Served {
            service: json!({
                "deploymentController": {
                    "type": s.deployment_controller().map_or("ECS", |c| c.r#type().as_str()),
                },
                "desiredCount": s.desired_count(),
                "tags": tags,
            }),
            task_sets,
            task_definition,
            running: s.running_count(),
            desired: s.desired_count(),
        }))
    }

    /// DescribeTaskDefinition of `arn`, in the task definition file's shape.
    async fn task_definition_doc(&self, arn: &str) -> Result<Value, ApiError> {
        let out = self
            .ecs
            .describe_task_definition()
            .task_definition(arn)
            .include(TaskDefinitionField::Tags)
            .send()
            .await
            .map_err(|e| classify("ECS DescribeTaskDefinition", e))?;
        let Some(t) = out.task_definition() else {
            return Ok(Value::Null);
        };
        let containers: Vec<Value> = t
            .container_definitions()
            .iter()
            .map(|c| {
                let env: Vec<Value> = c
                    .environment()
                    .iter()
                    .map(|kv| json!({"name": kv.name(), "value": kv.value()}))
                    .collect();
                let ports: Vec<Value> = c
                    .port_mappings()
                    .iter()
                    .map(|p| {
                        json!({
                            "containerPort": p.container_port(),
                            "hostPort": p.host_port(),
                            "protocol": p.protocol().map(|p| p.as_str()),
                        })
                    })
                    .collect();
                json!({
                    "name": c.name(),
                    "image": c.image(),
                    "cpu": c.cpu(),
                    "memory": c.memory(),
                    "memoryReservation": c.memory_reservation(),
                    "essential": c.essential(),
                    "command": c.command(),
                    "entryPoint": c.entry_point(),
                    "environment": env,
                    "portMappings": ports,
                })
            })
            .collect();
        let compatibilities: Vec<&str> = t
            .requires_compatibilities()
            .iter()
            .map(|c| c.as_str())
            .collect();
        Ok(json!({
            "taskDefinitionArn": t.task_definition_arn(),
            "family": t.family(),
            "cpu": t.cpu(),
            "memory": t.memory(),
            "networkMode": t.network_mode().map(|m| m.as_str()),
            "executionRoleArn": t.execution_role_arn(),
            "taskRoleArn": t.task_role_arn(),
            "requiresCompatibilities": compatibilities,
            "containerDefinitions": containers,
            "tags": tag_map(out.tags()),
        }))
    }
}

/// A task set's network configuration in the service definition's shape.
fn network(n: Option<&aws_sdk_ecs::types::NetworkConfiguration>) -> Value {
    let Some(vpc) = n.and_then(|n| n.awsvpc_configuration()) else {
        return Value::Null;
    };
    let mut out = Map::new();
    out.insert("subnets".into(), json!(vpc.subnets()));
    out.insert("securityGroups".into(), json!(vpc.security_groups()));
    if let Some(ip) = vpc.assign_public_ip() {
        out.insert("assignPublicIp".into(), json!(ip.as_str()));
    }
    json!({ "awsvpcConfiguration": out })
}
