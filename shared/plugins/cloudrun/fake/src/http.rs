//! The HTTP side: routing, bearer auth, injected faults and the request log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::extract::{Query, State as Extract};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use crate::auth::{Auth, Fields};
use crate::error::{self, Failure};
use crate::resource::ServiceName;
use crate::run::{Delete, Page, Platform, Write, WriteMode};
use crate::schema;
use crate::{Fault, Request, TokenKind, REQUESTS_PATH};

/// Everything the server and the handle share.
pub(crate) struct State {
    /// "http://127.0.0.1:PORT".
    pub(crate) url: String,
    pub(crate) auth: Auth,
    pub(crate) platform: Platform,
    pub(crate) faults: Vec<Fault>,
    pub(crate) requests: Vec<Request>,
}

pub(crate) type Shared = Arc<Mutex<State>>;

/// Locks the state; a panic elsewhere (a failed test assertion) does not poison it for good.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every path goes to one handler, which routes by hand (Google's paths have `:verb`s).
pub(crate) fn router(shared: Shared) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// What `serve` needs of a request.
struct Incoming<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a HashMap<String, String>,
    bearer: Option<TokenKind>,
    /// The `Metadata-Flavor` header.
    flavor: Option<&'a str>,
    body: &'a [u8],
}

async fn handle(
    Extract(shared): Extract<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let query: HashMap<String, String> = Query::try_from_uri(&uri).map(|q| q.0).unwrap_or_default();
    let mut state = lock(&shared);
    let bearer = state.auth.kind_of(header(AUTHORIZATION.as_str()));
    if method == Method::GET && uri.path() == REQUESTS_PATH && bearer.is_some() {
        // The fake's own debug endpoint: not logged, no faults.
        return respond(200, requests_json(&state.requests), None);
    }
    let request = Incoming {
        method: &method,
        path: uri.path(),
        query: &query,
        bearer,
        flavor: header("metadata-flavor"),
        body: &body,
    };
    let (code, answer, retry_after) = match serve(&mut state, &request) {
        Ok(answer) => (200, answer, None),
        Err(failure) => (failure.code, failure.body, failure.retry_after_secs),
    };
    state.requests.push(Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        body: logged_body(&body),
        authorization_kind: bearer,
        status: code,
    });
    drop(state);
    let mut response = respond(code, answer, retry_after);
    if uri.path().starts_with("/computeMetadata/") || uri.path() == "/" {
        let flavor = HeaderValue::from_static("Google");
        response.headers_mut().insert("metadata-flavor", flavor);
    }
    response
}

/// JSON, or text for a string (the metadata server's answers).
fn respond(code: u16, answer: Value, retry_after_secs: Option<u64>) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match answer {
        Value::String(text) => (code, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text),
        json => (
            code,
            [(CONTENT_TYPE, "application/json; charset=UTF-8")],
            json.to_string(),
        ),
    }
    .into_response();
    if let Some(seconds) = retry_after_secs {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

fn serve(state: &mut State, request: &Incoming) -> Result<Value, Failure> {
    let segments: Vec<&str> = request.path.trim_start_matches('/').split('/').collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("POST", ["token"]) => {
            let token_url = format!("{}/token", state.url);
            state.auth.jwt_grant(&fields(request.body), &token_url)
        }
        ("POST", ["v1", "token"]) => state.auth.exchange(&fields(request.body)),
        ("POST", ["v1", "projects", "-", "serviceAccounts", call]) => {
            let email = call.strip_suffix(":generateAccessToken");
            let email = percent_decode(email.ok_or_else(error::no_such_method)?);
            let body = json_body(request.body)?;
            state.auth.impersonate(request.bearer, &email, &body)
        }
        // The metadata server's root, which Google's auth library pings to find it.
        ("GET", [""]) => Ok(json!("computeMetadata/\n")),
        ("GET", ["computeMetadata", "v1", path @ ..]) => {
            let recursive = request.query.get("recursive").is_some_and(|r| r == "true");
            state.auth.metadata(request.flavor, path, recursive)
        }
        (_, ["v2", "projects", project, "locations", location, rest @ ..]) => {
            let name = ServiceName {
                project: project.to_string(),
                location: location.to_string(),
                service: String::new(),
            };
            cloud_run(state, request, name, rest)
        }
        _ => Err(error::no_such_method()),
    }
}

