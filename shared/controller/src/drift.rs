//! Drift detection: the sweep queues one check per app; each check compares the app's live
//! state with the desired state at its branch head, records the sync status and the drifted
//! fields, raises APPLICATION_SYNCED / APPLICATION_OUT_OF_SYNC when the status changes, and,
//! when the app opts in through `trigger.onOutOfSync`, starts a deployment to put it back.
//!
//! A check writes only when what it found differs from what is recorded, so a steady fleet
//! costs reads only. The app write is conditional on the version read, so a check racing a
//! deployment loses and looks again (then sees DEPLOYING). An app with a deployment holding
//! its lock is left alone: the deployment decides what is live. So is an app no plugin reads
//! the live state of (scripts only): its status stays what its last deployment left.

use std::collections::HashMap;
use std::path::Path;

use gannet_config::bounded;
use gannet_config::trigger::{self as determiner, Decision};
use gannet_config::AppConfig;
use gannet_domain::app::{App, SyncStatus};
use gannet_domain::deployment::{DeploymentStatus, SyncStrategy, Trigger, TriggerKind};
use gannet_domain::drift::{self, LiveState};
use gannet_domain::duration::Millis;
use gannet_domain::ports::{Changes, DeploymentFilter, GitError};
use gannet_domain::{AppId, CommitSha, RepoId};
use gannet_events::{Event, EventKind, Message};
use gannet_sdk::check;
use gannet_sdk::plugin::{Live, LiveContext, Plugins, StepError};
use gannet_sdk::previews::Previews;
use gannet_sdk::tree::{self, TreeError};

use crate::trigger::{deployable_config, pending_deployment, put_if_changed};
use crate::{Controller, HandlerError};

/// What one drift check concluded, before it is written.
pub(crate) struct Finding {
    pub(crate) status: SyncStatus,
    pub(crate) reason: String,
    /// What the plugin read; `None` when nothing was (bad config, no plugin, refused).
    pub(crate) live: Option<LiveState>,
}

impl Finding {
    fn new(status: SyncStatus, reason: impl Into<String>) -> Self {
        Self {
            status,
            reason: reason.into(),
            live: None,
        }
    }
}

pub(crate) enum Examined {
    /// Nothing to compare: no plugin reads this app's live state (the status stays what the
    /// last deployment left: an app of scripts only is as synced as its last run).
    NotWatched { why: String },
    /// The plugin reads live state, but not now (a drift job still running).
    Pending {
        what: String,
        /// The job it waits for, when the plugin names one.
        job: Option<gannet_sdk::jobs::JobKey>,
    },
    /// No live state was read (bad config, repository gone, the platform refused).
    Done(Finding),
    Live {
        finding: Finding,
        cfg: Box<AppConfig>,
        /// The commit compared with.
        head: CommitSha,
    },
}

impl Controller {
    /// Queues a drift check for every app; returns how many. Each check runs as its own
    /// message, so a fleet spreads across workers (or Lambda invocations). Each repository's
    /// branch head is read once here and named in its apps' checks. A check still waiting
    /// from the last sweep is not queued twice (its dedupe key).
    pub async fn drift_sweep(&self) -> Result<usize, HandlerError> {
        let inner = &self.inner;
        let apps = inner.store.apps().await?;
        let mut heads: HashMap<RepoId, Option<CommitSha>> = HashMap::new();
        for app in &apps {
            if heads.contains_key(&app.repo) {
                continue;
            }
            let head = match inner.settings.repo(&app.repo) {
                Some(repo) => match inner.git.head(&app.repo, &repo.branch).await {
                    Ok(info) => Some(info.sha),
                    Err(err) => {
                        // Its checks read the head themselves, and retry on their own.
                        tracing::warn!(repo = %app.repo, error = %crate::error_chain(&err), "drift sweep cannot read the branch head");
                        None
                    }
                },
                None => None,
            };
            heads.insert(app.repo.clone(), head);
        }
        let send: Vec<_> = apps
            .into_iter()
            .map(|a| {
                let head = heads.get(&a.repo).cloned().flatten();
                Message::DriftCheck { app: a.id, head }.outgoing()
            })
            .collect();
        let queued = send.len();
        if queued > 0 {
            inner
                .store
                .apply(Changes {
                    writes: Vec::new(),
                    send,
                })
                .await?;
        }
        tracing::info!(apps = queued, repos = heads.len(), "drift sweep queued");
        Ok(queued)
    }

