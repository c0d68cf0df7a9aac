//! The HTTP side: bearer auth, injected faults, the request log and the REST paths.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::extract::{Query, State as Extract};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::Value;

use crate::kinds::{self, Kind};
use crate::status::{self, Failure};
use crate::store::{Change, FieldValidation, State, Target};
use crate::{selector, Fault, Request};

/// The state the server and the handle share.
pub(crate) type Shared = Arc<Mutex<State>>;

/// Locks the state; a panic elsewhere (a failed test assertion) does not poison it for good.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every path goes to one handler, which routes by hand (the API's paths are few but irregular).
pub(crate) fn router(shared: Shared) -> Router {
    Router::new().fallback(handle).with_state(shared)
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
    let bearer = format!("Bearer {}", crate::FakeKube::TOKEN);
    let authorized = header(AUTHORIZATION) == Some(bearer.as_str());
    if authorized && method == Method::GET && uri.path() == crate::REQUESTS_PATH {
        // The fake's own debug endpoint (no real API server has it): not logged, no faults.
        let log = requests_json(&lock(&shared).requests);
        return ([(CONTENT_TYPE, "application/json")], log.to_string()).into_response();
    }
    let mut state = lock(&shared);
    let (code, answer, retry_after) = if !authorized {
        (401, status::for_code(401, None), None)
    } else if let Some(fault) = take_fault(&mut state.faults, &method, uri.path()) {
        let answer = status::for_code(fault.status, fault.retry_after_secs);
        (fault.status, answer, fault.retry_after_secs)
    } else {
        let agent = header(USER_AGENT).and_then(|a| a.split('/').next());
        let request = Incoming {
            method: &method,
            path: uri.path(),
            query: &query,
            content_type: header(CONTENT_TYPE).unwrap_or_default(),
            agent: agent.unwrap_or("unknown"),
            body: &body,
        };
        match serve(&mut state, &request) {
            Ok((code, answer)) => (code, answer, None),
            Err(failure) => (status::code(&failure), failure, None),
        }
    };
    state.requests.push(Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        field_manager: query.get("fieldManager").cloned(),
        content_type: header(CONTENT_TYPE).map(String::from),
        status: code,
    });
    drop(state);
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let json = [(CONTENT_TYPE, "application/json")];
    let mut response = (code, json, answer.to_string()).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The request log as `GET /fake/requests` answers it: a JSON array, oldest first, each
/// `{"method", "path", "query", "fieldManager", "contentType", "status"}` (null when absent).
fn requests_json(requests: &[Request]) -> Value {
    requests
        .iter()
        .map(|r| {
            serde_json::json!({
                "method": r.method, "path": r.path, "query": r.query,
                "fieldManager": r.field_manager, "contentType": r.content_type,
                "status": r.status,
            })
        })
        .collect()
}

/// Takes one use of the first fault a request matches.
fn take_fault(faults: &mut Vec<Fault>, method: &Method, path: &str) -> Option<Fault> {
    let index = faults.iter().position(|fault| {
        let method_matches = fault.method.as_ref();
        let method_matches = method_matches.is_none_or(|m| m.eq_ignore_ascii_case(method.as_str()));
        fault.times > 0 && method_matches && path.contains(&fault.path_contains)
    })?;
    faults[index].times -= 1;
    let fault = faults[index].clone();
    if fault.times == 0 {
        faults.remove(index);
    }
    Some(fault)
}

/// What `serve` needs of a request.
struct Incoming<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a HashMap<String, String>,
    content_type: &'a str,
    /// The user agent's product: the field manager of writes that name none (as real).
    agent: &'a str,
    body: &'a [u8],
}

impl Incoming<'_> {
    fn query(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }
}

