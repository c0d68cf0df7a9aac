//! Google's error bodies, `{"error": {"code", "message", "status", "details"}}`, with the
//! messages the real Cloud Run Admin API v2 sends, and the OAuth2 errors of the token endpoints.

use serde_json::{json, Value};

/// A refused request: its HTTP code, its body, and the `Retry-After` seconds if any.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u16,
    pub(crate) body: Value,
    pub(crate) retry_after_secs: Option<u64>,
}

impl Failure {
    fn google(code: u16, status: &str, message: &str) -> Failure {
        let error = json!({"code": code, "message": message, "status": status});
        Failure {
            code,
            body: json!({ "error": error }),
            retry_after_secs: None,
        }
    }

    fn with_details(mut self, details: Value) -> Failure {
        self.body["error"]["details"] = details;
        self
    }
}

fn error_info(reason: &str, metadata: Value) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
           "domain": "googleapis.com", "metadata": metadata})
}

/// 400 `INVALID_ARGUMENT` for one field of a request (`CreateServiceRequest`,
/// `UpdateServiceRequest`), e.g. `service.traffic[1].revision`, as the v2 API words its own
/// checks: "Violation in CreateServiceRequest.service_id: ...", the violation's `field` being
/// "Violation in CreateServiceRequest.service_id" (recorded answers, e.g. "ports should contain
/// 0 or 1 port.").
pub(crate) fn invalid(request: &str, field: &str, description: &str) -> Failure {
    let field = format!("Violation in {request}.{field}");
    violation(&format!("{field}: {description}"), &field, description)
}

/// 400 `INVALID_ARGUMENT` for a value the platform refuses, as Cloud Run words those checks:
/// "template.containers[0].env: The following reserved env names were provided: PORT. ...",
/// the violation's `field` being the path.
pub(crate) fn field_error(field: &str, description: &str) -> Failure {
    violation(&format!("{field}: {description}"), field, description)
}

fn violation(message: &str, field: &str, description: &str) -> Failure {
    let violation = json!({"field": field, "description": description});
    Failure::google(400, "INVALID_ARGUMENT", message).with_details(json!([{
        "@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]
    }]))
}

/// 400 of Google's JSON parser for a value of the wrong kind, such as an enum name or number
/// that does not exist: "Invalid value at 'service.ingress'
/// (type.googleapis.com/google.cloud.run.v2.IngressTraffic), 9".
pub(crate) fn invalid_value(at: &str, type_name: &str, value: &Value) -> Failure {
    let type_name = match type_name {
        "Map" | "ListValue" => type_name.to_string(),
        _ => format!("type.googleapis.com/{type_name}"),
    };
    let message = format!("Invalid value at '{at}' ({type_name}), {value}");
    bad_request(at, &message)
}

/// 400 for a field the JSON of a resource does not have, as Google's JSON parser refuses it.
pub(crate) fn unknown_field(name: &str, at: &str) -> Failure {
    let message = format!(
        "Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."
    );
    bad_request(at, &message)
}

/// 400 of Google's JSON parser: a `BadRequest` detail whose violation names the field and
/// repeats the message.
pub(crate) fn bad_request(field: &str, message: &str) -> Failure {
    violation(message, field, message)
}

/// 404 for a `kind` ("SERVICE", "REVISION", "OPERATION") of resource that does not exist.
pub(crate) fn not_found(kind: &str, resource: &str, project: &str, location: &str) -> Failure {
    let message = format!(
        "Resource '{resource}' of kind '{kind}' in region '{location}' in project '{project}' \
         does not exist."
    );
    Failure::google(404, "NOT_FOUND", &message)
}

/// 404 for a path no method serves.
pub(crate) fn no_such_method() -> Failure {
    Failure::google(404, "NOT_FOUND", "Method not found.")
}

/// 409 for a create of a service that exists.
pub(crate) fn already_exists(service: &str) -> Failure {
    let message = format!("Resource '{service}' already exists.");
    Failure::google(409, "ALREADY_EXISTS", &message)
}

/// 409 for a revision name reused with another template.
pub(crate) fn revision_conflict(revision: &str) -> Failure {
    let message =
        format!("Revision named '{revision}' with different configuration already exists.");
    Failure::google(409, "ALREADY_EXISTS", &message)
}

/// 400 for a delete of a revision that serves traffic.
pub(crate) fn serving_revision(revision: &str) -> Failure {
    let message = format!("Revision '{revision}' is serving traffic and cannot be deleted.");
    Failure::google(400, "FAILED_PRECONDITION", &message)
}

