//! `Status` objects, as the real API server answers failures (and some deletions).

use serde_json::{json, Map, Value};

use crate::kinds::Kind;

/// A failed request: the HTTP code and its `Status` body.
pub(crate) type Failure = Value;

/// A `Status` with `status: Failure`.
pub(crate) fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Failure {
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

/// The HTTP code of a `Status`.
pub(crate) fn code(status: &Value) -> u16 {
    status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500)
}

/// `details` naming an object; like the real server, without empty fields (the core group).
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut details = Map::new();
    for (field, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            details.insert(field.to_string(), json!(value));
        }
    }
    Value::Object(details)
}

fn resource_details(kind: &Kind, name: &str) -> Value {
    details(name, kind.group, kind.plural)
}

/// 200 `status: Success` of a DELETE.
pub(crate) fn deleted(kind: &Kind, name: &str, uid: &Value) -> Value {
    let mut details = resource_details(kind, name);
    details["uid"] = uid.clone();
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
           "details": details})
}

/// 404 `deployments.apps "x" not found`.
pub(crate) fn not_found(kind: &Kind, name: &str) -> Failure {
    let message = format!("{} \"{name}\" not found", kind.qualified_resource());
    failure(
        404,
        "NotFound",
        &message,
        Some(resource_details(kind, name)),
    )
}

/// 404 for a namespaced object in a namespace that does not exist.
pub(crate) fn namespace_not_found(namespace: &str) -> Failure {
    let message = format!("namespaces \"{namespace}\" not found");
    failure(
        404,
        "NotFound",
        &message,
        Some(json!({"name": namespace, "kind": "namespaces"})),
    )
}

/// 404 for a path the server does not serve.
pub(crate) fn no_such_path() -> Failure {
    let message = "the server could not find the requested resource";
    failure(404, "NotFound", message, Some(json!({})))
}

/// 409 `deployments.apps "x" already exists`.
pub(crate) fn already_exists(kind: &Kind, name: &str) -> Failure {
    let message = format!("{} \"{name}\" already exists", kind.qualified_resource());
    failure(
        409,
        "AlreadyExists",
        &message,
        Some(resource_details(kind, name)),
    )
}

/// 409 for a write carrying a stale `metadata.resourceVersion`.
pub(crate) fn stale(kind: &Kind, name: &str) -> Failure {
    let message = format!(
        "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
         please apply your changes to the latest version and try again",
        kind.qualified_resource()
    );
    failure(
        409,
        "Conflict",
        &message,
        Some(resource_details(kind, name)),
    )
}

/// 400 BadRequest.
pub(crate) fn bad_request(message: &str) -> Failure {
    failure(400, "BadRequest", message, None)
}

/// 403 for deleting a namespace the server keeps (`default`, `kube-system`, `kube-public`),
/// as the real server's NamespaceLifecycle admission refuses it.
pub(crate) fn namespace_kept(name: &str) -> Failure {
    let message = format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted");
    let details = json!({"name": name, "kind": "namespaces"});
    failure(403, "Forbidden", &message, Some(details))
}

/// 405 for a method the path does not serve.
pub(crate) fn method_not_allowed() -> Failure {
    let message = "the server does not allow this method on the requested resource";
    failure(405, "MethodNotAllowed", message, None)
}

/// 415 for a PATCH in no format the server reads (or a strategic merge patch of a custom
/// resource, which has no patch strategies).
pub(crate) fn unsupported_media_type() -> Failure {
    let message = "the body of the request was in an unknown format - accepted media types \
        include: application/json-patch+json, application/merge-patch+json, \
        application/apply-patch+yaml, application/strategic-merge-patch+json";
    failure(415, "UnsupportedMediaType", message, None)
}

/// 422 for an apply without a `fieldManager`, as the real server validates `PatchOptions`.
pub(crate) fn field_manager_required() -> Failure {
    let error = FieldError {
        field: "fieldManager".to_string(),
        detail: "Required value: is required for apply patch".to_string(),
    };
    invalid("PatchOptions", "meta.k8s.io", "", &[error])
}

/// One field error of an `Invalid` status.
pub(crate) struct FieldError {
    pub field: String,
    /// "Required value" or "Invalid value: ...".
    pub detail: String,
}

impl FieldError {
    /// `<field>: Required value`.
    pub fn required(field: &str) -> Self {
        FieldError {
            field: field.to_string(),
            detail: "Required value".to_string(),
        }
    }

    /// `<field>: Invalid value: <detail>`.
    pub fn invalid(field: &str, detail: String) -> Self {
        FieldError {
            field: field.to_string(),
            detail: format!("Invalid value: {detail}"),
        }
    }
}

/// 422 `Deployment.apps "x" is invalid: spec.selector: Required value`, one cause per error.
pub(crate) fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Failure {
    let text: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.detail))
        .collect();
    let text = match text.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| {
            let reason = if e.detail.starts_with("Required") {
                "FieldValueRequired"
            } else {
                "FieldValueInvalid"
            };
            json!({"reason": reason, "message": e.detail, "field": e.field})
        })
        .collect();
    let message = format!("{qualified} \"{name}\" is invalid: {text}");
    let mut details = details(name, group, kind);
    details["causes"] = Value::Array(causes);
    failure(422, "Invalid", &message, Some(details))
}

/// The `Status` of a bare HTTP code: 401 Unauthorized, or an injected fault such as
/// 429 TooManyRequests (with `retryAfterSeconds`), 500 InternalError or 503.
pub(crate) fn for_code(code: u16, retry_after: Option<u64>) -> Failure {
    let (reason, message) = match code {
        401 => ("Unauthorized", "Unauthorized"),
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        500 => (
            "InternalError",
            "Internal error occurred: injected by the fake",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted",
        ),
        _ => ("", "injected fault"),
    };
    let details = retry_after.map(|secs| json!({"retryAfterSeconds": secs}));
    failure(code, reason, message, details)
}
