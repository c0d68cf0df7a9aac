//! Cloud Run's resources as the platform keeps them: services, their revisions, and the
//! long-running operation of each write and delete, which plays the rollout as time passes.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Value};

use crate::error::{self, Failure};
use crate::resource::{
    self, generation, next_resource, pick_revision, remove, set_conditions, traffic_statuses,
    typed, Pick, Revision, ServiceName, CRASH_MESSAGE, FAILED, SUCCEEDED,
};
use crate::rollout::{Operation, Pace, Work};
use crate::{new_uid, now, schema, validate};

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

/// A create or update as it was asked for.
pub(crate) struct Write<'a> {
    pub(crate) mode: WriteMode,
    /// `updateMask`: the fields to take from the body (all of them without one).
    pub(crate) update_mask: Option<&'a str>,
    /// `validateOnly`: check, answer with the defaults, store nothing.
    pub(crate) validate_only: bool,
    /// The account writing (an email).
    pub(crate) caller: &'a str,
    /// The rollout is done at once, whatever the pace (another client's edit by hand).
    pub(crate) at_once: bool,
}

/// A delete as it was asked for.
pub(crate) struct Delete<'a> {
    /// The `etag` the caller read, if it sent one.
    pub(crate) etag: &'a str,
    pub(crate) validate_only: bool,
}

/// A page of a list: `pageSize` (0: all) from `pageToken`.
pub(crate) struct Page<'a> {
    pub(crate) size: usize,
    pub(crate) token: &'a str,
}

struct Service {
    name: ServiceName,
    resource: Value,
    /// Oldest first.
    revisions: Vec<Revision>,
    /// The operation of the last write or delete while it is not done.
    rollout: Option<String>,
}

/// Every project's services and operations, and the pace they move at.
#[derive(Default)]
pub(crate) struct Platform {
    services: BTreeMap<String, Service>,
    operations: BTreeMap<String, Operation>,
    pub(crate) pace: Pace,
}

impl Platform {
    fn stored(&self, name: &ServiceName) -> Result<&Service, Failure> {
        let service = self.services.get(&name.full());
        service.ok_or_else(|| name.not_found("SERVICE", &name.service))
    }

    pub(crate) fn service(&self, name: &ServiceName) -> Result<Value, Failure> {
        Ok(self.stored(name)?.resource.clone())
    }

