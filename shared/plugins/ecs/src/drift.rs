//! The live-state and drift faces: what the service serves, read in two calls (DescribeServices
//! with its task sets, then DescribeTaskDefinition of the PRIMARY task set's task definition),
//! compared with the service and task definitions at the branch head.
//!
//! Drift is every field the manifests set whose live value differs, named by file
//! (`serviceDefinition.desiredCount`, `taskDefinition.containerDefinitions[0].image`), and the
//! task sets: anything but one PRIMARY task set at 100% (a canary left behind, a primary scaled
//! down) is drift. A missing service is drift, named. Not drift: a desiredCount of 0 or none in
//! Git (autoscaling owns it, PipeCD #5027); the order of subnets, security groups, environment
//! variables and compatibilities; tags gannet or AWS add; fields Git does not set (AWS's
//! defaults, revisions, ARNs). A standalone task has no service to compare: no live state.

use std::collections::BTreeMap;
use std::path::Path;

use gannet_config::AppConfig;
use gannet_domain::drift::{self, DriftField, Health, LiveResource, LiveState, Rules, UNSET};
use gannet_sdk::plugin::StepError;
use serde_json::{json, Map, Value};

use crate::api::{EcsApi, Served};
use crate::manifest::ServiceDefinition;
use crate::source::{self, Desired};

const RULES: Rules<'static> = Rules {
    unordered: &[
        "serviceDefinition.networkConfiguration.awsvpcConfiguration.subnets",
        "serviceDefinition.networkConfiguration.awsvpcConfiguration.securityGroups",
        "taskDefinition.requiresCompatibilities",
    ],
    ignored: &[],
    // A variable by its name, as the other platforms name it.
    keyed: &[
        ("taskDefinition.containerDefinitions.*.environment", "name"),
        ("taskDefinition.containerDefinitions.*.secrets", "name"),
    ],
};

/// The task definition's fields the check compares, and each container's.
const TASK_KEYS: [&str; 9] = [
    "family",
    "cpu",
    "memory",
    "networkMode",
    "executionRoleArn",
    "taskRoleArn",
    "requiresCompatibilities",
    "containerDefinitions",
    "tags",
];
const CONTAINER_KEYS: [&str; 10] = [
    "name",
    "image",
    "cpu",
    "memory",
    "memoryReservation",
    "essential",
    "command",
    "entryPoint",
    "environment",
    "portMappings",
];

/// Reads what the app's service serves and compares it with the manifests in `app_dir`;
/// `None` for a standalone task.
pub(crate) async fn read(
    api: &EcsApi,
    app: &AppConfig,
    app_rel: &str,
    app_dir: &Path,
) -> Result<Option<LiveState>, StepError> {
    let desired = source::load(app_dir, app_rel, app).map_err(StepError::permanent)?;
    let Some(def) = &desired.service else {
        return Ok(None);
    };
    let served = api.served(&def.cluster, &def.name).await?;
    Ok(Some(compare(&desired, def, served.as_ref())))
}

/// The drift and live resources of `served` against the manifests.
pub(crate) fn compare(
    desired: &Desired,
    def: &ServiceDefinition,
    served: Option<&Served>,
) -> LiveState {
    let Some(s) = served else {
        return LiveState {
            resources: Vec::new(),
            drift: vec![DriftField {
                field: "service".into(),
                git: Value::String(def.name.clone()).to_string(),
                live: UNSET.into(),
            }],
        };
    };
    let mut found: Vec<DriftField> = task_set_drift(s).into_iter().collect();
    let primary = s.task_sets.iter().find(|t| t.status == "PRIMARY");
    let mut live_service = s.service.clone();
    if let (Some(p), Value::Object(fields)) = (primary, &mut live_service) {
        fields.insert("networkConfiguration".into(), p.network.clone());
    }
    let mut service = desired_service(def);
    if let (None, Value::Object(fields)) = (primary, &mut service) {
        // The network configuration lives on the task sets; with none serving there is none.
        fields.remove("networkConfiguration");
    }
    let mut want = json!({ "serviceDefinition": service });
    let mut have = json!({ "serviceDefinition": live_service });
    // Nothing serves (no PRIMARY task set): the task sets' drift says so already.
    if let Some(live_task) = &s.task_definition {
        want["taskDefinition"] = desired_task(desired);
        have["taskDefinition"] = comparable_task(live_task);
    }
    found.extend(drift::diff(&want, &have, &RULES));
    LiveState {
        resources: resources(def, s),
        drift: found,
    }
}