    /// Checks app `id` against `head` (the branch head the sweep read), or against the head
    /// read now.
    pub(crate) async fn drift_check(
        &self,
        id: &AppId,
        head: Option<&CommitSha>,
    ) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(app) = inner.store.app(id).await? else {
            tracing::debug!(id = %id, "drift check for an app that no longer exists");
            return Ok(());
        };
        if app.active_deployment.is_some() {
            return Ok(());
        }
        // A rolled-back app is held at its rollback's commit until it is resumed.
        let pinned = app.paused.as_ref().and_then(|p| p.commit.as_ref());
        let (finding, desired) = match self.examine(&app, pinned.or(head)).await? {
            Examined::Pending { what, .. } => {
                tracing::debug!(app = %app.name, id = %app.id, %what, "live state not read yet");
                return Ok(());
            }
            Examined::NotWatched { why } => {
                // The trigger recorded that the app has no live state (`describe`).
                tracing::debug!(app = %app.name, id = %app.id, %why, "no drift check");
                return Ok(());
            }
            Examined::Done(finding) => (finding, None),
            Examined::Live { finding, cfg, head } => (finding, Some((cfg, head))),
        };
        let now = inner.clock.now();
        let mut next = app.clone();
        next.sync_status = finding.status;
        next.sync_reason = finding.reason;
        let live = finding.live.unwrap_or_default();
        next.drift = live.drift;
        next.live = live.resources;

