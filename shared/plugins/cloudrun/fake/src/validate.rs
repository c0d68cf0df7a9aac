//! What the real API checks in a written Service, and the defaults it fills in its template.

use serde_json::{json, Map, Value};

use crate::error::{self, Failure};

// Field lists, each a space-separated list of names.

/// The Service fields a client sets; a write replaces all of them.
pub(crate) const USER_FIELDS: &str = "description labels annotations client clientVersion \
    ingress launchStage binaryAuthorization template traffic scaling invokerIamDisabled \
    defaultUriDisabled customAudiences buildConfig";

/// The Service fields the platform sets: accepted in a written body, and ignored.
const OUTPUT_FIELDS: &str = "name uid generation createTime updateTime deleteTime expireTime \
    creator lastModifier observedGeneration terminalCondition conditions latestReadyRevision \
    latestCreatedRevision trafficStatuses uri urls satisfiesPzs reconciling etag";

const TEMPLATE_FIELDS: &str = "revision labels annotations scaling vpcAccess timeout \
    serviceAccount containers volumes executionEnvironment encryptionKey \
    maxInstanceRequestConcurrency serviceMesh sessionAffinity healthCheckDisabled nodeSelector \
    gpuZonalRedundancyDisabled encryptionKeyRevocationAction encryptionKeyShutdownDuration";

const CONTAINER_FIELDS: &str = "name image command args env resources ports volumeMounts \
    workingDir livenessProbe startupProbe dependsOn baseImageUri buildInfo";

const TRAFFIC_FIELDS: &str = "type revision percent tag";

/// Label and annotation prefixes of the platform, which the v2 API refuses.
const SYSTEM_PREFIXES: &str = "run.googleapis.com/ serving.knative.dev/ \
    autoscaling.knative.dev/ cloud.googleapis.com/";

pub(crate) const LATEST: &str = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST";
pub(crate) const BY_REVISION: &str = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION";

/// Checks a written Service's shape: known fields only, no system labels or annotations, a
/// template with containers that have an image and at most one port.
pub(crate) fn service(body: &Value, request: &str) -> Result<(), Failure> {
    known_fields(body, &[USER_FIELDS, OUTPUT_FIELDS], "service")?;
    user_keys(body, request, "service")?;
    let template = &body["template"];
    if !template.is_object() {
        return Err(error::invalid(
            request,
            "service.template",
            "Field is required.",
        ));
    }
    known_fields(template, &[TEMPLATE_FIELDS], "service.template")?;
    user_keys(template, request, "service.template")?;
    let containers = template["containers"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        let field = "service.template.containers";
        return Err(error::invalid(
            request,
            field,
            "At least one container is required.",
        ));
    }
    for (i, container) in containers.iter().enumerate() {
        let at = format!("service.template.containers[{i}]");
        known_fields(container, &[CONTAINER_FIELDS], &at)?;
        if container["image"].as_str().is_none_or(str::is_empty) {
            let field = format!("{at}.image");
            return Err(error::invalid(request, &field, "Field is required."));
        }
        if container["ports"]
            .as_array()
            .is_some_and(|ports| ports.len() > 1)
        {
            let field = format!("{at}.ports");
            return Err(error::invalid(
                request,
                &field,
                "Only one port may be specified.",
            ));
        }
    }
    Ok(())
}

fn known_fields(object: &Value, lists: &[&str], at: &str) -> Result<(), Failure> {
    let Some(object) = object.as_object() else {
        return Err(error::bad_request(
            at,
            &format!("Invalid value at '{at}': not an object."),
        ));
    };
    let known = |key: &String| {
        lists
            .iter()
            .any(|list| list.split_whitespace().any(|k| k == key))
    };
    match object.keys().find(|key| !known(key)) {
        Some(unknown) => Err(error::unknown_field(unknown, at)),
        None => Ok(()),
    }
}

