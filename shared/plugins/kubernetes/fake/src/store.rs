//! The object store. Every write, over HTTP or through the handle, goes through
//! [`State::write`]: request checks, the apply or update, the status subresource rule,
//! defaults, validation, generation, managedFields and the no-op rule.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

use crate::fields::{self, FieldSet, Scope};
use crate::kinds::Kind;
use crate::managed::{self, Entry};
use crate::schema::{self, Unknown};
use crate::selector::{self, Requirement};
use crate::status::{self, Failure};
use crate::{patch, rules, Fault, Request};

/// The object a request is about.
pub(crate) struct Target {
    pub kind: &'static Kind,
    /// `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Empty for a collection; for a create, the name in the body.
    pub name: String,
    /// The `/status` subresource.
    pub status: bool,
}

impl Target {
    /// The part of the object the request writes.
    fn scope(&self) -> Scope {
        if self.status {
            Scope::Status
        } else {
            Scope::Main
        }
    }
}

/// What a write does with fields no schema declares (the `fieldValidation` query): `Strict`
/// refuses the write, anything else (`Warn`, the default, or `Ignore`) drops them. A
/// server-side apply refuses them either way, as a real server does.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum FieldValidation {
    Strict,
    Drop,
}

/// A write: POST, PUT, PATCH with a JSON merge patch, or PATCH with an applied configuration.
pub(crate) enum Change {
    Create(Value),
    Replace(Value),
    MergePatch(Value),
    /// `application/strategic-merge-patch+json`.
    StrategicMerge(Value),
    /// `application/json-patch+json`: a list of RFC 6902 operations.
    JsonPatch(Value),
    Apply {
        object: Value,
        force: bool,
    },
}

impl Change {
    /// The operation of the managedFields entry the change writes.
    fn operation(&self) -> &'static str {
        match self {
            Change::Apply { .. } => "Apply",
            _ => "Update",
        }
    }
}

#[derive(Clone)]
struct Stored {
    /// The object without apiVersion and managedFields.
    object: Value,
    managed: Vec<Entry>,
}

/// (group, plural, namespace or "", name): iteration order is the real list order.
type Key = (&'static str, &'static str, String, String);

/// Metadata the server owns: dropped from requests, kept from the stored object.
const SYSTEM_METADATA: [&str; 8] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Everything the server holds, behind one lock.
pub(crate) struct State {
    objects: BTreeMap<Key, Stored>,
    resource_version: u64,
    cluster_ips: u32,
    /// "127.0.0.1:PORT", for discovery.
    pub address: String,
    pub requests: Vec<Request>,
    pub faults: Vec<Fault>,
}

impl State {
    /// A store holding the namespaces "default" and "kube-system".
    pub fn new(address: String) -> State {
        let mut state = State {
            objects: BTreeMap::new(),
            resource_version: 100,
            cluster_ips: 0,
            address,
            requests: Vec::new(),
            faults: Vec::new(),
        };
        let namespace = Kind::by_kind("v1", "Namespace").expect("Namespace is served");
        for name in ["default", "kube-system"] {
            let target = Target {
                kind: namespace,
                namespace: None,
                name: name.to_string(),
                status: false,
            };
            let object = json!({"metadata": {"name": name}});
            let create = Change::Create(object);
            let created = state.write(
                &target,
                "kube-apiserver",
                create,
                FieldValidation::Drop,
                false,
            );
            created.expect("the initial namespaces are valid");
        }
        state
    }

    fn key(target: &Target) -> Key {
        let namespace = target.namespace.clone().unwrap_or_default();
        (
            target.kind.group,
            target.kind.plural,
            namespace,
            target.name.clone(),
        )
    }

    fn render(stored: &Stored, kind: &Kind) -> Value {
        let mut object = stored.object.clone();
        object["apiVersion"] = json!(kind.api_version());
        object["kind"] = json!(kind.kind);
        if !stored.managed.is_empty() {
            object["metadata"]["managedFields"] = managed::render(&stored.managed);
        }
        object
    }

