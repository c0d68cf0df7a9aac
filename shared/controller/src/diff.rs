//! `apps diff`: what deploying a commit would change, the app's live state compared with the
//! desired state at that commit. Nothing is written.
//!
//! Reading the live state may run code from the repository (Terraform's read is a
//! `terraform plan`, whose providers and `external` data sources run with the deploy target's
//! credentials), so the API guards what it reads, before anything is checked out:
//!
//! - `commit` (default: the branch head) must be on the watched branch: the head or one of its
//!   ancestors, or a commit of one of the app's recorded deployments. Any other commit is 409:
//!   the API never runs code of a commit that is not on the branch (a pull request's plan is
//!   the plan preview's job, with its own credentials).
//! - A commit other than the head needs a caller who may deploy (403 for a viewer).
//! - For a caller who may not deploy, an app whose live read runs code
//!   ([`gannet_sdk::plugin::Plugin::live_read_runs_code`]) is answered from its last drift
//!   check, with its age ([`DiffView::as_of`]): no job starts.
//!
//! On AWS the `api` function makes these checks (it has the git source and the store) and only
//! then asks the `drift` function ([`RemoteDiff`]), which checks the branch again.

use std::sync::Arc;

use async_trait::async_trait;
use gannet_domain::app::{App, SyncStatus};
use gannet_domain::callers::{Caller, Need};
use gannet_domain::drift::{self, DriftField, LiveResource};
use gannet_domain::duration::Millis;
use gannet_domain::ports::DeploymentFilter;
use gannet_domain::{AppId, CommitSha};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::drift::Examined;
use crate::{ApiError, Controller};

/// How many of the app's latest deployments a commit off the branch is looked for in.
const DEPLOYED_HISTORY: usize = 200;

/// What a deployment of a commit would change: the app's live state compared with the
/// desired state at that commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffView {
    pub app: String,
    pub commit: String,
    /// SYNCED (nothing would change) or OUT_OF_SYNC (`drift` lists what would).
    pub status: SyncStatus,
    pub reason: String,
    #[serde(with = "gannet_domain::drift::as_values")]
    pub drift: Vec<DriftField>,
    pub live: Vec<LiveResource>,
    /// Set when the answer is the app's last drift check rather than a read made now (a
    /// caller who may not deploy, of an app whose live read runs code): when that check last
    /// recorded a change, in milliseconds since the epoch. A check that finds nothing new
    /// writes nothing, so the result has held at least since then. `reason` names the commit
    /// the check compared with, which may be older than `commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<Millis>,
    /// How old `as_of` was when this was answered, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<u64>,
}

/// Where `apps diff` reads the live state when this process has only the plugins' planning
/// faces: the AWS `api` function asks the `drift` function, which has them whole.
#[async_trait]
pub trait RemoteDiff: Send + Sync {
    /// What deploying `commit` of `app` would change, as [`Controller::diff`] answers where
    /// the plugins run. Called only once the caller's role and the commit are checked.
    async fn diff(&self, app: &AppId, commit: &CommitSha) -> Result<DiffView, ApiError>;
}

/// A diff the `api` function asks for (`{"app": "<id>", "commit": "<sha>"}`), answered where
/// the plugins run: `{"diff": {...}}`, or `{"error": "...", "status": N}`. The caller's role
/// was checked by the api function; the commit must still be on the branch.
pub async fn answer_diff(controller: &Controller, request: &Value) -> Value {
    let field = |name: &str| request.get(name).and_then(Value::as_str);
    let (Some(app), Some(commit)) = (field("app"), field("commit")) else {
        return json!({"error": "a diff request names app and commit", "status": 400});
    };
    tracing::info!(app = %app, commit = %commit, "diff requested");
    match controller.forwarded_diff(app, commit).await {
        Ok(diff) => json!({ "diff": diff }),
        Err(e) => json!({"error": e.public_message(), "status": e.status()}),
    }
}

/// The diff in a remote answer ([`answer_diff`]); `Err(None)` when the answer has neither shape.
pub fn diff_from_answer(answer: &Value) -> Result<DiffView, Option<ApiError>> {
    if let Some(diff) = answer.get("diff") {
        return serde_json::from_value(diff.clone()).map_err(|_| None);
    }
    let message = answer.get("error").and_then(Value::as_str).ok_or(None)?;
    let status = answer.get("status").and_then(Value::as_u64).ok_or(None)?;
    Err(Some(ApiError::from_status(status, message.to_owned())))
}

impl Controller {
    /// The same controller, reading live state for `apps diff` through `remote`.
    pub fn with_remote_diff(mut self, remote: Arc<dyn RemoteDiff>) -> Self {
        Arc::make_mut(&mut self.inner).remote_diff = Some(remote);
        self
    }

