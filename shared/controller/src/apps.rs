//! The commands on an application as a whole: pause and resume its automatic deployments,
//! and roll it back to an earlier deployment's commit (`apps diff` is in [`crate::diff`]).

use gannet_domain::app::{App, Pause};
use gannet_domain::callers::Caller;
use gannet_domain::deployment::{DeploymentStatus, SyncStrategy};
use gannet_domain::ports::{Changes, DeploymentFilter, Expect, StoreError, Write};

use gannet_events::{Message, TriggerCause};
use serde::{Deserialize, Serialize};

use crate::api::{AppView, DeployCommand, DeploymentView};
use crate::trigger::put_if_changed;
use crate::{ApiError, Controller};

/// How far back a rollback looks for the deployment to go back to.
const ROLLBACK_HISTORY: usize = 200;

/// A rollback: to a given deployment's commit, or to the last successful deployment of a
/// commit other than the running one.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The earlier successful deployment whose commit is deployed again.
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub strategy: Option<SyncStrategy>,
    /// An idempotency key: the same key never starts two rollbacks.
    #[serde(default)]
    pub key: Option<String>,
    /// Why an admin's rollback skips the app's approval gate (required then).
    #[serde(default)]
    pub reason: Option<String>,
}

impl Controller {
    /// Turns the app's automatic deployments off (pushes and auto-sync); a pause already in
    /// place is kept as it is.
    pub async fn pause_app(
        &self,
        key: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<AppView, ApiError> {
        self.change_app(key, |app, now| {
            if app.paused.is_some() {
                return Ok(None);
            }
            let mut next = app.clone();
            next.paused = Some(Pause {
                by: by.to_owned(),
                at: now,
                reason: reason
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map_or_else(|| "paused".to_owned(), str::to_owned),
                commit: None,
            });
            Ok(Some((next, None)))
        })
        .await
    }

    /// Turns the app's automatic deployments back on. The repository's branch head is judged
    /// again, so a change pushed while the app was paused deploys now; after a rollback, drift
    /// checks compare with the branch head again.
    pub async fn resume_app(&self, key: &str) -> Result<AppView, ApiError> {
        self.change_app(key, |app, _| {
            if app.paused.is_none() {
                return Ok(None);
            }
            let mut next = app.clone();
            next.paused = None;
            Ok(Some((next, Some(app.repo.clone()))))
        })
        .await
    }

    /// Deploys again the commit of an earlier successful deployment (`to`, or the newest
    /// successful one of a commit other than the running one), and pauses the app at that
    /// commit so that neither a push nor auto-sync undoes the rollback until it is resumed.
    pub async fn rollback(
        &self,
        key: &str,
        req: RollbackRequest,
        caller: &Caller,
    ) -> Result<DeploymentView, ApiError> {
        let by = caller.name.as_str();
        let app = self.find_app(key).await?;
        let target = match req.to.as_deref() {
            Some(id) => {
                let target = self.load(id).await?;
                if target.app != app.id {
                    return Err(ApiError::BadRequest(format!(
                        "deployment {} is of application {}, not {}",
                        target.id, target.app_name, app.name
                    )));
                }
                if target.status != DeploymentStatus::Success {
                    return Err(ApiError::Conflict(format!(
                        "deployment {} ended {}; only a successful deployment's commit can be rolled back to",
                        target.id,
                        target.status.as_str()
                    )));
                }
                target
            }
            None => self
                .inner
                .store
                .deployments(&DeploymentFilter {
                    app: Some(app.id.clone()),
                    statuses: vec![DeploymentStatus::Success],
                    limit: Some(ROLLBACK_HISTORY),
                    before: None,
                })
                .await?
                .into_iter()
                .find(|d| Some(&d.commit.sha) != app.running_commit.as_ref())
                .ok_or_else(|| {
                    ApiError::Conflict(format!(
                        "application {} has no earlier successful deployment of another commit to roll back to",
                        app.name
                    ))
                })?,
        };
        let repo = self.configured_repo(&app)?;
        let commit = self.inner.git.commit(&app.repo, &target.commit.sha).await?;
        let head = self.inner.git.head(&app.repo, &repo.branch).await?;
        let now = self.inner.clock.now();
        let key = req.key.unwrap_or_else(|| now.0.to_string());
        let command = DeployCommand {
            caller,
            strategy: req.strategy,
            reason: req.reason,
            cause: format!("ROLLBACK:{}:{key}", target.id),
            rollback_of: Some(target.id.clone()),
            pause: Some(Pause {
                by: by.to_owned(),
                at: now,
                reason: format!(
                    "rolled back to {} (deployment {}); resume to deploy from the branch again",
                    target.commit.sha.short(),
                    target.id
                ),
                commit: Some(target.commit.sha.clone()),
            }),
            checked: head.sha,
        };
        self.deploy_commit(&app, &commit, &repo.branch, command)
            .await
    }

    /// Applies `change` to the app (retrying when another write got there first); `change`
    /// returns `None` for nothing to do, or the new app and a repository whose branch head is
    /// to be judged again.
    async fn change_app<F>(&self, key: &str, change: F) -> Result<AppView, ApiError>
    where
        F: Fn(
            &App,
            gannet_domain::duration::Millis,
        ) -> Result<Option<(App, Option<gannet_domain::RepoId>)>, ApiError>,
    {
        let store = &self.inner.store;
        for _ in 0..crate::api::COMMAND_TRIES {
            let app = self.find_app(key).await?;
            let now = self.inner.clock.now();
            let Some((next, rescan)) = change(&app, now)? else {
                return self.app_view(app).await;
            };
            let mut changes = Changes::default();
            put_if_changed(&mut changes, Some(&app), next, now);
            if let Some(repo) = rescan {
                // Forget the scanned head, so the trigger judges it again (apps judged there
                // already see no change; the resumed one sees what was pushed while paused).
                if let Some(state) = store.repo(&repo).await? {
                    let mut again = state.clone();
                    again.scanned_head = None;
                    again.updated_at = now;
                    again.version += 1;
                    changes.writes.push(Write::PutRepo {
                        repo: again,
                        expect: Expect::Version(state.version),
                    });
                }
                changes.send.push(
                    Message::Trigger {
                        repo,
                        cause: TriggerCause::Poll,
                    }
                    .outgoing(),
                );
            }
            match store.apply(changes).await {
                // The one record just written (find_app would read every app again).
                Ok(()) => {
                    let written = store.app(&app.id).await?.ok_or_else(|| {
                        ApiError::NotFound(format!("application {} is gone", app.name))
                    })?;
                    return self.app_view(written).await;
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Conflict(format!(
            "application {key} is changing too fast; try again"
        )))
    }
}