    /// GET of one object.
    pub fn get(&self, target: &Target) -> Result<Value, Failure> {
        let stored = self.objects.get(&Self::key(target));
        let stored = stored.ok_or_else(|| status::not_found(target.kind, &target.name))?;
        Ok(Self::render(stored, target.kind))
    }

    /// Every object of a kind in a namespace (or all) matching a selector, sorted by
    /// namespace and name, with apiVersion and kind.
    pub fn objects(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        selector: &[Requirement],
    ) -> Vec<Value> {
        let of_kind = self
            .objects
            .iter()
            .filter(|((group, plural, ns, _), stored)| {
                (*group, *plural) == (kind.group, kind.plural)
                    && namespace.is_none_or(|namespace| namespace == ns)
                    && selector::matches(selector, stored.object["metadata"].get("labels"))
            });
        of_kind
            .map(|(_, stored)| Self::render(stored, kind))
            .collect()
    }

    /// A LIST response: `<Kind>List`, whose items carry no apiVersion nor kind.
    pub fn list(&self, kind: &Kind, namespace: Option<&str>, selector: &[Requirement]) -> Value {
        let mut items = self.objects(kind, namespace, selector);
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            item.remove("apiVersion");
            item.remove("kind");
        }
        json!({
            "kind": format!("{}List", kind.kind), "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": self.resource_version.to_string()}, "items": items
        })
    }

    /// Creates, replaces, patches or applies an object as `manager`. Answers the HTTP code
    /// (201 when created) and the object, or a `Status`. A write that changes nothing (object
    /// and ownership alike) stores nothing and answers the stored object as it was.
    pub fn write(
        &mut self,
        target: &Target,
        manager: &str,
        change: Change,
        validation: FieldValidation,
        dry_run: bool,
    ) -> Result<(u16, Value), Failure> {
        let kind = target.kind;
        if let Some(namespace) = &target.namespace {
            let key = ("", "namespaces", String::new(), namespace.clone());
            if !self.objects.contains_key(&key) {
                return Err(status::namespace_not_found(namespace));
            }
        }
        let key = Self::key(target);
        let stored = self.objects.get(&key).cloned();
        let old = stored.as_ref().map(|s| &s.object);
        let not_found = || status::not_found(kind, &target.name);
        let mut entries = stored
            .as_ref()
            .map(|s| s.managed.clone())
            .unwrap_or_default();
        let acting = Entry {
            manager: manager.to_string(),
            operation: change.operation(),
            subresource: target.status.then_some("status"),
            api_version: kind.api_version(),
            time: now(),
            fields: FieldSet::new(),
        };
        let candidate = match (change, old) {
            (_, None) if target.status => return Err(not_found()),
            (Change::Create(body), None) => request_object(target, body)?,
            (Change::Create(_), Some(_)) => return Err(status::already_exists(kind, &target.name)),
            (
                Change::Replace(_)
                | Change::MergePatch(_)
                | Change::StrategicMerge(_)
                | Change::JsonPatch(_),
                None,
            ) => return Err(not_found()),
            (Change::Replace(body), Some(old)) => {
                check_precondition(target, &body, old)?;
                request_object(target, body)?
            }
            (Change::StrategicMerge(_), Some(_)) if kind.is_crd() => {
                return Err(status::unsupported_media_type())
            }
            (Change::StrategicMerge(patch), Some(old)) => {
                check_precondition(target, &patch, old)?;
                let mut patched = old.clone();
                patch::strategic_merge(&mut patched, &patch);
                request_object(target, patched)?
            }
            (Change::JsonPatch(operations), Some(old)) => {
                let mut whole = old.clone();
                whole["apiVersion"] = json!(kind.api_version());
                whole["kind"] = json!(kind.kind);
                let patched = patch::json_patch(&whole, &operations)
                    .map_err(|message| status::failure(422, "Invalid", &message, None))?;
                check_precondition(target, &patched, old)?;
                request_object(target, patched)?
            }
            (Change::MergePatch(patch), Some(old)) => {
                check_precondition(target, &patch, old)?;
                let mut patched = old.clone();
                merge_patch(&mut patched, &patch);
                request_object(target, patched)?
            }
            (Change::Apply { object, force }, old) => {
                if let Some(old) = old {
                    check_precondition(target, &object, old)?;
                }
                let applied = request_object(target, object)?;
                apply(target, &applied, force, old, &mut entries, acting.clone())?
            }
        };
        let candidate = decode(target, candidate, acting.operation, validation)?;
        let mut object = match old {
            Some(old) if target.status => with_status(old.clone(), candidate.get("status")),
            _ if kind.status => with_status(candidate, old.and_then(|old| old.get("status"))),
            _ => candidate,
        };
        system_metadata(&mut object, old, &acting.time)?;
        let cluster_ips = &mut self.cluster_ips;
        rules::default(kind, &mut object, old, || {
            *cluster_ips += 1;
            format!("10.96.{}.{}", *cluster_ips / 254, *cluster_ips % 254 + 1)
        });
        let errors = rules::validate(kind, &object, old);
        if !errors.is_empty() {
            return Err(status::invalid(
                kind.kind,
                kind.group,
                &target.name,
                &errors,
            ));
        }
        if kind.generation {
            let previous = old.map(|old| old["metadata"]["generation"].as_i64().unwrap_or(1));
            // A Deployment's annotations count too: the Deployment controller copies them to
            // its ReplicaSets (kube-apiserver's apps/v1 Deployment strategy).
            let annotations = |o: &Value| o["metadata"]["annotations"].clone();
            let changed = old.is_some_and(|old| {
                spec(old) != spec(&object)
                    || (kind.kind == "Deployment" && annotations(old) != annotations(&object))
            });
            object["metadata"]["generation"] = json!(previous.unwrap_or(1) + i64::from(changed));
        }
        if acting.operation == "Update" {
            let old = old.unwrap_or(&Value::Null);
            let fields = fields::changed(old, &object, target.scope(), kind.is_crd());
            managed::update(&mut entries, Entry { fields, ..acting });
        }
        managed::tidy(&mut entries, &object);
        if let Some(stored) = stored.as_ref().filter(|stored| stored.object == object) {
            if managed::same_ownership(&stored.managed, &entries) {
                return Ok((200, Self::render(stored, kind)));
            }
        }
        let resource_version = self.resource_version + 1;
        object["metadata"]["resourceVersion"] = json!(resource_version.to_string());
        let written = Stored {
            object,
            managed: entries,
        };
        let rendered = Self::render(&written, kind);
        if !dry_run {
            self.resource_version = resource_version;
            self.objects.insert(key, written);
        }
        Ok((if stored.is_some() { 200 } else { 201 }, rendered))
    }

    /// DELETE: removes the object (and, for a namespace, everything in it), then its dependents
    /// (`Background`, `Foreground`) or their owner references to it (`Orphan`). Answers a
    /// Success `Status`, or the object for custom resources.
    pub fn delete(
        &mut self,
        target: &Target,
        propagation: &str,
        dry_run: bool,
    ) -> Result<Value, Failure> {
        let kind = target.kind;
        let kept = ["default", "kube-system", "kube-public"].contains(&target.name.as_str());
        if kind.kind == "Namespace" && kept {
            return Err(status::namespace_kept(&target.name));
        }
        let key = Self::key(target);
        let stored = self
            .objects
            .get(&key)
            .ok_or_else(|| status::not_found(kind, &target.name))?;
        let uid = stored.object["metadata"]["uid"].clone();
        let answer = if kind.is_crd() {
            Self::render(stored, kind)
        } else {
            status::deleted(kind, &target.name, &uid)
        };
        if dry_run {
            return Ok(answer);
        }
        self.objects.remove(&key);
        if kind.kind == "Namespace" {
            self.objects
                .retain(|(_, _, namespace, _), _| *namespace != target.name);
        }
        self.resource_version += 1;
        let mut deleted = vec![uid];
        while let Some(owner) = deleted.pop() {
            let owned_by = |stored: &Stored| {
                let owners = stored.object["metadata"]["ownerReferences"].as_array();
                owners
                    .into_iter()
                    .flatten()
                    .any(|reference| reference["uid"] == owner)
            };
            let dependents: Vec<Key> = self
                .objects
                .iter()
                .filter(|(_, s)| owned_by(s))
                .map(|(k, _)| k.clone())
                .collect();
            for key in dependents {
                self.resource_version += 1;
                if propagation == "Orphan" {
                    if let Some(stored) = self.objects.get_mut(&key) {
                        orphan(stored, &owner, self.resource_version);
                    }
                } else if let Some(stored) = self.objects.remove(&key) {
                    deleted.push(stored.object["metadata"]["uid"].clone());
                }
            }
        }
        Ok(answer)
    }
}

