//! The plan preview routes through the whole router (`oneshot`, no socket) on a real SQLite
//! store: who may ask for and read a preview, the shapes answered, and the refusals.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use gannet_domain::callers::{Caller, CallerError, Callers, Credentials, Role};
use gannet_domain::duration::Millis;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::http::{router, Access, Hosts};
use crate::test_support::{git, rig, Live};

/// Each token is its role's name; the caller is called after it.
struct RoleTokens;

impl Callers for RoleTokens {
    fn identify(&self, credentials: &Credentials<'_>) -> Result<Caller, CallerError> {
        let token = credentials.bearer.ok_or_else(|| CallerError::Missing {
            how: "send Authorization: Bearer <token>".into(),
        })?;
        let role = Role::ALL
            .into_iter()
            .find(|r| r.as_str() == token)
            .ok_or(CallerError::Unknown)?;
        Ok(Caller {
            name: format!("{token}-person"),
            role,
        })
    }
}

struct Api {
    app: axum::Router,
    _repo: tempfile::TempDir,
    _cache: tempfile::TempDir,
}

impl Api {
    /// The router of a controller watching `main` of one repository, `demo`.
    fn new() -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        let rig = rig(repo.path(), Millis(1_000_000), Live::InSync);
        let access = Access {
            callers: Arc::new(RoleTokens),
            hosts: Hosts::Any,
        };
        Self {
            app: router(rig.controller, access, None),
            _repo: repo,
            _cache: rig.cache,
        }
    }

    /// Sends `method path` with `body` as the caller whose token is `token`.
    async fn call(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "gannet.test");
        if let Some(token) = token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        }
        .expect("request");
        let res = self.app.clone().oneshot(req).await.expect("answered");
        let status = res.status().as_u16();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .expect("body");
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, value)
    }

    async fn post(&self, token: &str, body: Value) -> (u16, Value) {
        self.call(Some(token), "POST", "/api/v1/plan-previews", Some(body))
            .await
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        self.call(Some(token), "GET", path, None).await
    }
}

const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

fn error(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_deployer_or_an_admin_asks_for_a_preview_and_the_same_head_answers_the_same() {
    let api = Api::new();
    let (status, body) = api.post("deployer", json!({ "head": HEAD })).await;
    assert_eq!(status, 202, "{body}");
    let preview = &body["preview"];
    assert_eq!(preview["repo"], "demo", "{body}");
    assert_eq!(preview["head"], HEAD, "{body}");
    assert_eq!(preview["base_ref"], "main", "{body}");
    assert_eq!(preview["status"], "QUEUED", "{body}");
    assert_eq!(preview["result"], "PENDING", "{body}");
    assert_eq!(preview["author"], "deployer-person", "{body}");
    assert_eq!(preview["pr"], Value::Null, "{body}");
    let id = preview["id"].as_str().expect("an id").to_owned();

    let again = json!({ "head": HEAD, "repo": "demo", "base": "main" });
    let (status, body) = api.post("admin", again).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["preview"]["id"], id.as_str(), "{body}");

    // Any caller reads it, alone and in the lists.
    let (status, body) = api
        .get("viewer", &format!("/api/v1/plan-previews/{id}"))
        .await;
    assert_eq!(
        (status, body["preview"]["id"].as_str()),
        (200, Some(id.as_str())),
        "{body}"
    );
    for path in [
        "/api/v1/plan-previews",
        "/api/v1/plan-previews?repo=demo",
        "/api/v1/plan-previews?repo=demo&limit=1",
    ] {
        let (status, body) = api.get("viewer", path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let ids: Vec<&str> = body["previews"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|p| p["id"].as_str())
            .collect();
        assert_eq!(ids, [id.as_str()], "{path}");
    }
    // An API preview belongs to no pull request.
    let (status, body) = api
        .get("viewer", "/api/v1/plan-previews?repo=demo&pr=7")
        .await;
    assert_eq!(
        (status, body["previews"].clone()),
        (200, json!([])),
        "{body}"
    );
}

#[tokio::test]
async fn who_may_do_what() {
    let api = Api::new();
    let body = || Some(json!({ "head": HEAD }));
    let cases = [
        (None, "POST", 401, "no token"),
        (Some("nobody"), "POST", 401, "not valid"),
        (
            Some("viewer"),
            "POST",
            403,
            "needs the role deployer or admin",
        ),
        (
            Some("approver"),
            "POST",
            403,
            "approver-person has the role approver",
        ),
        (None, "GET", 401, "no token"),
    ];
    for (token, method, want, says) in cases {
        let payload = (method == "POST").then(body).flatten();
        let (status, answer) = api
            .call(token, method, "/api/v1/plan-previews", payload)
            .await;
        assert_eq!(status, want, "{token:?} {method}: {answer}");
        assert!(
            error(&answer).contains(says),
            "{token:?} {method}: {answer}"
        );
    }
    // A viewer naming another base is refused for the role, not told the watched branch.
    let (status, answer) = api
        .post("viewer", json!({ "head": HEAD, "base": "develop" }))
        .await;
    assert_eq!(status, 403, "{answer}");
    assert!(!error(&answer).contains("main"), "{answer}");
    // Nothing was queued by the refused callers.
    let (_, list) = api.get("viewer", "/api/v1/plan-previews").await;
    assert_eq!(list["previews"], json!([]), "{list}");
}

#[tokio::test]
async fn bad_requests_are_refused_by_name_and_nothing_is_queued() {
    let api = Api::new();
    let cases = [
        (json!({ "head": "main" }), 400, "head"),
        (json!({ "head": "abc123" }), 400, "head"),
        (
            json!({ "head": HEAD, "base": "develop" }),
            400,
            "watches branch main",
        ),
        (
            json!({ "head": HEAD, "repo": "other" }),
            404,
            "repository other",
        ),
        (
            json!({ "head": HEAD, "repo": "x".repeat(300) }),
            400,
            "repo: too long",
        ),
        (json!({ "head": HEAD, "branch": "main" }), 422, "branch"),
    ];
    for (body, want, says) in cases {
        let (status, answer) = api.post("deployer", body.clone()).await;
        assert_eq!(status, want, "{body}: {answer}");
        assert!(error(&answer).contains(says), "{body}: {answer}");
    }
    let (_, list) = api.get("viewer", "/api/v1/plan-previews").await;
    assert_eq!(list["previews"], json!([]), "{list}");

    for (path, want, says) in [
        (
            "/api/v1/plan-previews/p-0000",
            404,
            "no plan preview p-0000",
        ),
        ("/api/v1/plan-previews?pr=7", 400, "pr needs repo"),
        ("/api/v1/plan-previews?repo=demo&pr=seven", 400, "pr"),
    ] {
        let (status, answer) = api.get("viewer", path).await;
        assert_eq!(status, want, "{path}: {answer}");
        assert!(error(&answer).contains(says), "{path}: {answer}");
    }
}