/// Refuses labels and annotations with a system prefix.
fn user_keys(object: &Value, request: &str, at: &str) -> Result<(), Failure> {
    let system = |key: &&String| {
        SYSTEM_PREFIXES
            .split_whitespace()
            .any(|p| key.starts_with(p))
    };
    for (field, what) in [("labels", "Label"), ("annotations", "Annotation")] {
        let mut keys = object[field].as_object().into_iter().flat_map(Map::keys);
        if let Some(key) = keys.find(system) {
            let description =
                format!("{what} '{key}' uses a system prefix and is not supported in the v2 API.");
            return Err(error::invalid(
                request,
                &format!("{at}.{field}"),
                &description,
            ));
        }
    }
    Ok(())
}

/// The template with the platform's defaults filled in where the writer left them unset.
pub(crate) fn template_with_defaults(template: &Value) -> Value {
    let mut template = template.clone();
    let defaults = [
        ("timeout", json!("300s")),
        ("maxInstanceRequestConcurrency", json!(80)),
        ("serviceAccount", json!(crate::auth::COMPUTE_ACCOUNT)),
    ];
    for (field, value) in defaults {
        default(&mut template, field, value);
    }
    default(&mut template, "scaling", json!({}));
    default(&mut template["scaling"], "maxInstanceCount", json!(100));
    for container in template["containers"].as_array_mut().into_iter().flatten() {
        default(container, "resources", json!({}));
        let resources = &mut container["resources"];
        default(resources, "limits", json!({}));
        default(&mut resources["limits"], "cpu", json!("1000m"));
        default(&mut resources["limits"], "memory", json!("512Mi"));
        default(resources, "cpuIdle", json!(true));
        default(container, "ports", json!([{"containerPort": 8080}]));
        for port in container["ports"].as_array_mut().into_iter().flatten() {
            default(port, "name", json!("http1"));
        }
    }
    template
}

fn default(object: &mut Value, field: &str, value: Value) {
    if object.get(field).is_none_or(Value::is_null) {
        object[field] = value;
    }
}

/// The written traffic, each target with its type, after checking it: percents that sum to
/// 100, and revisions that exist (`exists`). No traffic is all of it to the latest revision.
pub(crate) fn traffic(
    traffic: &Value,
    request: &str,
    exists: impl Fn(&str) -> bool,
) -> Result<Value, Failure> {
    let targets = traffic.as_array().map_or(&[][..], Vec::as_slice);
    if targets.is_empty() {
        return Ok(json!([{"type": LATEST, "percent": 100}]));
    }
    let mut sum = 0;
    let mut checked = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let at = format!("service.traffic[{i}]");
        known_fields(target, &[TRAFFIC_FIELDS], &at)?;
        let revision = target["revision"].as_str().unwrap_or_default();
        let inferred = if revision.is_empty() {
            LATEST
        } else {
            BY_REVISION
        };
        let kind = target["type"].as_str().unwrap_or(inferred);
        if kind == BY_REVISION && !exists(revision) {
            let field = format!("{at}.revision");
            let description = format!("Revision '{revision}' does not exist.");
            return Err(error::invalid(request, &field, &description));
        } else if kind != BY_REVISION && kind != LATEST {
            let description = format!("Invalid traffic target type '{kind}'.");
            return Err(error::invalid(request, &format!("{at}.type"), &description));
        }
        let percent = target["percent"].as_i64().unwrap_or(0);
        if !(0..=100).contains(&percent) {
            let description = "Percent must be between 0 and 100.";
            return Err(error::invalid(
                request,
                &format!("{at}.percent"),
                description,
            ));
        }
        sum += percent;
        let mut target = target.clone();
        target["type"] = json!(kind);
        checked.push(target);
    }
    if sum != 100 {
        let description =
            format!("Traffic percentages must add up to 100, but they add up to {sum}.");
        return Err(error::invalid(request, "service.traffic", &description));
    }
    Ok(Value::Array(checked))
}