/// Removes the owner references to `owner` from a dependent.
fn orphan(stored: &mut Stored, owner: &Value, resource_version: u64) {
    let Some(metadata) = stored
        .object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(references) = metadata
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        references.retain(|reference| reference["uid"] != *owner);
        if references.is_empty() {
            metadata.remove("ownerReferences");
        }
    }
    metadata.insert(
        "resourceVersion".into(),
        json!(resource_version.to_string()),
    );
    managed::tidy(&mut stored.managed, &stored.object);
}

/// The request body as an object of the target's kind and name: apiVersion, kind, name and
/// namespace checked against the URL, nulls and system metadata dropped.
fn request_object(target: &Target, mut body: Value) -> Result<Value, Failure> {
    drop_nulls(&mut body);
    let kind = target.kind;
    let Some(object) = body.as_object_mut() else {
        return Err(status::bad_request(
            "the body of the request must be a JSON or YAML object",
        ));
    };
    for (field, expected) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind.to_string()),
    ] {
        match object.get(field) {
            Some(given) if *given != *expected => {
                let given = given.as_str().unwrap_or_default();
                let message = format!(
                    "the {field} in the data ({given}) does not match the expected {field} \
                     ({expected})"
                );
                return Err(status::bad_request(&message));
            }
            _ => object.insert(field.to_string(), json!(expected)),
        };
    }
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(status::bad_request("metadata must be an object"));
    };
    match metadata.get("name").and_then(Value::as_str) {
        Some(name) if name != target.name => {
            let message = format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name
            );
            return Err(status::bad_request(&message));
        }
        _ => metadata.insert("name".into(), json!(target.name)),
    };
    match (
        metadata.get("namespace").and_then(Value::as_str),
        &target.namespace,
    ) {
        (Some(given), Some(namespace)) if given != namespace => {
            return Err(status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
            ));
        }
        (_, Some(namespace)) => metadata.insert("namespace".into(), json!(namespace)),
        (_, None) => metadata.remove("namespace"),
    };
    for field in SYSTEM_METADATA {
        metadata.remove(field);
    }
    Ok(body)
}