        let mut changes = Changes::default();
        if let Some((cfg, head)) = &desired {
            if next.sync_status == SyncStatus::OutOfSync {
                self.auto_sync(&mut next, cfg, head, now, &mut changes)
                    .await?;
            }
        }
        if next == app {
            return Ok(());
        }
        next.drift_changed_at = Some(now);
        let event = status_event(&app, &next);
        put_if_changed(&mut changes, Some(&app), next.clone(), now);
        if let Some(kind) = event {
            // The event shows the app as written (put_if_changed bumped the stored version),
            // and goes before the deployment auto-sync may have triggered.
            next.version += 1;
            changes.send.insert(
                0,
                Message::Notify {
                    event: Box::new(Event::application(kind, &next, now)),
                }
                .outgoing(),
            );
            tracing::info!(app = %app.name, id = %app.id, from = app.sync_status.as_str(), to = next.sync_status.as_str(), reason = %next.sync_reason, "sync status changed");
        }
        inner.store.apply(changes).await?;
        Ok(())
    }

    /// Reads the desired state at `head` (or the branch head) and the live state, without
    /// writing. Files are read from the checked-out tree, which is cached per commit, so a
    /// steady sweep asks git (or GitHub) nothing.
    pub(crate) async fn examine(
        &self,
        app: &App,
        head: Option<&CommitSha>,
    ) -> Result<Examined, HandlerError> {
        self.examine_with(app, head, None).await
    }

    /// [`Controller::examine`] for a plan preview of `head` (a pull request's): the live
    /// state is read by the plugins built with the deploy targets' preview credentials, and
    /// only through a target that has them (otherwise [`Examined::NotWatched`] says why).
    pub(crate) async fn examine_preview(
        &self,
        app: &App,
        head: &CommitSha,
    ) -> Result<Examined, HandlerError> {
        let previews = &self.inner.previews;
        self.examine_with(app, Some(head), Some(previews)).await
    }

    async fn examine_with(
        &self,
        app: &App,
        head: Option<&CommitSha>,
        preview: Option<&Previews>,
    ) -> Result<Examined, HandlerError> {
        let inner = &self.inner;
        let Some(repo) = inner.settings.repo(&app.repo) else {
            return Ok(Examined::Done(Finding::new(
                SyncStatus::Unknown,
                format!("repository {} is no longer configured", app.repo),
            )));
        };
        let head = match head {
            Some(sha) => sha.clone(),
            None => inner.git.head(&app.repo, &repo.branch).await?.sha,
        };
        let root = inner.git.checkout(&app.repo, &head).await?;
        let path = app.id.config_path();
        // Through the checked reader: a link (or a chain of them) out of the checkout is
        // refused, and the reason never quotes what it pointed at.
        let text = match tree::read(&root, path, bounded::MAX_BYTES as u64) {
            Ok(text) => text,
            Err(TreeError::NotFound) => {
                return Ok(Examined::Done(Finding::new(
                    SyncStatus::InvalidConfig,
                    format!("config file {path} no longer exists at {}", head.short()),
                )))
            }
            Err(TreeError::Read(e)) => {
                return Err(GitError::Failed {
                    repo: app.repo.clone(),
                    operation: "read file",
                    source: Box::new(e),
                }
                .into())
            }
            Err(e) => {
                return Ok(Examined::Done(Finding::new(
                    SyncStatus::InvalidConfig,
                    format!("config file {path} {e}"),
                )))
            }
        };
        // The same words as the trigger handler's, so the two never flip the reason.
        let cfg = match deployable_config(path, &text, &inner.plugins) {
            Ok(cfg) => cfg,
            Err(reason) => {
                return Ok(Examined::Done(Finding::new(
                    SyncStatus::InvalidConfig,
                    reason,
                )))
            }
        };
        let Some(plugin) = inner.plugins.platform_for(&cfg) else {
            return Ok(Examined::NotWatched {
                why: format!("no compiled-in plugin deploys {} apps", cfg.kind.as_str()),
            });
        };
        let plugin = match preview {
            None => plugin,
            Some(previews) => {
                if let Err(why) = previews.credentials_for(plugin.name(), &cfg) {
                    return Ok(Examined::NotWatched { why });
                }
                match previews.plugins.platform_for(&cfg) {
                    Some(plugin) => plugin,
                    None => {
                        return Ok(Examined::NotWatched {
                            why: format!("no {} plugin reads previews", plugin.name()),
                        })
                    }
                }
            }
        };
        if inner.plugins.synced_by_its_own_stage(&cfg) {
            return Ok(Examined::NotWatched {
                why: "the app syncs with its own commands (CUSTOM_SYNC), so its live state is not compared with Git".to_owned(),
            });
        }
        // The files the config names (a function manifest) must be valid too.
        if let Some(reason) = manifest_issues(path, &text, app.id.dir(), &root, &inner.plugins) {
            return Ok(Examined::Done(Finding::new(
                SyncStatus::InvalidConfig,
                reason,
            )));
        }
        // Sealed secrets are opened as a step opens them, so Git's side is what a deployment
        // applies; the values are redacted from what is found.
        let app_dir = match crate::sealing::unseal(
            inner.sealing.as_ref(),
            &app.id,
            root.join(app.id.dir()),
        ) {
            Ok(dir) => dir,
            Err(err) => {
                return Ok(Examined::Done(Finding::new(
                    SyncStatus::Unknown,
                    format!("cannot read the live state: {}", err.reason()),
                )))
            }
        };
        let values = app_dir.values().to_vec();
        let ctx = LiveContext {
            app_id: &app.id,
            app: &cfg,
            app_dir: &app_dir.dir,
            head: &head,
            last_deployed: app.last_deployment_finished_at,
            now: inner.clock.now(),
            jobs: inner.jobs.as_ref(),
            preview: preview.is_some(),
        };
        let finding = match async { plugin.live()?.live_state(ctx).await }.await {
            Ok(Live::NotRead) => {
                return Ok(Examined::NotWatched {
                    why: format!("the {} plugin does not read live state", plugin.name()),
                })
            }
            Ok(Live::Pending { what, job }) => return Ok(Examined::Pending { what, job }),
            Ok(Live::Read(live)) => {
                let live = crate::sealing::redact_live(live, &values);
                let status = if live.drift.is_empty() {
                    SyncStatus::Synced
                } else {
                    SyncStatus::OutOfSync
                };
                Finding {
                    status,
                    reason: format!("at {}: {}", head.short(), drift::summary(&live.drift)),
                    live: Some(live),
                }
            }
            // Permission or validation errors will not pass by retrying: say so on the app.
            Err(err @ StepError::Permanent(_)) => Finding::new(
                SyncStatus::Unknown,
                format!(
                    "cannot read the live state: {}",
                    gannet_sdk::sealed::redact(&err.reason(), &values)
                ),
            ),
            Err(source @ StepError::Transient { .. }) => {
                return Err(HandlerError::Live {
                    app: app.id.to_string(),
                    source,
                })
            }
        };
        Ok(Examined::Live {
            finding,
            cfg: Box::new(cfg),
            head,
        })
    }

    /// Starts a deployment of an OUT_OF_SYNC app when `trigger.onOutOfSync` allows it and no
    /// deployment of the app is already waiting. Either way the reason names the deployment
    /// that will run, in words a repeated check repeats exactly (so it writes nothing).
    async fn auto_sync(
        &self,
        app: &mut App,
        cfg: &AppConfig,
        compared: &CommitSha,
        now: Millis,
        changes: &mut Changes,
    ) -> Result<(), HandlerError> {
        if let Some(pause) = &app.paused {
            tracing::debug!(app = %app.name, id = %app.id, by = %pause.by, "no auto-sync: the app is paused");
            return Ok(());
        }
        let decision = determiner::on_out_of_sync(cfg, false, app.last_deployment_finished_at, now);
        let Decision::Deploy { reason } = decision else {
            tracing::debug!(app = %app.name, id = %app.id, reason = decision.reason(), "no auto-sync");
            return Ok(());
        };
        let waiting = self
            .inner
            .store
            .deployments(&DeploymentFilter {
                app: Some(app.id.clone()),
                statuses: vec![DeploymentStatus::Pending],
                limit: Some(1),
                before: None,
            })
            .await?;
        if let Some(d) = waiting.first() {
            tracing::debug!(app = %app.name, id = %app.id, pending = %d.id, "auto-sync not needed: a deployment is pending");
            app.sync_reason = pending_note(&app.sync_reason, d.trigger.kind, d.id.as_str());
            return Ok(());
        }
        let Some(repo) = self.inner.settings.repo(&app.repo) else {
            return Ok(());
        };
        // Never deploy an older commit than the branch has now: if it moved on since the
        // sweep, the next check compares with the new head.
        let head = self.inner.git.head(&app.repo, &repo.branch).await?;
        if &head.sha != compared {
            tracing::debug!(app = %app.name, id = %app.id, compared = %compared, head = %head.sha, "auto-sync waits: the branch moved on");
            return Ok(());
        }
        let trigger = Trigger {
            kind: TriggerKind::OnOutOfSync,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        };
        // One deployment per drift observation: the app's version is part of the id, and the
        // app write is conditional on that version.
        let cause = format!("ON_OUT_OF_SYNC:{}", app.version);
        let d = pending_deployment(app, cfg, &head, &repo.branch, trigger, &cause, now);
        tracing::info!(app = %app.name, id = %app.id, deployment = %d.id, %reason, "auto-sync triggered");
        app.sync_reason = pending_note(&app.sync_reason, TriggerKind::OnOutOfSync, d.id.as_str());
        crate::trigger::add_pending(changes, d, now);
        Ok(())
    }
}

