//! Cloud Run's resources as the platform keeps them: services, their revisions, and the
//! long-running operation of each write, which plays the rollout as it is polled.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{self, Failure};
use crate::validate::{self, LATEST, USER_FIELDS};
use crate::{new_etag, new_uid, now, random_letters};

/// The Ready message of a revision whose container does not start: one whose image contains
/// "crash".
const CRASH_MESSAGE: &str = "The user-provided container failed to start and listen \
    on the port defined provided by the PORT=8080 environment variable within the allocated \
    timeout. Logs for this revision might contain more information.";

const SERVICE_TYPE: &str = "type.googleapis.com/google.cloud.run.v2.Service";
const RECONCILING: &str = "CONDITION_RECONCILING";
const SUCCEEDED: &str = "CONDITION_SUCCEEDED";
const FAILED: &str = "CONDITION_FAILED";

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

    fn revision(&self, revision: &str) -> String {
        format!("{}/revisions/{revision}", self.full())
    }

    /// `https://{service}-{hash of the project}-{region code}.a.run.app`.
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

    fn not_found(&self, kind: &str, resource: &str) -> Failure {
        error::not_found(kind, resource, &self.project, &self.location)
    }
}

/// How a write treats a service that exists or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// `POST ...services?serviceId=`: 409 if it exists.
    Create,
    /// `PATCH`: 404 if it does not exist.
    Update,
    /// `PATCH ...?allowMissing=true`.
    CreateOrUpdate,
}

struct Service {
    name: ServiceName,
    resource: Value,
    /// Oldest first.
    revisions: Vec<Revision>,
    /// The operation of the last write while it is not done.
    rollout: Option<String>,
}

struct Revision {
    name: String,
    /// The template that made it, with the defaults.
    template: Value,
    resource: Value,
}

struct Operation {
    service: String,
    polls_left: u32,
    /// `{"response": ...}` or `{"error": ...}` once done.
    result: Option<Value>,
}

/// The revision a write runs.
enum Pick {
    New(String),
    Existing(String),
}

/// Every project's services and operations.
#[derive(Default)]
pub(crate) struct Platform {
    services: BTreeMap<String, Service>,
    operations: BTreeMap<String, Operation>,
}

impl Platform {
    fn stored(&self, name: &ServiceName) -> Result<&Service, Failure> {
        let service = self.services.get(&name.full());
        service.ok_or_else(|| name.not_found("SERVICE", &name.service))
    }

    pub(crate) fn service(&self, name: &ServiceName) -> Result<Value, Failure> {
        Ok(self.stored(name)?.resource.clone())
    }

    pub(crate) fn revision(&self, name: &ServiceName, revision: &str) -> Result<Value, Failure> {
        let revisions = &self.stored(name)?.revisions;
        let found = revisions.iter().find(|r| r.name == revision);
        let found = found.ok_or_else(|| name.not_found("REVISION", revision))?;
        Ok(found.resource.clone())
    }

    /// Newest first.
    pub(crate) fn revisions(&self, name: &ServiceName) -> Result<Vec<Value>, Failure> {
        let revisions = self.stored(name)?.revisions.iter().rev();
        Ok(revisions.map(|r| r.resource.clone()).collect())
    }

    /// Deletes a revision that serves no traffic (`gcloud run revisions delete`); the real API
    /// refuses to delete one that serves, and so does this.
    pub(crate) fn delete_revision(
        &mut self,
        name: &ServiceName,
        revision: &str,
    ) -> Result<(), Failure> {
        let service = self
            .services
            .get_mut(&name.full())
            .ok_or_else(|| name.not_found("SERVICE", &name.service))?;
        let serving = service.resource["trafficStatuses"]
            .as_array()
            .is_some_and(|t| {
                t.iter()
                    .any(|s| s["revision"] == revision && s["percent"].as_i64().unwrap_or(0) > 0)
            });
        if serving {
            return Err(error::serving_revision(revision));
        }
        let before = service.revisions.len();
        service.revisions.retain(|r| r.name != revision);
        if service.revisions.len() == before {
            return Err(name.not_found("REVISION", revision));
        }
        Ok(())
    }

    /// The first service of that short name, in any project and location.
    pub(crate) fn find(&self, service: &str) -> Option<ServiceName> {
        let found = self.services.values().find(|s| s.name.service == service);
        found.map(|s| s.name.clone())
    }

