//! Drift detection: the sweep queues one check per app; each check compares the app's live
//! state with the desired state at its branch head, records the sync status and the drifted
//! fields, raises APPLICATION_SYNCED / APPLICATION_OUT_OF_SYNC when the status changes, and,
//! when the app opts in through `trigger.onOutOfSync`, starts a deployment to put it back.
//!
//! A check writes only when what it found differs from what is recorded, so a steady fleet
//! costs reads only. The app write is conditional on the version read, so a check racing a
//! deployment loses and looks again (then sees DEPLOYING).

use gannet_core::app::{App, SyncStatus};
use gannet_core::deployment::{DeploymentStatus, SyncStrategy, Trigger, TriggerKind};
use gannet_core::drift::{self, LiveState};
use gannet_core::plugin::{LiveContext, StepError};
use gannet_core::ports::{Changes, DeploymentFilter, Expect, Write};
use gannet_core::trigger::{self as determiner, Decision};
use gannet_core::AppId;
use gannet_events::{Event, EventKind, Message};

use crate::trigger::{deployable_config, notify, pending_deployment, put_if_changed};
use crate::{Controller, HandlerError};

/// What one drift check concluded, before it is written.
struct Finding {
    status: SyncStatus,
    reason: String,
    live: Option<LiveState>,
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

impl Controller {
    /// Queues a drift check for every app; returns how many. Each check runs as its own
    /// message, so a fleet spreads across workers (or Lambda invocations).
    pub async fn drift_sweep(&self) -> Result<usize, HandlerError> {
        let send: Vec<_> = self
            .inner
            .store
            .apps()
            .await?
            .into_iter()
            .map(|a| Message::DriftCheck { app: a.id }.outgoing())
            .collect();
        let queued = send.len();
        if queued > 0 {
            self.inner
                .store
                .apply(Changes {
                    writes: Vec::new(),
                    send,
                })
                .await?;
        }
        Ok(queued)
    }

    pub(crate) async fn drift_check(&self, id: &AppId) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(app) = inner.store.app(id).await? else {
            tracing::debug!(app = %id, "drift check for an app that no longer exists");
            return Ok(());
        };
        if app.active_deployment.is_some() {
            // The plan handler marked it DEPLOYING; the deployment decides what is live.
            return Ok(());
        }
        let (finding, cfg, head) = match self.examine(&app).await? {
            Examined::Done(finding) => (finding, None, None),
            Examined::Live { finding, cfg, head } => (finding, Some(cfg), Some(head)),
        };
        let now = inner.clock.now();
        let mut next = app.clone();
        next.sync_status = finding.status;
        next.sync_reason = finding.reason;
        if let Some(live) = finding.live {
            next.drift = live.drift;
            next.live = live.resources;
        } else {
            next.drift.clear();
        }

        let mut changes = Changes::default();
        if let (Some(cfg), Some(head)) = (&cfg, &head) {
            if next.sync_status == SyncStatus::OutOfSync {
                self.auto_sync(&mut next, cfg, head, now, &mut changes)
                    .await?;
            }
        }
        if next == app {
            return Ok(());
        }
        next.drift_changed_at = Some(now);
        let status_changed = next.sync_status != app.sync_status;
        put_if_changed(&mut changes, Some(&app), next.clone(), now);
        if status_changed {
            let kind = match next.sync_status {
                SyncStatus::Synced => Some(EventKind::ApplicationSynced),
                SyncStatus::OutOfSync => Some(EventKind::ApplicationOutOfSync),
                _ => None,
            };
            if let Some(kind) = kind {
                next.version += 1;
                changes.send.push(
                    Message::Notify {
                        event: Box::new(Event::application(kind, &next, now)),
                    }
                    .outgoing(),
                );
            }
            tracing::info!(app = %app.id, from = app.sync_status.as_str(), to = next.sync_status.as_str(), reason = %next.sync_reason, "sync status changed");
        }
        inner.store.apply(changes).await?;
        Ok(())
    }