    /// What deploying `commit` (the branch head by default) would change on the platform,
    /// as `caller` may see it (see the module's rules).
    pub async fn diff(
        &self,
        key: &str,
        commit: Option<&str>,
        caller: &Caller,
    ) -> Result<DiffView, ApiError> {
        let app = self.find_app(key).await?;
        let asked = commit.map(parse_commit).transpose()?;
        let may_deploy = caller.role.allows(Need::Deploy);
        let head = self.branch_head(&app).await?;
        let sha = match asked {
            Some(sha) if sha != head => {
                if !may_deploy {
                    return Err(ApiError::Forbidden(format!(
                        "{} has the role {}; a diff at a commit other than the branch head ({}) needs the role {}",
                        caller.name,
                        caller.role,
                        head.short(),
                        Need::Deploy.roles()
                    )));
                }
                self.require_on_branch(&app, &sha, &head).await?;
                sha
            }
            _ => head,
        };
        if app.no_live_state.is_some() {
            return self.config_diff(app, &sha).await;
        }
        if !may_deploy && self.live_read_may_run_code(&app, &sha).await? {
            return last_drift_check(app, &sha, self.inner.clock.now());
        }
        if let Some(remote) = &self.inner.remote_diff {
            return remote.diff(&app.id, &sha).await;
        }
        self.read_diff(app, &sha).await
    }

    /// [`answer_diff`]'s diff: the commit is checked against the branch again (never trusting
    /// the asker for that), then the live state is read.
    async fn forwarded_diff(&self, key: &str, commit: &str) -> Result<DiffView, ApiError> {
        let app = self.find_app(key).await?;
        let sha = parse_commit(commit)?;
        let head = self.branch_head(&app).await?;
        if sha != head {
            self.require_on_branch(&app, &sha, &head).await?;
        }
        self.read_diff(app, &sha).await
    }

    async fn branch_head(&self, app: &App) -> Result<CommitSha, ApiError> {
        let repo = self.configured_repo(app)?;
        Ok(self.inner.git.head(&app.repo, &repo.branch).await?.sha)
    }

    /// Refuses (409) a commit that is neither `head` nor one of its ancestors, nor the commit
    /// of one of the app's recorded deployments. Reads commits only, never a tree.
    async fn require_on_branch(
        &self,
        app: &App,
        sha: &CommitSha,
        head: &CommitSha,
    ) -> Result<(), ApiError> {
        // Named in the error (404) when it does not exist at all.
        self.inner.git.commit(&app.repo, sha).await?;
        if self.inner.git.is_ancestor(&app.repo, sha, head).await? {
            return Ok(());
        }
        let deployed = self
            .inner
            .store
            .deployments(&DeploymentFilter {
                app: Some(app.id.clone()),
                statuses: Vec::new(),
                limit: Some(DEPLOYED_HISTORY),
                before: None,
            })
            .await?
            .iter()
            .any(|d| &d.commit.sha == sha);
        if deployed {
            return Ok(());
        }
        let branch = self.configured_repo(app)?.branch;
        Err(ApiError::Conflict(format!(
            "commit {} is not on branch {branch} of {} (it is not the head {} or an ancestor of it) and {} was never deployed at it: a diff runs no code of a commit off the watched branch; merge it first (a pull request's plan is the plan preview's job)",
            sha.short(),
            app.repo,
            head.short(),
            app.name
        )))
    }

    /// False only when the config at `sha` is valid and its platform plugin says its live
    /// read runs no code. Reads the one file from git (no checkout); when in doubt, true.
    async fn live_read_may_run_code(&self, app: &App, sha: &CommitSha) -> Result<bool, ApiError> {
        let path = app.id.config_path();
        let Ok(cfg) = self.deployable_at(&app.repo, sha, path).await? else {
            return Ok(true);
        };
        Ok(self
            .inner
            .plugins
            .platform_for(&cfg)
            .is_some_and(|plugin| plugin.live_read_runs_code(&cfg)))
    }