/// The object as the real server decodes it (see [`schema`]): a value of the wrong type is a
/// 400 (a 500 for a server-side apply, whose typed conversion fails); an unknown field is
/// dropped, or refused with a 400 under `fieldValidation=Strict` (always a 500 for an apply).
fn decode(
    target: &Target,
    mut object: Value,
    operation: &str,
    validation: FieldValidation,
) -> Result<Value, Failure> {
    let kind = target.kind;
    let apply = operation == "Apply";
    let unknown = if apply || validation == FieldValidation::Strict {
        Unknown::Keep
    } else {
        Unknown::Drop
    };
    let findings = schema::check(kind, &mut object, unknown);
    let gvk = format!("{}, Kind={}", kind.api_version(), kind.kind);
    if apply {
        let not_declared = findings
            .unknown
            .iter()
            .map(|f| format!("{f}: field not declared in schema"));
        if let Some(first) = findings
            .wrong_type
            .iter()
            .cloned()
            .chain(not_declared)
            .next()
        {
            let message = format!("failed to create typed patch object ({gvk}): {first}");
            let mut failure = status::failure(500, "", &message, None);
            if let Some(map) = failure.as_object_mut() {
                map.remove("reason");
            }
            return Err(failure);
        }
    }
    if let Some(first) = findings.wrong_type.first() {
        let message = format!(
            "{} in version \"{}\" cannot be handled as a {}: {first}",
            kind.kind, kind.version, kind.kind
        );
        return Err(status::bad_request(&message));
    }
    if validation == FieldValidation::Strict && !findings.unknown.is_empty() {
        let fields: Vec<String> = findings
            .unknown
            .iter()
            .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.')))
            .collect();
        let message = format!("strict decoding error: {}", fields.join(", "));
        return Err(status::bad_request(&message));
    }
    Ok(object)
}

