//! The plan preview routes: `POST /api/v1/plan-previews` asks for a preview of a commit
//! (a CI system, `gannet plan-preview`), `GET /api/v1/plan-previews/{id}` reads one and
//! `GET /api/v1/plan-previews?repo=&pr=&limit=` lists them, newest first. The answers carry
//! the preview record as the store keeps it (`{"preview": …}`, `{"previews": […]}`; times in
//! milliseconds since the Unix epoch).

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use gannet_domain::callers::{Caller, Need};
use serde::Deserialize;
use serde_json::json;

use super::{capped, require, ApiResult, AppState};
use crate::{ApiError, Controller};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewBody {
    /// The commit to preview (40 or 64 hex digits).
    head: String,
    /// The repository's id; may be left out when gannet watches one repository.
    #[serde(default)]
    repo: Option<String>,
    /// The branch the caller means to merge into. A preview is always against the
    /// repository's watched branch: another branch is refused before anything is queued.
    #[serde(default)]
    base: Option<String>,
}

/// `POST /api/v1/plan-previews`: 202 with the preview (QUEUED, or as far as it got when the
/// same head was asked for before). The controller checks the role (a preview runs the
/// commit's code with the preview credentials: deployer or admin).
pub(super) async fn request(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Json(body): Json<PreviewBody>,
) -> Result<impl IntoResponse, ApiError> {
    capped("head", Some(&body.head))?;
    let repo = capped("repo", body.repo.as_deref())?;
    // A caller who may not ask is refused by the controller, before anything about the
    // repository is told.
    if let Some(base) = capped("base", body.base.as_deref())? {
        if caller.role.allows(Need::Deploy) {
            check_base(&s.controller, repo, base)?;
        }
    }
    let preview = s
        .controller
        .request_preview(repo, &body.head, &caller)
        .await?;
    tracing::info!(target: "gannet::audit", repo = %preview.repo, by = %caller.name, role = %caller.role.as_str(), preview = %preview.id, "plan preview requested");
    Ok((StatusCode::ACCEPTED, Json(json!({ "preview": preview }))))
}

/// A `base` other than the watched branch of the repository the preview is for is refused.
/// A repository that cannot be told (unknown, or none named among several) is left to
/// [`Controller::request_preview`], which says why.
fn check_base(controller: &Controller, repo: Option<&str>, base: &str) -> Result<(), ApiError> {
    let repos = &controller.inner.settings.repos;
    let settings = match repo {
        Some(id) => repos.iter().find(|r| r.id.as_str() == id),
        None => match repos.as_slice() {
            [one] => Some(one),
            _ => None,
        },
    };
    match settings {
        Some(r) if r.branch != base => Err(ApiError::BadRequest(format!(
            "base: repository {} watches branch {}, and a plan preview shows what merging into \
             it would change; previews against {base} are not supported",
            r.id, r.branch
        ))),
        _ => Ok(()),
    }
}

pub(super) async fn show(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    Ok(Json(
        json!({"preview": s.controller.get_preview(&id).await?}),
    ))
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    repo: Option<String>,
    /// A pull request's number (needs `repo`).
    pr: Option<u64>,
    limit: Option<usize>,
}

pub(super) async fn list(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<ListQuery>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let repo = capped("repo", q.repo.as_deref().filter(|r| !r.is_empty()))?;
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let previews = s.controller.list_previews(repo, q.pr, limit).await?;
    Ok(Json(json!({ "previews": previews })))
}

#[cfg(test)]
mod tests;