/// The reason, with the deployment that will put the app back.
fn pending_note(reason: &str, kind: TriggerKind, deployment: &str) -> String {
    if kind == TriggerKind::OnOutOfSync {
        format!("{reason}; auto-sync started deployment {deployment}")
    } else {
        format!("{reason}; deployment {deployment} is pending")
    }
}

/// The event a check that moves the app from `before` to `after` raises, if any. (A deployment
/// that ends SUCCESS clears the drift on record and announces APPLICATION_SYNCED itself, so a
/// check after it raises OUT_OF_SYNC for drift still there or made by hand since.)
fn status_event(before: &App, after: &App) -> Option<EventKind> {
    match after.sync_status {
        _ if after.sync_status == before.sync_status => None,
        SyncStatus::Synced => Some(EventKind::ApplicationSynced),
        SyncStatus::OutOfSync => Some(EventKind::ApplicationOutOfSync),
        _ => None,
    }
}

/// What is wrong with the files the config at `path` names, as `file:line: field: message`,
/// read from the checkout at `root`; `None` when they are fine.
fn manifest_issues(
    path: &str,
    text: &str,
    app_dir: &str,
    root: &Path,
    plugins: &Plugins,
) -> Option<String> {
    // A repository is untrusted: no link (nor chain of links) out of it, nothing past the size
    // limit.
    let read = |rel: &str| {
        let path = tree::in_repo(app_dir, rel).ok_or(TreeError::OutsidePath)?;
        tree::read(root, &path, bounded::MAX_BYTES as u64)
    };
    // The app's directory too, so the plugin checks what a deployment would read.
    let dir = tree::dir_in(root, app_dir);
    let checked = check::check_app_files(
        path,
        text,
        plugins,
        &read,
        dir.as_deref().map(|d| (d, path)),
    );
    if checked.ok {
        return None;
    }
    let lines: Vec<String> = checked
        .errors
        .iter()
        .map(|i| {
            let line = i.line.map(|l| format!("{l}:")).unwrap_or_default();
            format!("{}:{line} {}: {}", i.file, i.field, i.message)
        })
        .collect();
    Some(lines.join("; "))
}

#[cfg(test)]
mod tests;