/// The Cloud Run Admin API v2, under `/v2/projects/{p}/locations/{l}/`. Its answers name
/// enums by name, or by number for a client that asks for `$alt=json;enum-encoding=int`.
fn cloud_run(
    state: &mut State,
    request: &Incoming,
    mut name: ServiceName,
    rest: &[&str],
) -> Result<Value, Failure> {
    let caller = match request.bearer {
        Some(kind) if kind != TokenKind::Federated => state.auth.account(kind),
        _ => return Err(error::unauthenticated()),
    };
    let query = |key: &str| request.query.get(key).map_or("", String::as_str);
    name.service = match rest {
        ["services"] => query("serviceId").to_string(),
        ["services", service, ..] => service.to_string(),
        _ => String::new(),
    };
    let method = request.method.as_str();
    if let Some(fault) = take_fault(&mut state.faults, request.method, request.path) {
        let permission = match (method, rest) {
            ("POST", _) => "run.services.create",
            ("PATCH", _) => "run.services.update",
            ("DELETE", _) => "run.services.delete",
            (_, ["services"]) => "run.services.list",
            (_, ["services", _, "revisions"]) => "run.revisions.list",
            (_, ["services", _, "revisions", _]) => "run.revisions.get",
            (_, ["operations", ..]) => "run.operations.get",
            _ => "run.services.get",
        };
        let mut resource = request.path.trim_start_matches("/v2/").to_string();
        if method == "POST" && rest == ["services"] {
            resource = format!("{resource}/{}", name.service);
        }
        let retry_after = fault.retry_after_secs;
        return Err(error::injected(
            fault.status,
            permission,
            &resource,
            retry_after,
        ));
    }
    let platform = &mut state.platform;
    platform.settle();
    let validate_only = query("validateOnly") == "true";
    let page_size = query("pageSize").parse().unwrap_or(0);
    let page = Page {
        size: page_size,
        token: query("pageToken"),
    };
    let (answer, message) = match (method, rest) {
        ("GET", ["services"]) => (platform.list_services(&name, &page)?, Answer::Services),
        ("GET", ["services", _]) => (platform.service(&name)?, Answer::Service),
        ("POST", ["services"]) if name.service.is_empty() => {
            let request = "CreateServiceRequest";
            return Err(error::invalid(
                request,
                "service_id",
                "required field not present.",
            ));
        }
        ("POST", ["services"]) => {
            let write = Write {
                mode: WriteMode::Create,
                update_mask: None,
                validate_only,
                caller: &caller,
                at_once: false,
            };
            let body = json_body(request.body)?;
            (platform.write(&name, &body, &write)?, Answer::Operation)
        }
        ("PATCH", ["services", _]) => {
            let mode = match query("allowMissing") {
                "true" => WriteMode::CreateOrUpdate,
                _ => WriteMode::Update,
            };
            let mask = request.query.get("updateMask").filter(|m| !m.is_empty());
            let write = Write {
                mode,
                update_mask: mask.map(String::as_str),
                validate_only,
                caller: &caller,
                at_once: false,
            };
            let body = json_body(request.body)?;
            (platform.write(&name, &body, &write)?, Answer::Operation)
        }
        ("DELETE", ["services", _]) => {
            let delete = Delete {
                etag: query("etag"),
                validate_only,
            };
            (platform.delete(&name, &delete)?, Answer::Operation)
        }
        ("GET", ["services", _, "revisions"]) => {
            (platform.list_revisions(&name, &page)?, Answer::Revisions)
        }
        ("GET", ["services", _, "revisions", revision]) => {
            (platform.revision(&name, revision)?, Answer::Revision)
        }
        ("GET", ["operations", id]) => {
            let operation = format!("{}/operations/{id}", name.parent());
            (platform.poll(&name, &operation)?, Answer::Operation)
        }
        _ => return Err(error::no_such_method()),
    };
    let mut answer = answer;
    if query("$alt") == "json;enum-encoding=int" {
        message.enums_as_numbers(&mut answer);
    }
    Ok(answer)
}

/// What a Cloud Run answer holds, for writing its enums as numbers.
#[derive(Clone, Copy)]
enum Answer {
    Service,
    Services,
    Revision,
    Revisions,
    Operation,
}

impl Answer {
    fn enums_as_numbers(self, answer: &mut Value) {
        let (list, message) = match self {
            Answer::Service => (None, schema::SERVICE),
            Answer::Services => (Some("services"), schema::SERVICE),
            Answer::Revision => (None, schema::REVISION),
            Answer::Revisions => (Some("revisions"), schema::REVISION),
            Answer::Operation => {
                for any in ["metadata", "response"] {
                    if let Some(any) = answer.get_mut(any) {
                        schema::any_enums_as_numbers(any);
                    }
                }
                return;
            }
        };
        match list {
            None => schema::enums_as_numbers(answer, message),
            Some(field) => {
                for item in answer[field].as_array_mut().into_iter().flatten() {
                    schema::enums_as_numbers(item, message);
                }
            }
        }
    }
}

/// Takes one use of the first fault a request matches.
fn take_fault(faults: &mut Vec<Fault>, method: &Method, path: &str) -> Option<Fault> {
    let index = faults.iter().position(|fault| {
        let method_matches = fault.method.as_ref().is_none_or(|m| m == method);
        fault.times > 0 && method_matches && path.contains(&fault.path_contains)
    })?;
    faults[index].times -= 1;
    let fault = faults[index].clone();
    if fault.times == 0 {
        faults.remove(index);
    }
    Some(fault)
}

fn json_body(body: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(body).map_err(|e| {
        let message = format!("Invalid JSON payload received. {e}");
        error::bad_request("", &message)
    })
}

/// A form body's fields, or a JSON object's string fields (STS takes both).
fn fields(body: &[u8]) -> Fields {
    if let Ok(Value::Object(object)) = serde_json::from_slice(body) {
        let strings = object
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?.to_string())));
        return strings.collect();
    }
    form_urlencoded::parse(body)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect()
}

/// Decodes `%XX` escapes (a malformed one stays as it is).
pub(crate) fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The body as the log keeps it: its JSON, or a form's fields as a JSON object.
fn logged_body(body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    let json = serde_json::from_slice(body).ok();
    json.or_else(|| serde_json::to_value(fields(body)).ok())
}

/// The request log as `GET /fake/requests` answers it.
fn requests_json(requests: &[Request]) -> Value {
    let requests = requests.iter().map(|r| {
        json!({"method": r.method, "path": r.path, "query": r.query, "body": r.body,
               "authorizationKind": r.authorization_kind.map(TokenKind::as_str),
               "status": r.status})
    });
    requests.collect()
}
