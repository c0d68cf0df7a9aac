//! The resources as Cloud Run writes them: a service's name and URLs, the stored service after
//! a write (its platform fields, generation, conditions), a revision, the served traffic, and
//! the fields an update mask names.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::PROJECT_NUMBER;
use crate::error::{self, Failure};
use crate::validate::{self, LATEST};
use crate::{new_etag, new_uid, now, random_letters, schema};

/// The Ready message of a revision whose container does not start: one whose image contains
/// "crash".
pub(crate) const CRASH_MESSAGE: &str = "The user-provided container failed to start and \
    listen on the port defined provided by the PORT=8080 environment variable within the \
    allocated timeout. Logs for this revision might contain more information.";

const SERVICE_TYPE: &str = "type.googleapis.com/google.cloud.run.v2.Service";
pub(crate) const RECONCILING: &str = "CONDITION_RECONCILING";
pub(crate) const SUCCEEDED: &str = "CONDITION_SUCCEEDED";
pub(crate) const FAILED: &str = "CONDITION_FAILED";

/// The project, location and service of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceName {
    pub(crate) project: String,
    pub(crate) location: String,
    pub(crate) service: String,
}

impl ServiceName {
    pub(crate) fn parent(&self) -> String {
        format!("projects/{}/locations/{}", self.project, self.location)
    }

    pub(crate) fn full(&self) -> String {
        format!("{}/services/{}", self.parent(), self.service)
    }

    pub(crate) fn revision(&self, revision: &str) -> String {
        format!("{}/revisions/{revision}", self.full())
    }

    /// The hash-based URL every service gets: `https://{service}-{hash}-{region code}.a.run.app`.
    fn uri(&self) -> String {
        let digest = Sha256::digest(self.project.as_bytes());
        let hash: String = digest
            .iter()
            .take(10)
            .map(|b| char::from(b'a' + b % 26))
            .collect();
        let region: String = self
            .location
            .split('-')
            .filter_map(|p| p.chars().next())
            .collect();
        format!("https://{}-{hash}-{region}.a.run.app", self.service)
    }

    /// Every URL serving the service: the deterministic one
    /// (`https://{service}-{project number}.{region}.run.app`) where the name is short enough
    /// for it, first, then the hash-based one.
    fn urls(&self) -> Vec<String> {
        let host = format!("{}-{PROJECT_NUMBER}", self.service);
        let deterministic = format!("https://{host}.{}.run.app", self.location);
        let urls = [
            (host.len() <= 63).then_some(deterministic),
            Some(self.uri()),
        ];
        urls.into_iter().flatten().collect()
    }

    pub(crate) fn not_found(&self, kind: &str, resource: &str) -> Failure {
        error::not_found(kind, resource, &self.project, &self.location)
    }
}

pub(crate) struct Revision {
    pub(crate) name: String,
    /// The template that made it, with the defaults.
    pub(crate) template: Value,
    pub(crate) resource: Value,
}

impl Revision {
    pub(crate) fn new(name: &ServiceName, revision: &str, template: &Value, caller: &str) -> Self {
        let now = now();
        let log_uri = format!(
            "https://console.cloud.google.com/logs/viewer?project={}&resource=cloud_run_revision/\
             service_name/{}/revision_name/{revision}",
            name.project, name.service
        );
        let mut resource = json!({
            "name": name.revision(revision), "uid": new_uid(), "generation": "1",
            "createTime": now, "updateTime": now, "launchStage": "GA", "service": name.full(),
            "creator": caller, "reconciling": true, "observedGeneration": "1",
            "logUri": log_uri, "etag": new_etag(),
            "conditions": revision_conditions(RECONCILING, None),
        });
        // The template's fields a revision has too.
        let revision_fields = schema::fields(schema::REVISION);
        for field in schema::fields(schema::REVISION_TEMPLATE) {
            let shared = revision_fields.iter().any(|f| f.name == field.name);
            if let Some(value) = template.get(&field.name).filter(|_| shared) {
                resource[&field.name] = value.clone();
            }
        }
        Revision {
            name: revision.to_string(),
            template: template.clone(),
            resource,
        }
    }

    /// Ends the revision's rollout if it is under way; answers its Ready state.
    pub(crate) fn settle(&mut self) -> &str {
        let resource = &mut self.resource;
        if resource.get("reconciling").is_some() {
            remove(resource, "reconciling");
            let images = resource["containers"].as_array().into_iter().flatten();
            let crashes = images
                .filter_map(|c| c["image"].as_str())
                .any(|i| i.contains("crash"));
            resource["conditions"] = if crashes {
                revision_conditions(FAILED, Some(CRASH_MESSAGE))
            } else {
                revision_conditions(SUCCEEDED, None)
            };
        }
        resource["conditions"][0]["state"]
            .as_str()
            .unwrap_or(RECONCILING)
    }
}

/// The revision a written template runs.
pub(crate) enum Pick {
    New(String),
    Existing(String),
}