    /// A poll of an operation (its full name): unless operations are `held`, each brings it
    /// one poll closer to done.
    pub(crate) fn poll(
        &mut self,
        parent: &ServiceName,
        operation: &str,
        held: bool,
    ) -> Result<Value, Failure> {
        if !self.operations.contains_key(operation) {
            let id = operation.rsplit('/').next().unwrap_or_default();
            return Err(parent.not_found("OPERATION", id));
        }
        if !held {
            self.progress(operation);
        }
        Ok(self.operation_json(operation))
    }

    /// Brings every operation not yet done one poll closer to done.
    pub(crate) fn advance(&mut self) {
        let pending: Vec<String> = self
            .operations
            .iter()
            .filter(|(_, o)| o.result.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        for name in pending {
            self.progress(&name);
        }
    }

    fn progress(&mut self, operation: &str) {
        let Some(stored) = self.operations.get_mut(operation) else {
            return;
        };
        if stored.result.is_none() {
            stored.polls_left = stored.polls_left.saturating_sub(1);
            if stored.polls_left == 0 {
                self.finish(operation);
            }
        }
    }

    /// A create or update of a service by `caller` (an account's email): checks it, stores
    /// the service and, if its template changed, a new revision, and answers the write's
    /// operation, which is done after `polls` polls (at once if 0).
    pub(crate) fn write(
        &mut self,
        name: &ServiceName,
        body: &Value,
        mode: WriteMode,
        caller: &str,
        polls: u32,
    ) -> Result<Value, Failure> {
        let request = match mode {
            WriteMode::Create => "CreateServiceRequest",
            WriteMode::Update | WriteMode::CreateOrUpdate => "UpdateServiceRequest",
        };
        let existing = self.services.get(&name.full());
        match (existing, mode) {
            (Some(_), WriteMode::Create) => return Err(error::already_exists(&name.service)),
            (None, WriteMode::Update) => return Err(name.not_found("SERVICE", &name.service)),
            (Some(service), _) => service.check_writable(body)?,
            (None, _) => {}
        }
        validate::service(body, request)?;
        let mut template = validate::template_with_defaults(&body["template"]);
        let revisions = existing.map_or(&[][..], |s| s.revisions.as_slice());
        let current = existing.map(|s| &s.resource["template"]);
        let pick = pick_revision(name, revisions, current, &template, request)?;
        let (Pick::New(revision) | Pick::Existing(revision)) = &pick;
        template["revision"] = json!(revision);
        let exists = |r: &str| r == revision || revisions.iter().any(|known| known.name == r);
        let traffic = validate::traffic(&body["traffic"], request, exists)?;
        let previous = existing.map(|s| &s.resource);
        let resource = next_resource(name, previous, body, template, traffic, caller);

        let service = self.services.entry(name.full()).or_insert_with(|| Service {
            name: name.clone(),
            resource: Value::Null,
            revisions: Vec::new(),
            rollout: None,
        });
        if let Pick::New(revision) = &pick {
            let revision = Revision::new(name, revision, &resource["template"], caller);
            service.revisions.push(revision);
        }
        service.resource = resource;
        let operation = format!("{}/operations/{}", name.parent(), new_uid());
        service.rollout = Some(operation.clone());
        let stored = Operation {
            service: name.full(),
            polls_left: polls,
            result: None,
        };
        self.operations.insert(operation.clone(), stored);
        if polls == 0 {
            self.finish(&operation);
        }
        Ok(self.operation_json(&operation))
    }

    /// Ends a rollout: the template's revision becomes ready, or fails if an image crashes,
    /// and the written traffic takes effect only if it is ready.
    fn finish(&mut self, operation: &str) {
        let Some(stored) = self.operations.get_mut(operation) else {
            return;
        };
        let Some(service) = self.services.get_mut(&stored.service) else {
            return;
        };
        let resource = &mut service.resource;
        let revision = resource["template"]["revision"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let found = service.revisions.iter_mut().find(|r| r.name == revision);
        let failed = found.is_some_and(|found| found.settle() == FAILED);
        remove(resource, "reconciling");
        resource["observedGeneration"] = resource["generation"].clone();
        if failed {
            let message = format!(
                "Revision '{revision}' is not ready and cannot serve traffic. {CRASH_MESSAGE}"
            );
            set_conditions(resource, FAILED, Some(&message));
            stored.result = Some(json!({"error": {"code": 9, "message": message}}));
        } else {
            resource["latestReadyRevision"] = json!(service.name.revision(&revision));
            let uri = resource["uri"].as_str().unwrap_or_default();
            let statuses = traffic_statuses(&resource["traffic"], &revision, uri);
            resource["trafficStatuses"] = statuses;
            set_conditions(resource, SUCCEEDED, None);
            stored.result = Some(json!({ "response": typed(resource) }));
        }
        service.rollout = None;
    }

    fn operation_json(&self, operation: &str) -> Value {
        let mut answer = json!({ "name": operation });
        let Some(stored) = self.operations.get(operation) else {
            return answer;
        };
        if let Some(service) = self.services.get(&stored.service) {
            answer["metadata"] = typed(&service.resource);
        }
        // Like Google's JSON, which leaves out `false`: no `done` until it is.
        if let Some(Value::Object(result)) = &stored.result {
            answer["done"] = json!(true);
            for (field, value) in result {
                answer[field] = value.clone();
            }
        }
        answer
    }
}

impl Service {
    /// Refuses a write while a rollout runs, or with a stale `etag`.
    fn check_writable(&self, body: &Value) -> Result<(), Failure> {
        if self.rollout.is_some() {
            return Err(error::busy(&self.name.service, generation(&self.resource)));
        }
        let stored = self.resource["etag"].as_str().unwrap_or_default();
        match body["etag"].as_str() {
            Some(sent) if !sent.is_empty() && sent != stored => {
                Err(error::etag_mismatch(sent, stored))
            }
            _ => Ok(()),
        }
    }
}

impl Revision {
    fn new(name: &ServiceName, revision: &str, template: &Value, caller: &str) -> Revision {
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
        for field in "labels annotations scaling vpcAccess containers volumes serviceAccount \
                      timeout maxInstanceRequestConcurrency executionEnvironment encryptionKey \
                      sessionAffinity nodeSelector serviceMesh"
            .split_whitespace()
        {
            if let Some(value) = template.get(field) {
                resource[field] = value.clone();
            }
        }
        Revision {
            name: revision.to_string(),
            template: template.clone(),
            resource,
        }
    }

    /// Ends the revision's rollout if it is under way; answers its Ready state.
    fn settle(&mut self) -> &str {
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

/// The revision a written template runs: the one it names (409 if that one's template
/// differs), else the current one if the template did not change, else a new one named
/// `{service}-{n:05}-{abc}`.
fn pick_revision(
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

/// The service a write stores: the written user fields with defaults, the platform's fields
/// carried over (or new), the next generation and a rollout under way.
fn next_resource(
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
    for field in USER_FIELDS.split_whitespace() {
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
        ("uri", json!(name.uri())),
        ("latestCreatedRevision", json!(latest_created)),
        ("reconciling", json!(true)),
        ("etag", json!(new_etag())),
        ("template", template),
        ("traffic", traffic),
    ];
    for (field, value) in set {
        service[field] = value;
    }
    for (field, default) in [("ingress", "INGRESS_TRAFFIC_ALL"), ("launchStage", "GA")] {
        if service.get(field).is_none() {
            service[field] = json!(default);
        }
    }
    set_conditions(&mut service, RECONCILING, None);
    service
}

fn set_conditions(service: &mut Value, state: &str, message: Option<&str>) {
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
fn traffic_statuses(traffic: &Value, latest_ready: &str, uri: &str) -> Value {
    let targets = traffic.as_array().into_iter().flatten();
    let statuses = targets.map(|target| {
        let mut status = target.clone();
        if target["type"] == LATEST {
            status["revision"] = json!(latest_ready);
        }
        if status["percent"] == 0 {
            remove(&mut status, "percent");
        }
        if let Some(tag) = target["tag"].as_str() {
            status["uri"] = json!(uri.replacen("https://", &format!("https://{tag}---"), 1));
        }
        status
    });
    statuses.collect()
}

/// The service as an operation's `metadata` or `response`: with its `@type`.
fn typed(service: &Value) -> Value {
    let mut typed = json!({ "@type": SERVICE_TYPE });
    for (field, value) in service.as_object().into_iter().flatten() {
        typed[field] = value.clone();
    }
    typed
}

fn generation(resource: &Value) -> u64 {
    let generation = resource["generation"].as_str().and_then(|g| g.parse().ok());
    generation.unwrap_or(0)
}

fn remove(object: &mut Value, field: &str) {
    if let Some(object) = object.as_object_mut() {
        object.remove(field);
    }
}