/// Anything but one PRIMARY task set at 100% with no other taking traffic.
fn task_set_drift(s: &Served) -> Option<DriftField> {
    let primaries = s.task_sets.iter().filter(|t| t.status == "PRIMARY").count();
    let full = s
        .task_sets
        .iter()
        .any(|t| t.status == "PRIMARY" && (t.scale - 100.0).abs() < 1e-6);
    let others = s
        .task_sets
        .iter()
        .any(|t| t.status != "PRIMARY" && t.scale > 0.0);
    let external = s.service["deploymentController"]["type"] == "EXTERNAL";
    if !external || (primaries == 1 && full && !others) {
        return None;
    }
    let live = if s.task_sets.is_empty() {
        "none".to_owned()
    } else {
        s.task_sets
            .iter()
            .map(|t| format!("{} {} {}%", t.status, short(&t.task_definition), t.scale))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(DriftField {
        field: "taskSets".into(),
        git: Value::String("one PRIMARY task set at 100%".into()).to_string(),
        live: Value::String(live).to_string(),
    })
}

/// What the service definition sets that the check compares. gannet deploys through task sets,
/// so the controller must be EXTERNAL whatever the file says.
fn desired_service(def: &ServiceDefinition) -> Value {
    let mut out = Map::new();
    out.insert(
        "deploymentController".into(),
        json!({ "type": crate::manifest::CONTROLLER_EXTERNAL }),
    );
    if let Some(n) = def.managed_desired_count() {
        out.insert("desiredCount".into(), json!(n));
    }
    let tags: BTreeMap<&str, &str> = def
        .tags
        .iter()
        .map(|t| (t.key.as_str(), t.value.as_str()))
        .collect();
    out.insert("tags".into(), json!(tags));
    if let Some(vpc) = def.awsvpc() {
        let mut cfg = json!({ "subnets": vpc.subnets, "securityGroups": vpc.security_groups });
        if let Some(ip) = &vpc.assign_public_ip {
            cfg["assignPublicIp"] = json!(ip);
        }
        out.insert(
            "networkConfiguration".into(),
            json!({ "awsvpcConfiguration": cfg }),
        );
    }
    Value::Object(out)
}

/// The task definition file's fields the check compares (the file may hold more).
fn desired_task(desired: &Desired) -> Value {
    let mut doc = comparable_task(&desired.task.register_body(&BTreeMap::new()));
    doc["tags"] = json!(desired.task.tags);
    doc
}

/// [`TASK_KEYS`] and [`CONTAINER_KEYS`] of a task definition document; task CPU and memory as
/// text, as AWS reports them (a file may write them as numbers).
fn comparable_task(doc: &Value) -> Value {
    let mut out = keep(doc, &TASK_KEYS);
    for key in ["cpu", "memory"] {
        if let Some(n @ Value::Number(_)) = out.get(key) {
            out[key] = Value::String(n.to_string());
        }
    }
    if let Some(Value::Array(containers)) = out.get_mut("containerDefinitions") {
        for c in containers.iter_mut() {
            *c = keep(c, &CONTAINER_KEYS);
        }
    }
    out
}

fn keep(doc: &Value, keys: &[&str]) -> Value {
    let Value::Object(fields) = doc else {
        return doc.clone();
    };
    Value::Object(
        fields
            .iter()
            .filter(|(k, _)| keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

fn resources(def: &ServiceDefinition, s: &Served) -> Vec<LiveResource> {
    let health = |ok: bool| if ok { Health::Healthy } else { Health::Unknown };
    let controller = s.service["deploymentController"]["type"]
        .as_str()
        .unwrap_or("ECS");
    let mut out = vec![LiveResource {
        kind: "EcsService".into(),
        id: def.name.clone(),
        health: health(s.running >= s.desired),
        summary: format!(
            "{} of {} tasks running, {controller} controller",
            s.running, s.desired
        ),
    }];
    out.extend(s.task_sets.iter().map(|t| LiveResource {
        kind: "EcsTaskSet".into(),
        id: t.id.clone(),
        health: health(t.steady),
        summary: format!("{} {} at {}%", t.status, short(&t.task_definition), t.scale),
    }));
    out
}

/// `arn:...:task-definition/web:3` → `web:3`.
fn short(task_definition: &str) -> &str {
    task_definition
        .rsplit('/')
        .next()
        .unwrap_or(task_definition)
}

#[cfg(test)]
mod tests;