    /// For an app with no live state (no platform plugin deploys it, a scripts-only app): its
    /// config at `sha` against its config at the running commit, field by field, both ways
    /// (a field only the running config has shows `<unset>` at the commit). Reads two files
    /// from git and runs nothing.
    async fn config_diff(&self, app: App, sha: &CommitSha) -> Result<DiffView, ApiError> {
        let path = app.id.config_path();
        let target = self.config_document(&app, sha).await?;
        let running = match &app.running_commit {
            Some(running) => self.config_document(&app, running).await?,
            None => Value::Null,
        };
        let rules = drift::Rules::default();
        let mut fields = drift::diff(&target, &running, &rules);
        // What the commit removes: the fields only the running config has.
        fields.extend(
            drift::diff(&running, &target, &rules)
                .into_iter()
                .filter(|f| f.live == drift::UNSET)
                .map(|f| DriftField {
                    field: f.field,
                    git: drift::UNSET.to_owned(),
                    live: f.git,
                }),
        );
        let against = app.running_commit.as_ref().map_or_else(
            || "nothing deployed yet".to_owned(),
            |c| format!("the running commit {}", c.short()),
        );
        let why = app.no_live_state.clone().unwrap_or_default();
        let (status, reason) = if fields.is_empty() {
            (
                SyncStatus::Synced,
                format!("{path} at {} is the same as at {against} ({why}, so its config is what compares)", sha.short()),
            )
        } else {
            (
                SyncStatus::OutOfSync,
                format!("{path} at {} against {against}: {} field(s) differ ({why}, so its config is what compares)", sha.short(), fields.len()),
            )
        };
        Ok(DiffView {
            app: app.name,
            commit: sha.to_string(),
            status,
            reason,
            drift: fields,
            live: Vec::new(),
            as_of: None,
            age_seconds: None,
        })
    }

    /// The app's config at `commit` as a YAML document, read under gannet's limits; null when
    /// absent.
    async fn config_document(&self, app: &App, commit: &CommitSha) -> Result<Value, ApiError> {
        let path = app.id.config_path();
        let bytes = self.inner.git.read_file(&app.repo, commit, path).await?;
        let text = String::from_utf8(bytes.unwrap_or_default()).map_err(|_| {
            ApiError::Conflict(format!("{path} at {} is not UTF-8", commit.short()))
        })?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        gannet_config::yaml::from_str::<Value>(&text)
            .map_err(|e| ApiError::Conflict(format!("{path} at {}: {e}", commit.short())))
    }

    /// Reads the live state now, with the app's plugin, and compares it with `sha`.
    async fn read_diff(&self, app: App, sha: &CommitSha) -> Result<DiffView, ApiError> {
        let finding = match self.examine(&app, Some(sha)).await {
            Ok(Examined::NotWatched { why } | Examined::Pending { what: why, .. }) => {
                return Err(ApiError::Conflict(format!(
                    "cannot compare {} with its live state: {why}",
                    app.name
                )))
            }
            Ok(Examined::Done(finding) | Examined::Live { finding, .. }) => finding,
            Err(crate::HandlerError::Live { source, .. }) => {
                return Err(ApiError::Conflict(format!(
                    "cannot read the live state of {}: {}",
                    app.name,
                    source.reason()
                )))
            }
            Err(e) => return Err(e.into()),
        };
        // Nothing was compared (the config at that commit is invalid, the platform refused
        // the read): an error naming why, never an empty diff that reads "nothing changes".
        if !compared(finding.status) {
            return Err(ApiError::Conflict(format!(
                "cannot compare {} at {} with its live state: {}",
                app.name,
                sha.short(),
                finding.reason
            )));
        }
        let live = finding.live.unwrap_or_default();
        Ok(DiffView {
            app: app.name,
            commit: sha.to_string(),
            status: finding.status,
            reason: finding.reason,
            drift: live.drift,
            live: live.resources,
            as_of: None,
            age_seconds: None,
        })
    }
}

fn parse_commit(text: &str) -> Result<CommitSha, ApiError> {
    CommitSha::parse(text.trim()).map_err(|e| ApiError::BadRequest(format!("commit: {e}")))
}

/// True for a status that says the live state was compared.
fn compared(status: SyncStatus) -> bool {
    matches!(status, SyncStatus::Synced | SyncStatus::OutOfSync)
}

/// The app's last drift check, as a diff at the branch head `head`, `now`; 409 when no check
/// has compared the live state yet.
fn last_drift_check(app: App, head: &CommitSha, now: Millis) -> Result<DiffView, ApiError> {
    let as_of = app.drift_changed_at.filter(|_| compared(app.sync_status));
    let Some(as_of) = as_of else {
        return Err(ApiError::Conflict(format!(
            "no drift check has compared {} with its live state yet ({}: {}); reading it runs the app's code, which a diff never does for a caller who may not deploy: wait for the next drift check, or ask a deployer",
            app.name,
            app.sync_status.as_str(),
            app.sync_reason
        )));
    };
    Ok(DiffView {
        app: app.name,
        commit: head.to_string(),
        status: app.sync_status,
        reason: app.sync_reason,
        drift: app.drift,
        live: app.live,
        as_of: Some(as_of),
        age_seconds: Some(now.0.saturating_sub(as_of.0) / 1000),
    })
}

#[cfg(test)]
mod tests;