    /// Reads the desired state at the branch head and the live state, without writing.
    async fn examine(&self, app: &App) -> Result<Examined, HandlerError> {
        let inner = &self.inner;
        let Some(repo) = inner.settings.repo(&app.repo) else {
            return Ok(Examined::Done(Finding::new(
                SyncStatus::Unknown,
                format!("repository {} is no longer configured", app.repo),
            )));
        };
        let head = inner.git.head(&app.repo, &repo.branch).await?;
        let path = app.id.config_path();
        let Some(bytes) = inner.git.read_file(&app.repo, &head.sha, path).await? else {
            return Ok(Examined::Done(Finding::new(
                SyncStatus::InvalidConfig,
                format!(
                    "config file {path} no longer exists at {}",
                    head.sha.short()
                ),
            )));
        };
        let cfg = match std::str::from_utf8(&bytes)
            .map_err(|e| format!("{path}: not UTF-8: {e}"))
            .and_then(|text| deployable_config(path, text, &inner.plugins))
        {
            Ok(cfg) => cfg,
            Err(reason) => {
                return Ok(Examined::Done(Finding::new(
                    SyncStatus::InvalidConfig,
                    reason,
                )))
            }
        };
        let Some(plugin) = inner.plugins.platform_for(&cfg) else {
            return Ok(Examined::Done(Finding::new(
                SyncStatus::Unknown,
                format!("no compiled-in plugin deploys {} apps", cfg.kind.as_str()),
            )));
        };
        let root = inner.git.checkout(&app.repo, &head.sha).await?;
        let ctx = LiveContext {
            app: &cfg,
            app_dir: &root.join(app.id.dir()),
        };
        let finding = match plugin.live_state(ctx).await {
            Ok(None) => Finding::new(
                SyncStatus::Unknown,
                format!(
                    "the {} plugin does not detect drift for {} apps",
                    plugin.name(),
                    cfg.kind.as_str()
                ),
            ),
            Ok(Some(live)) => {
                let status = if live.drift.is_empty() {
                    SyncStatus::Synced
                } else {
                    SyncStatus::OutOfSync
                };
                Finding {
                    status,
                    reason: format!("at {}: {}", head.sha.short(), drift::summary(&live.drift)),
                    live: Some(live),
                }
            }
            // Permission or validation errors will not pass by retrying: say so on the app.
            Err(StepError::Permanent(message)) => Finding::new(
                SyncStatus::Unknown,
                format!("cannot read the live state: {message}"),
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
    /// deployment of the app is already waiting.
    async fn auto_sync(
        &self,
        app: &mut App,
        cfg: &gannet_core::config::AppConfig,
        head: &gannet_core::ports::CommitInfo,
        now: gannet_core::duration::Millis,
        changes: &mut Changes,
    ) -> Result<(), HandlerError> {
        let decision = determiner::on_out_of_sync(cfg, false, app.last_deployment_finished_at, now);
        let Decision::Deploy { reason } = decision else {
            tracing::debug!(app = %app.id, reason = decision.reason(), "no auto-sync");
            return Ok(());
        };
        let waiting = self
            .inner
            .store
            .deployments(&DeploymentFilter {
                app: Some(app.id.clone()),
                statuses: vec![DeploymentStatus::Pending],
                limit: Some(1),
            })
            .await?;
        if let Some(d) = waiting.first() {
            tracing::debug!(app = %app.id, pending = %d.id, "auto-sync not needed: a deployment is pending");
            return Ok(());
        }
        let Some(repo) = self.inner.settings.repo(&app.repo) else {
            return Ok(());
        };
        let trigger = Trigger {
            kind: TriggerKind::OnOutOfSync,
            commander: String::new(),
            strategy: SyncStrategy::Auto,
        };
        // One deployment per drift observation: the app's version is part of the id, and the
        // app write below is conditional on that version.
        let cause = format!("ON_OUT_OF_SYNC:{}", app.version);
        let d = pending_deployment(app, cfg, head, &repo.branch, trigger, &cause, now);
        tracing::info!(app = %app.id, deployment = %d.id, %reason, "auto-sync triggered");
        app.sync_reason = format!("{}; auto-sync started deployment {}", app.sync_reason, d.id);
        changes.send.push(
            Message::Plan {
                app: app.id.clone(),
            }
            .outgoing(),
        );
        changes
            .send
            .push(notify(EventKind::DeploymentTriggered, &d, now));
        changes.writes.push(Write::PutDeployment {
            deployment: Box::new(d),
            expect: Expect::Absent,
        });
        Ok(())
    }
}

enum Examined {
    /// No live state was read (bad config, no plugin, repository gone).
    Done(Finding),
    Live {
        finding: Finding,
        cfg: Box<gannet_core::config::AppConfig>,
        head: gannet_core::ports::CommitInfo,
    },
}
