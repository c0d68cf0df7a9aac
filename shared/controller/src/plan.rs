//! The plan handler: reconciles one app's deployment lock. It releases the lock when its
//! holder has finished, then plans the next PENDING deployment (the oldest, or with
//! `supersede` the newest, cancelling the older ones). While the lock is held, every PENDING
//! deployment records which deployment it waits for.
//!
//! The lock is the app record's `active_deployment`, taken and released with conditional
//! writes in the same atomic set as the deployment's own change.

use gannet_config as config;
use gannet_config::bounded;
use gannet_domain::app::{App, LastResult, SyncStatus};
use gannet_domain::chain::ChainMatcher;
use gannet_domain::deployment::NotificationMention;
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::duration::Millis;
use gannet_domain::ports::{Changes, DeploymentFilter, Expect, GitError, Write};
use gannet_domain::AppId;
use gannet_events::{Event, EventKind, Message};
use gannet_sdk::lifecycle::{self, Lifecycle};
use gannet_sdk::planner::{self, PlanInput};
use gannet_sdk::tree;

use crate::settings::Supersede;
use crate::trigger::notify;
use crate::{Controller, HandlerError};

impl Controller {
    pub(crate) async fn plan(&self, app_id: &AppId) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(mut app) = inner.store.app(app_id).await? else {
            tracing::warn!(id = %app_id, "plan for an unknown app dropped");
            return Ok(());
        };
        let before = app.clone();
        let now = inner.clock.now();
        let mut changes = Changes::default();
        let mut pending = inner
            .store
            .deployments(&DeploymentFilter {
                app: Some(app_id.clone()),
                statuses: vec![DeploymentStatus::Pending],
                limit: None,
                before: None,
            })
            .await?;
        pending.reverse(); // oldest first

        if let Some(active_id) = app.active_deployment.clone() {
            match inner.store.deployment(&active_id).await? {
                Some(active) if !active.status.is_terminal() => {
                    for d in pending
                        .iter()
                        .filter(|d| d.blocked_by.as_ref() != Some(&active_id))
                    {
                        let mut waiting = d.clone();
                        waiting.blocked_by = Some(active_id.clone());
                        waiting.status_reason = format!(
                            "waiting for deployment {active_id} ({}) to finish",
                            active.status.as_str()
                        );
                        put_deployment(&mut changes, d, waiting, now);
                    }
                    return self.commit(changes).await;
                }
                finished => {
                    if release(&mut app, finished.as_ref(), now) {
                        // The app as it will be written (put_if_changed bumps the version).
                        let mut announced = app.clone();
                        announced.version = before.version + 1;
                        changes.send.push(
                            Message::Notify {
                                event: Box::new(Event::application(
                                    EventKind::ApplicationSynced,
                                    &announced,
                                    now,
                                )),
                            }
                            .outgoing(),
                        );
                    }
                }
            }
        }