/// A write carrying `metadata.resourceVersion` must name the stored one; one without it
/// (a PUT too, for every kind served) is unconditional, as on a real server.
fn check_precondition(target: &Target, body: &Value, old: &Value) -> Result<(), Failure> {
    match body["metadata"].get("resourceVersion") {
        Some(version) if *version != old["metadata"]["resourceVersion"] => {
            Err(status::stale(target.kind, &target.name))
        }
        _ => Ok(()),
    }
}

/// Server-side apply of `applied` by `acting` onto the live object (if any): ownership and
/// conflicts, then the merge, then the removal of the fields the manager gave up.
fn apply(
    target: &Target,
    applied: &Value,
    force: bool,
    live: Option<&Value>,
    entries: &mut Vec<Entry>,
    acting: Entry,
) -> Result<Value, Failure> {
    let crd = target.kind.is_crd();
    let fields = fields::field_set(applied, target.scope(), crd);
    let mut object = live.cloned().unwrap_or_else(|| json!({}));
    let removed = managed::apply(entries, Entry { fields, ..acting }, &object, applied, force);
    let removed = removed.map_err(|conflicts| managed::conflict_status(&conflicts))?;
    fields::merge(&mut object, applied, &mut Vec::new(), crd);
    for path in removed {
        fields::remove(&mut object, &path);
    }
    Ok(object)
}

/// Replaces the system metadata of a written object by the stored one's (a new uid and
/// creationTimestamp on create); the resourceVersion is set when it is stored.
fn system_metadata(object: &mut Value, old: Option<&Value>, now: &str) -> Result<(), Failure> {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(status::bad_request("metadata must be an object"));
    };
    for field in SYSTEM_METADATA {
        metadata.remove(field);
    }
    let kept = |field: &str| old.map(|old| old["metadata"][field].clone());
    metadata.insert("uid".into(), kept("uid").unwrap_or_else(|| json!(uid())));
    let created = kept("creationTimestamp").unwrap_or_else(|| json!(now));
    metadata.insert("creationTimestamp".into(), created);
    metadata.insert(
        "resourceVersion".into(),
        kept("resourceVersion").unwrap_or_default(),
    );
    Ok(())
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(target) = target {
        for (name, value) in patch {
            if value.is_null() {
                target.remove(name);
            } else {
                merge_patch(target.entry(name.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

fn with_status(mut object: Value, status: Option<&Value>) -> Value {
    if let Value::Object(map) = &mut object {
        match status {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    }
    object
}

/// Everything but metadata and status: what `metadata.generation` counts changes of.
fn spec(object: &Value) -> Map<String, Value> {
    let mut spec = object.as_object().cloned().unwrap_or_default();
    for field in ["apiVersion", "kind", "metadata", "status"] {
        spec.remove(field);
    }
    spec
}

/// A random UUID (version 4 layout).
fn uid() -> String {
    let hex = format!(
        "{:016x}{:016x}",
        RandomState::new().hash_one(1),
        RandomState::new().hash_one(2)
    );
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..]
    )
}

/// The current time in RFC 3339 at second precision, as Kubernetes writes timestamps.
pub(crate) fn now() -> String {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    rfc3339(since_epoch.map_or(0, |d| d.as_secs()))
}

fn rfc3339(seconds: u64) -> String {
    const FORMAT: &[BorrowedFormatItem<'_>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    i64::try_from(seconds)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc())
        .format(FORMAT)
        .expect("a UTC date and time has every component of the format")
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_767_225_599, "2025-12-31T23:59:59Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(super::rfc3339(seconds), expected);
        }
    }
}