fn serve(state: &mut State, request: &Incoming) -> Result<(u16, Value), Failure> {
    let segments: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Ok((200, kinds::version())),
        ["api"] => return Ok((200, kinds::core_versions(&state.address))),
        ["apis"] => return Ok((200, kinds::group_list())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(status::no_such_path()),
    };
    if rest.is_empty() {
        let resources = kinds::resource_list(group, version).ok_or_else(status::no_such_path)?;
        return Ok((200, resources));
    }
    let mut target = target(group, version, rest).ok_or_else(status::no_such_path)?;
    let dry_run = request.query("dryRun") == Some("All");
    let manager = request.query("fieldManager").unwrap_or(request.agent);
    let validation = match request.query("fieldValidation") {
        Some("Strict") => FieldValidation::Strict,
        _ => FieldValidation::Drop,
    };
    let collection = target.name.is_empty();
    match request.method.as_str() {
        "GET" if collection => {
            let selector = selector::parse(request.query("labelSelector").unwrap_or_default());
            let selector = selector.map_err(|message| status::bad_request(&message))?;
            let fields = selector::parse_fields(request.query("fieldSelector").unwrap_or_default());
            let fields = fields.map_err(|message| status::bad_request(&message))?;
            let mut list = state.list(target.kind, target.namespace.as_deref(), &selector);
            if let Some(items) = list["items"].as_array_mut() {
                items.retain(|item| selector::fields_match(&fields, item));
            }
            Ok((200, list))
        }
        "GET" => Ok((200, state.get(&target)?)),
        "POST" if collection && (target.namespace.is_some() || !target.kind.namespaced) => {
            let body = json(request.body)?;
            target.name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            state.write(&target, manager, Change::Create(body), validation, dry_run)
        }
        "PUT" if !collection => state.write(
            &target,
            manager,
            Change::Replace(json(request.body)?),
            validation,
            dry_run,
        ),
        "PATCH" if !collection => {
            state.write(&target, manager, patch(request)?, validation, dry_run)
        }
        "DELETE" if !collection && !target.status => {
            let options: Value = serde_json::from_slice(request.body).unwrap_or_default();
            let propagation = options["propagationPolicy"].as_str();
            let propagation = propagation.or(request.query("propagationPolicy"));
            let dry_run_all = options["dryRun"]
                .as_array()
                .is_some_and(|d| d.contains(&"All".into()));
            let deleted = state.delete(
                &target,
                propagation.unwrap_or("Background"),
                dry_run || dry_run_all,
            )?;
            Ok((200, deleted))
        }
        _ => Err(status::method_not_allowed()),
    }
}

/// The object (or, with an empty name, the collection) a resource path names, if served.
fn target(group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let (namespace, plural, tail) = match rest {
        ["namespaces", namespace, plural, tail @ ..] if *plural != "status" => {
            (Some(*namespace), *plural, tail)
        }
        [plural, tail @ ..] => (None, *plural, tail),
        [] => return None,
    };
    let kind = Kind::by_plural(group, version, plural)?;
    let (name, status) = match tail {
        [] => ("", false),
        [name] => (*name, false),
        [name, "status"] if kind.status => (*name, true),
        _ => return None,
    };
    // A namespaced kind has no cluster-wide paths but its list of all namespaces.
    let scoped = namespace.is_some() == kind.namespaced || kind.namespaced && name.is_empty();
    scoped.then(|| Target {
        kind,
        namespace: namespace.map(String::from),
        name: name.to_string(),
        status,
    })
}

/// The change a PATCH asks for, by its content type.
fn patch(request: &Incoming) -> Result<Change, Failure> {
    match request
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
    {
        "application/merge-patch+json" => Ok(Change::MergePatch(json(request.body)?)),
        "application/strategic-merge-patch+json" => Ok(Change::StrategicMerge(json(request.body)?)),
        "application/json-patch+json" => Ok(Change::JsonPatch(json(request.body)?)),
        "application/apply-patch+yaml" => {
            if request.query("fieldManager").is_none_or(str::is_empty) {
                return Err(status::field_manager_required());
            }
            // The API server's own reading of YAML (kube sends JSON, which is YAML too), not
            // a repository's file: serde-saphyr with its default budget.
            let object = serde_saphyr::from_slice(request.body);
            let object = object.map_err(|e| status::bad_request(&e.to_string()))?;
            let force = request.query("force") == Some("true");
            Ok(Change::Apply { object, force })
        }
        _ => Err(status::unsupported_media_type()),
    }
}

fn json(body: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(body).map_err(|e| status::bad_request(&e.to_string()))
}