        let supersede = inner
            .settings
            .repo(&app.repo)
            .map(|r| r.supersede)
            .unwrap_or_default();
        let next = match supersede {
            Supersede::Never => pending.first().cloned(),
            Supersede::OlderPending => {
                let newest = pending.last().cloned();
                if let Some(newest) = &newest {
                    for old in pending.iter().filter(|d| d.id != newest.id) {
                        let mut cancelled = old.clone();
                        cancelled.status = DeploymentStatus::Cancelled;
                        cancelled.status_reason = format!(
                            "superseded by deployment {} of commit {}",
                            newest.id,
                            newest.commit.sha.short()
                        );
                        cancelled.completed_at = Some(now);
                        changes
                            .send
                            .push(notify(EventKind::DeploymentCancelled, &cancelled, now));
                        put_deployment(&mut changes, old, cancelled, now);
                    }
                }
                newest
            }
        };
        if let Some(d) = next {
            self.plan_deployment(&mut changes, &mut app, &d, now)
                .await?;
        }
        crate::trigger::put_if_changed(&mut changes, Some(&before), app, now);
        self.commit(changes).await
    }

    /// Plans `d` and takes the app's lock for it; a deployment that cannot be planned ends
    /// FAILURE with the reason, and the app is planned again for the next one.
    async fn plan_deployment(
        &self,
        changes: &mut Changes,
        app: &mut App,
        d: &Deployment,
        now: Millis,
    ) -> Result<(), HandlerError> {
        let mut planned = d.clone();
        planned.blocked_by = None;
        planned.running_commit = app.running_commit.clone();
        match self.build_plan(app, &planned).await? {
            Ok((plan, kept)) => {
                planned.mentions = kept.mentions;
                planned.chain_next = kept.chain_next;
                planned.status = DeploymentStatus::Planned;
                planned.status_reason = String::new();
                planned.strategy = Some(plan.strategy);
                planned.summary = plan.summary;
                planned.stages = plan.stages;
                planned.planned_at = Some(now);
                app.active_deployment = Some(d.id.clone());
                app.sync_status = SyncStatus::Deploying;
                app.sync_reason = format!("deploying commit {} ({})", d.commit.sha.short(), d.id);
                let seq = d.seq + 1;
                changes.send.push(
                    Message::Step {
                        deployment: d.id.clone(),
                        seq,
                    }
                    .outgoing(),
                );
                changes
                    .send
                    .push(notify(EventKind::DeploymentPlanned, &planned, now));
                tracing::info!(app = %app.name, id = %app.id, deployment = %d.id, strategy = planned.strategy.map(|s| s.as_str()).unwrap_or(""), "deployment planned");
            }
            Err(reason) => {
                tracing::warn!(app = %app.name, id = %app.id, deployment = %d.id, %reason, "deployment cannot be planned");
                planned.status = DeploymentStatus::Failure;
                planned.status_reason = reason;
                planned.completed_at = Some(now);
                changes
                    .send
                    .push(notify(EventKind::DeploymentFailed, &planned, now));
                changes.send.push(
                    Message::Plan {
                        app: app.id.clone(),
                    }
                    .outgoing(),
                );
            }
        }
        put_deployment(changes, d, planned, now);
        Ok(())
    }

    /// Loads the app's config at the deployment's commit and runs the planner, which has the
    /// platform plugin check the files the config names. The outer error is IO (retry); the
    /// inner one is why this deployment cannot run.
    pub(crate) async fn build_plan(
        &self,
        app: &App,
        d: &Deployment,
    ) -> Result<Result<(planner::Plan, Kept), String>, HandlerError> {
        let inner = &self.inner;
        let path = app.id.config_path();
        let Some(bytes) = inner.git.read_file(&app.repo, &d.commit.sha, path).await? else {
            return Ok(Err(format!(
                "{path} does not exist at commit {}",
                d.commit.sha.short()
            )));
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(Err(format!("{path} is not UTF-8")));
        };
        let cfg = match config::parse_app_config(path, &text) {
            Ok(cfg) => cfg,
            Err(err) => return Ok(Err(format!("invalid config: {err}"))),
        };
        let lifecycle = match self.lifecycle_file(app, d, path).await? {
            Ok(lifecycle) => lifecycle,
            Err(e) => return Ok(Err(e)),
        };
        let changed_files = match &d.running_commit {
            Some(from) => match inner
                .git
                .changed_files(&app.repo, from, &d.commit.sha)
                .await
            {
                Ok(files) => files,
                // The running commit is gone from the repository: changes are unknown.
                Err(GitError::NoCommit { .. }) => Vec::new(),
                Err(e) => return Err(e.into()),
            },
            None => Vec::new(),
        };
        // The platform plugin checks its manifests in the app's directory at the commit, and
        // compares them with the running commit's to choose the strategy.
        let (root, running_root) = match inner.plugins.platform_for(&cfg) {
            Some(_) => {
                let root = inner.git.checkout(&app.repo, &d.commit.sha).await?;
                let running = match &d.running_commit {
                    Some(sha) => match inner.git.checkout(&app.repo, sha).await {
                        Ok(dir) => Some(dir),
                        // The running commit is gone from the repository: nothing to compare.
                        Err(GitError::NoCommit { .. }) => None,
                        Err(e) => return Err(e.into()),
                    },
                    None => None,
                };
                (Some(root), running)
            }
            None => (None, None),
        };
        let app_dir = root.as_ref().map(|r| r.join(app.id.dir()));
        let running_app_dir = running_root.as_ref().map(|r| r.join(app.id.dir()));
        let read = |rel: &str| {
            let root = root.as_deref()?;
            // No link (nor chain of links) out of the checkout is followed.
            let path = tree::in_repo(app.id.dir(), rel)?;
            tree::read(root, &path, bounded::MAX_BYTES as u64).ok()
        };
        let input = PlanInput {
            app: &cfg,
            trigger: &d.trigger,
            commit_message: &d.commit.message,
            changed_files: &changed_files,
            running_commit: d.running_commit.as_ref(),
            plugins: &inner.plugins,
            read: &read,
            lifecycle: lifecycle.as_ref(),
            app_dir: app_dir.as_deref(),
            running_app_dir: running_app_dir.as_deref(),
            config_path: Some(path),
        };
        let spec = cfg.spec();
        let kept = Kept {
            mentions: spec
                .notification
                .as_ref()
                .map(|n| n.mentions.clone())
                .unwrap_or_default(),
            chain_next: spec
                .post_sync
                .iter()
                .flat_map(|p| p.chain.iter())
                .flat_map(|c| &c.applications)
                .map(|m| ChainMatcher {
                    name: m.name.clone(),
                    kind: m.kind.clone(),
                    labels: m.labels.clone(),
                })
                .collect(),
        };
        Ok(planner::plan(&input)
            .map(|plan| (plan, kept))
            .map_err(|e| e.to_string()))
    }

    /// The app's lifecycle file at the deployment's commit ([`lifecycle`]), when it has one.
    /// The outer error is IO (retry); the inner one is why this deployment cannot run.
    async fn lifecycle_file(
        &self,
        app: &App,
        d: &Deployment,
        config_path: &str,
    ) -> Result<Result<Option<Lifecycle>, String>, HandlerError> {
        let path = lifecycle::file_for(config_path);
        let git = &self.inner.git;
        let Some(bytes) = git.read_file(&app.repo, &d.commit.sha, &path).await? else {
            return Ok(Ok(None));
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(Err(format!("{path} is not UTF-8")));
        };
        // Parsing measures the text against the YAML limits (size included) first.
        Ok(lifecycle::parse(&path, &text)
            .map(Some)
            .map_err(|e| format!("invalid lifecycle file: {e}")))
    }

    async fn commit(&self, changes: Changes) -> Result<(), HandlerError> {
        if !changes.is_empty() {
            self.inner.store.apply(changes).await?;
        }
        Ok(())
    }
}