/// The revision a written template runs: the one it names (409 if that one's template
/// differs), else the current one if the template did not change, else a new one named
/// `{service}-{n:05}-{abc}`.
pub(crate) fn pick_revision(
    name: &ServiceName,
    revisions: &[Revision],
    current: Option<&Value>,
    template: &Value,
    request: &str,
) -> Result<Pick, Failure> {
    let same = |other: &Value| without_revision(other) == without_revision(template);
    let Some(wanted) = template["revision"].as_str().filter(|r| !r.is_empty()) else {
        return Ok(match current {
            Some(current) if same(current) => {
                Pick::Existing(current["revision"].as_str().unwrap_or_default().to_string())
            }
            _ => Pick::New(generated_name(&name.service, revisions)),
        });
    };
    if !wanted.starts_with(&format!("{}-", name.service)) {
        let description = format!(
            "Revision name must be prefixed by the name of the enclosing Service with a \
             trailing '-': '{}-'.",
            name.service
        );
        return Err(error::invalid(
            request,
            "service.template.revision",
            &description,
        ));
    }
    match revisions.iter().find(|r| r.name == wanted) {
        Some(known) if same(&known.template) => Ok(Pick::Existing(wanted.to_string())),
        Some(_) => Err(error::revision_conflict(wanted)),
        None => Ok(Pick::New(wanted.to_string())),
    }
}

fn generated_name(service: &str, revisions: &[Revision]) -> String {
    loop {
        let number = revisions.len() + 1;
        let candidate = format!("{service}-{number:05}-{}", random_letters(3));
        if revisions.iter().all(|r| r.name != candidate) {
            return candidate;
        }
    }
}

fn without_revision(template: &Value) -> Value {
    let mut template = template.clone();
    remove(&mut template, "revision");
    template
}

/// The written body an update mask makes: the stored service's user fields, with each path
/// the mask names (`labels`, `template.containers`; JSON or proto names) taken from `body`
/// (left unset where `body` has none). `*` is the whole body.
pub(crate) fn apply_mask(stored: &Value, body: &Value, mask: &str) -> Result<Value, Failure> {
    let paths: Vec<&str> = mask.split(',').map(str::trim).collect();
    if paths.contains(&"*") {
        return Ok(body.clone());
    }
    let mut merged = Value::Object(Map::new());
    for field in validate::user_fields() {
        if let Some(value) = stored.get(field) {
            merged[field] = value.clone();
        }
    }
    for path in paths {
        let json_path = json_path(path).ok_or_else(|| {
            let description = format!("Invalid field mask path '{path}'.");
            error::invalid("UpdateServiceRequest", "update_mask", &description)
        })?;
        let segments: Vec<&str> = json_path.split('.').collect();
        let Some((last, parents)) = segments.split_last() else {
            continue;
        };
        let mut source = Some(body);
        for segment in parents {
            source = source.and_then(|s| s.get(*segment));
        }
        let value = source.and_then(|s| s.get(*last)).cloned();
        let mut target = &mut merged;
        for segment in parents {
            if !target[*segment].is_object() {
                target[*segment] = Value::Object(Map::new());
            }
            target = &mut target[*segment];
        }
        match value {
            Some(value) => target[*last] = value,
            None => remove(target, last),
        }
    }
    if let Some(etag) = body.get("etag") {
        merged["etag"] = etag.clone();
    }
    Ok(merged)
}

/// A mask path in JSON names, if it names a settable field of the Service.
fn json_path(path: &str) -> Option<String> {
    if !schema::has_path(schema::SERVICE, path) {
        return None;
    }
    let first = path.split('.').next().unwrap_or_default();
    let first = schema::json_name(schema::SERVICE, first)?;
    if !validate::user_fields().any(|f| f == first) {
        return None;
    }
    let mut message = schema::SERVICE.to_string();
    let mut names = Vec::new();
    for segment in path.split('.') {
        let field = schema::fields(&message)
            .iter()
            .find(|f| f.name == segment || f.proto == segment)?;
        names.push(field.name.clone());
        message = schema::message_type(field).unwrap_or_default().to_string();
    }
    Some(names.join("."))
}