/// 409 for a write whose `etag` is not the stored one.
pub(crate) fn etag_mismatch(sent: &str, stored: &str) -> Failure {
    let message = format!(
        "Etag mismatch: the etag '{sent}' was specified but the current etag is '{stored}'."
    );
    Failure::google(409, "ABORTED", &message)
}

/// 409 for a write while the previous write's operation is still running.
pub(crate) fn busy(service: &str, generation: u64) -> Failure {
    let message = format!(
        "Conflict for resource '{service}': version '{}' was specified but current version is \
         '{generation}'.",
        generation.saturating_sub(1)
    );
    Failure::google(409, "ABORTED", &message)
}

/// 401 for a request without a token the fake issued (for this API).
pub(crate) fn unauthenticated() -> Failure {
    let message = "Request had invalid authentication credentials. Expected OAuth 2 access \
                   token, login cookie or other valid authentication credential. See \
                   https://developers.google.com/identity/sign-in/web/devconsole-project.";
    let info = error_info(
        "ACCESS_TOKEN_TYPE_UNSUPPORTED",
        json!({"service": "run.googleapis.com"}),
    );
    Failure::google(401, "UNAUTHENTICATED", message).with_details(json!([info]))
}

/// 403 for a caller without `permission` on `resource` (`projects/P/locations/L/...`).
pub(crate) fn permission_denied(permission: &str, resource: &str) -> Failure {
    let message = format!(
        "Permission '{permission}' denied on resource '{resource}' (or resource may not exist)."
    );
    let metadata = json!({"permission": permission, "resource": resource});
    let info = error_info("IAM_PERMISSION_DENIED", metadata);
    Failure::google(403, "PERMISSION_DENIED", &message).with_details(json!([info]))
}

/// 429 for the write quota, with `Retry-After` and a `RetryInfo` when `retry_after_secs`.
pub(crate) fn quota_exceeded(retry_after_secs: Option<u64>) -> Failure {
    let message = "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per \
                   minute per region' of service 'run.googleapis.com' for consumer \
                   'project_number:123'.";
    let metadata = json!({"service": "run.googleapis.com", "consumer": "projects/123",
        "quota_metric": "run.googleapis.com/write_requests",
        "quota_limit": "WriteRequestsPerMinutePerProject"});
    let mut details = vec![error_info("RATE_LIMIT_EXCEEDED", metadata)];
    if let Some(seconds) = retry_after_secs {
        details.push(json!({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": format!("{seconds}s")}));
    }
    let mut failure =
        Failure::google(429, "RESOURCE_EXHAUSTED", message).with_details(details.into());
    failure.retry_after_secs = retry_after_secs;
    failure
}

/// An injected fault's answer: the failure a real server answers with that code.
pub(crate) fn injected(
    code: u16,
    permission: &str,
    resource: &str,
    retry_after_secs: Option<u64>,
) -> Failure {
    let mut failure = match code {
        400 => Failure::google(
            400,
            "INVALID_ARGUMENT",
            "Request contains an invalid argument.",
        ),
        401 => unauthenticated(),
        403 => permission_denied(permission, resource),
        404 => Failure::google(404, "NOT_FOUND", "Requested entity was not found."),
        409 => Failure::google(409, "ABORTED", "The operation was aborted."),
        429 => quota_exceeded(retry_after_secs),
        500 => Failure::google(500, "INTERNAL", "Internal error encountered."),
        503 => Failure::google(503, "UNAVAILABLE", "The service is currently unavailable."),
        _ => Failure::google(code, "UNKNOWN", "Unknown error."),
    };
    failure.retry_after_secs = retry_after_secs;
    failure
}

/// 400 of Google's OAuth2 and STS endpoints: `{"error", "error_description"}`.
pub(crate) fn oauth(error: &str, description: &str) -> Failure {
    Failure {
        code: 400,
        body: json!({"error": error, "error_description": description}),
        retry_after_secs: None,
    }
}

/// 400 `INVALID_ARGUMENT` of the IAM credentials API.
pub(crate) fn iam_invalid(message: &str) -> Failure {
    Failure::google(400, "INVALID_ARGUMENT", message)
}

/// 403 of the metadata server without `Metadata-Flavor: Google`: text, as the real one.
pub(crate) fn metadata_flavor_missing() -> Failure {
    let text = "Missing required header \"Metadata-Flavor\". Your client does not have \
                permission to get URL from this server.";
    Failure {
        code: 403,
        body: Value::String(text.to_string()),
        retry_after_secs: None,
    }
}