/// What a deployment keeps of its config when it is planned.
pub(crate) struct Kept {
    /// `spec.notification.mentions`.
    mentions: Vec<NotificationMention>,
    /// `spec.postSync.chain.applications`.
    chain_next: Vec<ChainMatcher>,
}

/// Releases the lock of a finished (or vanished) deployment and records its outcome. A
/// successful deployment applied Git's state, so the drift on record is cleared with it: the
/// app is SYNCED and lists no stale fields, and the next drift check announces any drift it
/// still finds (or a change by hand since) as OUT_OF_SYNC. True when the app had drift on
/// record, which the deployment put back: the caller announces APPLICATION_SYNCED, once.
fn release(app: &mut App, finished: Option<&Deployment>, now: Millis) -> bool {
    app.active_deployment = None;
    let Some(d) = finished else {
        app.sync_status = SyncStatus::Unknown;
        app.sync_reason = "the deployment holding the lock no longer exists".into();
        return false;
    };
    app.last_deployment_finished_at = Some(d.completed_at.unwrap_or(now));
    app.last_result = Some(LastResult {
        deployment: d.id.clone(),
        status: d.status,
        commit: d.commit.sha.clone(),
        at: d.completed_at.unwrap_or(now),
    });
    if d.status == DeploymentStatus::Success {
        app.running_commit = Some(d.commit.sha.clone());
        app.sync_status = SyncStatus::Synced;
        app.sync_reason = format!("deployed commit {} ({})", d.commit.sha.short(), d.id);
        let had_drift = !app.drift.is_empty();
        if had_drift {
            app.drift.clear();
            app.drift_changed_at = Some(now);
        }
        had_drift
    } else {
        app.sync_status = SyncStatus::Unknown;
        app.sync_reason = format!(
            "deployment {} ended {}: {}",
            d.id,
            d.status.as_str(),
            d.status_reason
        );
        false
    }
}

/// Writes `next` over `stored`, conditional on the stored seq, with the seq bumped.
pub(crate) fn put_deployment(
    changes: &mut Changes,
    stored: &Deployment,
    mut next: Deployment,
    now: Millis,
) {
    next.seq = stored.seq + 1;
    next.updated_at = now;
    crate::chain::on_deployment_change(changes, stored, &next, now);
    changes.writes.push(Write::PutDeployment {
        deployment: Box::new(next),
        expect: Expect::Version(stored.seq),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_files_stay_inside_the_repository() {
        let cases = [
            ("apps/web", "function.yaml", Some("apps/web/function.yaml")),
            (
                "apps/web",
                "./fn/../function.yaml",
                Some("apps/web/function.yaml"),
            ),
            ("apps/web", "../../shared.yaml", Some("shared.yaml")),
            ("apps/web", "../../../etc/passwd", None),
            ("", "function.yaml", Some("function.yaml")),
            ("", "../x.yaml", None),
            ("apps/web", "/etc/passwd", None),
        ];
        for (dir, rel, want) in cases {
            assert_eq!(tree::in_repo(dir, rel).as_deref(), want, "{dir} {rel}");
        }
    }
}