/// The service a write stores: the written user fields with defaults, the platform's fields
/// carried over (or new), the next generation and a rollout under way.
pub(crate) fn next_resource(
    name: &ServiceName,
    previous: Option<&Value>,
    body: &Value,
    template: Value,
    traffic: Value,
    caller: &str,
) -> Value {
    let now = now();
    let fresh = json!({"uid": new_uid(), "createTime": now, "creator": caller});
    let previous = previous.unwrap_or(&fresh);
    let mut service = Value::Object(Map::new());
    for field in validate::user_fields() {
        if let Some(value) = body.get(field).filter(|v| !v.is_null()) {
            service[field] = value.clone();
        }
    }
    let kept = "uid createTime creator observedGeneration latestReadyRevision trafficStatuses";
    for field in kept.split_whitespace() {
        if let Some(value) = previous.get(field) {
            service[field] = value.clone();
        }
    }
    let revision = template["revision"].as_str().unwrap_or_default();
    let latest_created = name.revision(revision);
    let set = [
        ("name", json!(name.full())),
        ("generation", json!((generation(previous) + 1).to_string())),
        ("updateTime", json!(now)),
        ("lastModifier", json!(caller)),
        ("latestCreatedRevision", json!(latest_created)),
        ("reconciling", json!(true)),
        ("etag", json!(new_etag())),
        ("template", template),
        ("traffic", traffic),
    ];
    for (field, value) in set {
        service[field] = value;
    }
    if service["defaultUriDisabled"] != true {
        service["uri"] = json!(name.uri());
        service["urls"] = json!(name.urls());
    }
    for (field, default) in [("ingress", "INGRESS_TRAFFIC_ALL"), ("launchStage", "GA")] {
        if service.get(field).is_none() {
            service[field] = json!(default);
        }
    }
    set_conditions(&mut service, RECONCILING, None);
    service
}

pub(crate) fn set_conditions(service: &mut Value, state: &str, message: Option<&str>) {
    service["terminalCondition"] = condition("Ready", state, message);
    service["conditions"] = json!([
        condition("RoutesReady", state, message),
        condition("ConfigurationsReady", state, message),
    ]);
}

fn revision_conditions(state: &str, failure: Option<&str>) -> Value {
    let health = |kind| {
        let mut condition = condition(kind, state, failure);
        if failure.is_some() {
            condition["revisionReason"] = json!("HEALTH_CHECK_CONTAINER_ERROR");
        }
        condition
    };
    let resources = if state == FAILED { SUCCEEDED } else { state };
    json!([
        health("Ready"),
        health("ContainerHealthy"),
        condition("ResourcesAvailable", resources, None)
    ])
}

fn condition(kind: &str, state: &str, message: Option<&str>) -> Value {
    let mut condition = json!({"type": kind, "state": state, "lastTransitionTime": now()});
    if let Some(message) = message {
        condition["message"] = json!(message);
    }
    condition
}

/// The served traffic: the written targets, `LATEST` resolved to `latest_ready`, with the
/// URL of each tag. Like Google's JSON, a 0 percent is left out.
pub(crate) fn traffic_statuses(traffic: &Value, latest_ready: &str, uri: &str) -> Value {
    let targets = traffic.as_array().into_iter().flatten();
    let statuses = targets.map(|target| {
        let mut status = target.clone();
        if target["type"] == LATEST {
            status["revision"] = json!(latest_ready);
        }
        if status["percent"] == 0 {
            remove(&mut status, "percent");
        }
        if let Some(tag) = target["tag"].as_str().filter(|_| !uri.is_empty()) {
            status["uri"] = json!(uri.replacen("https://", &format!("https://{tag}---"), 1));
        }
        status
    });
    statuses.collect()
}

/// The service as an operation's `metadata` or `response`: with its `@type`.
pub(crate) fn typed(service: &Value) -> Value {
    let mut typed = json!({ "@type": SERVICE_TYPE });
    for (field, value) in service.as_object().into_iter().flatten() {
        typed[field] = value.clone();
    }
    typed
}

pub(crate) fn generation(resource: &Value) -> u64 {
    let generation = resource["generation"].as_str().and_then(|g| g.parse().ok());
    generation.unwrap_or(0)
}

pub(crate) fn remove(object: &mut Value, field: &str) {
    if let Some(object) = object.as_object_mut() {
        object.remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mask_takes_the_paths_it_names_from_the_body_and_keeps_the_rest() {
        let stored = json!({"labels": {"a": "1"}, "description": "old",
                            "template": {"containers": [{"image": "gcr.io/p/w:1"}], "timeout": "9s"}});
        let body =
            json!({"labels": {"b": "2"}, "template": {"containers": [{"image": "gcr.io/p/w:2"}]}});
        let merged = apply_mask(&stored, &body, "labels,template.timeout").unwrap();
        assert_eq!(
            merged,
            json!({"labels": {"b": "2"}, "description": "old",
                   "template": {"containers": [{"image": "gcr.io/p/w:1"}]}})
        );
        let snake = apply_mask(&stored, &body, "invoker_iam_disabled").unwrap();
        assert_eq!(snake["labels"], json!({"a": "1"}));
        assert!(apply_mask(&stored, &body, "uri").is_err(), "output only");
        assert!(apply_mask(&stored, &body, "nope").is_err());
        assert_eq!(apply_mask(&stored, &body, "*").unwrap(), body);
    }

    #[test]
    fn urls_list_the_deterministic_url_first() {
        let name = ServiceName {
            project: "p".into(),
            location: "us-central1".into(),
            service: "web".into(),
        };
        let urls = name.urls();
        assert_eq!(urls[0], "https://web-123.us-central1.run.app");
        assert!(urls[1].ends_with("-uc.a.run.app"), "{urls:?}");
        let long = ServiceName {
            service: "s".repeat(60),
            ..name
        };
        assert_eq!(long.urls().len(), 1);
    }
}