    /// The services of a project and location, by name, a page of them.
    pub(crate) fn list_services(
        &self,
        parent: &ServiceName,
        page: &Page,
    ) -> Result<Value, Failure> {
        let prefix = format!("{}/services/", parent.parent());
        let services = self.services.iter().filter(|(n, _)| n.starts_with(&prefix));
        let services: Vec<Value> = services.map(|(_, s)| s.resource.clone()).collect();
        paged("services", services, page)
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

    /// The service's revisions, newest first, a page of them.
    pub(crate) fn list_revisions(&self, name: &ServiceName, page: &Page) -> Result<Value, Failure> {
        paged("revisions", self.revisions(name)?, page)
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

    /// Ends every operation whose time has come (none while the clock is held).
    pub(crate) fn settle(&mut self) {
        if self.pace.clock.held() {
            return;
        }
        let due: Vec<String> = self
            .operations
            .iter()
            .filter(|(_, o)| o.is_due(&self.pace))
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.finish(&name);
        }
    }

    /// A poll of an operation (its full name): unless the clock is held, it counts towards
    /// the polls that finish it.
    pub(crate) fn poll(&mut self, parent: &ServiceName, operation: &str) -> Result<Value, Failure> {
        let Some(stored) = self.operations.get_mut(operation) else {
            let id = operation.rsplit('/').next().unwrap_or_default();
            return Err(parent.not_found("OPERATION", id));
        };
        if !self.pace.clock.held() && stored.count_poll() {
            self.finish(operation);
        }
        Ok(self.operation_json(operation))
    }

    /// Brings every operation not yet done one poll closer to done.
    pub(crate) fn advance(&mut self) {
        let pending: Vec<String> = self
            .operations
            .iter_mut()
            .filter_map(|(name, o)| o.count_poll().then(|| name.clone()))
            .collect();
        for name in pending {
            self.finish(&name);
        }
    }

    /// A create or update of a service: reads the body as Google's JSON, applies the update
    /// mask, checks it, stores the service and, if its template changed, a new revision, and
    /// answers the write's operation (for `validateOnly`, done at once, nothing stored).
    pub(crate) fn write(
        &mut self,
        name: &ServiceName,
        body: &Value,
        write: &Write,
    ) -> Result<Value, Failure> {
        let (request, id_field) = match write.mode {
            WriteMode::Create => ("CreateServiceRequest", "service_id"),
            WriteMode::Update | WriteMode::CreateOrUpdate => {
                ("UpdateServiceRequest", "service.name")
            }
        };
        let mut body = body.clone();
        schema::read_input(&mut body, schema::SERVICE, "service")?;
        let existing = self.services.get(&name.full());
        match (existing, write.mode) {
            (Some(_), WriteMode::Create) => return Err(error::already_exists(&name.service)),
            (None, WriteMode::Update) => return Err(name.not_found("SERVICE", &name.service)),
            (Some(service), _) => service.check_writable(body["etag"].as_str())?,
            (None, _) => validate::service_id(&name.service, request, id_field)?,
        }
        if let (Some(mask), Some(service)) = (write.update_mask, existing) {
            body = resource::apply_mask(&service.resource, &body, mask)?;
        }
        validate::service(&body, request)?;
        let mut template = validate::template_with_defaults(&body["template"]);
        let revisions = existing.map_or(&[][..], |s| s.revisions.as_slice());
        let current = existing.map(|s| &s.resource["template"]);
        let pick = pick_revision(name, revisions, current, &template, request)?;
        let (Pick::New(revision) | Pick::Existing(revision)) = &pick;
        template["revision"] = json!(revision);
        let exists = |r: &str| r == revision || revisions.iter().any(|known| known.name == r);
        let traffic = validate::traffic(&body["traffic"], request, exists)?;
        let previous = existing.map(|s| &s.resource);
        let resource = next_resource(name, previous, &body, template, traffic, write.caller);
        if write.validate_only {
            return Ok(self.validated(name, resource));
        }

        let service = self.services.entry(name.full()).or_insert_with(|| Service {
            name: name.clone(),
            resource: Value::Null,
            revisions: Vec::new(),
            rollout: None,
        });
        if let Pick::New(revision) = &pick {
            let revision = Revision::new(name, revision, &resource["template"], write.caller);
            service.revisions.push(revision);
        }
        service.resource = resource;
        let operation = self.start(name, Work::Rollout);
        if write.at_once {
            self.finish(&operation);
        }
        Ok(self.operation_json(&operation))
    }

    /// A delete of a service: refused during a rollout or with a stale `etag`; its operation
    /// removes the service and its revisions once done (for `validateOnly`, done at once,
    /// nothing deleted).
    pub(crate) fn delete(&mut self, name: &ServiceName, delete: &Delete) -> Result<Value, Failure> {
        let service = self.stored(name)?;
        service.check_writable(Some(delete.etag))?;
        if delete.validate_only {
            let resource = service.resource.clone();
            return Ok(self.validated(name, resource));
        }
        let operation = self.start(name, Work::Delete);
        if let Some(service) = self.services.get_mut(&name.full()) {
            service.resource["reconciling"] = json!(true);
        }
        Ok(self.operation_json(&operation))
    }

    /// Starts an operation on the service (which must be stored).
    fn start(&mut self, name: &ServiceName, work: Work) -> String {
        let operation = format!("{}/operations/{}", name.parent(), new_uid());
        let started = Operation::start(&name.full(), work, &self.pace);
        let done_at_once = self.pace.polls_until_done == 0;
        self.operations.insert(operation.clone(), started);
        if let Some(service) = self.services.get_mut(&name.full()) {
            service.rollout = Some(operation.clone());
        }
        if done_at_once {
            self.finish(&operation);
        }
        operation
    }

    /// The done operation of a `validateOnly` request, answering `resource`.
    fn validated(&mut self, name: &ServiceName, mut resource: Value) -> Value {
        for status in ["reconciling", "terminalCondition", "conditions", "etag"] {
            remove(&mut resource, status);
        }
        let operation = format!("{}/operations/{}", name.parent(), new_uid());
        let mut validation = Operation::start(&name.full(), Work::Validation, &self.pace);
        validation.result = Some(json!({ "response": typed(&resource) }));
        validation.last_seen = Some(resource);
        self.operations.insert(operation.clone(), validation);
        self.operation_json(&operation)
    }

    /// Ends an operation: a rollout's revision becomes ready, or fails if an image crashes,
    /// and the written traffic takes effect only if it is ready; a delete removes the service.
    fn finish(&mut self, operation: &str) {
        let Some(stored) = self.operations.get_mut(operation) else {
            return;
        };
        if stored.is_done() {
            return;
        }
        if stored.work == Work::Delete {
            if let Some(mut gone) = self.services.remove(&stored.service) {
                remove(&mut gone.resource, "reconciling");
                gone.resource["deleteTime"] = json!(now());
                stored.result = Some(json!({ "response": typed(&gone.resource) }));
                stored.last_seen = Some(gone.resource);
            }
            return;
        }
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
        let live = self.services.get(&stored.service).map(|s| &s.resource);
        if let Some(service) = stored.last_seen.as_ref().or(live) {
            answer["metadata"] = typed(service);
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
    /// Refuses a write or delete while a rollout runs, or with a stale `etag`.
    fn check_writable(&self, etag: Option<&str>) -> Result<(), Failure> {
        if self.rollout.is_some() {
            return Err(error::busy(&self.name.service, generation(&self.resource)));
        }
        let stored = self.resource["etag"].as_str().unwrap_or_default();
        match etag {
            Some(sent) if !sent.is_empty() && sent != stored => {
                Err(error::etag_mismatch(sent, stored))
            }
            _ => Ok(()),
        }
    }
}

/// `{"<field>": [a page of items], "nextPageToken": ...}`; like Google's JSON, `{}` for none.
/// The token is the offset of the next page, opaque to the caller.
fn paged(field: &str, items: Vec<Value>, page: &Page) -> Result<Value, Failure> {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let offset = match page.token {
        "" => 0,
        token => engine
            .decode(token)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()?.parse().ok())
            .filter(|offset| *offset <= items.len())
            .ok_or_else(|| error::bad_request("page_token", "Invalid page token."))?,
    };
    let size = if page.size == 0 {
        items.len()
    } else {
        page.size
    };
    let end = (offset + size).min(items.len());
    let mut answer = json!({});
    if end > offset {
        answer[field] = Value::Array(items[offset..end].to_vec());
    }
    if end < items.len() {
        answer["nextPageToken"] = json!(engine.encode(end.to_string()));
    }
    Ok(answer)
}
