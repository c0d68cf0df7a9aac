//! The trigger handler: discovers the apps of a repository branch at its head, runs PipeCD's
//! onCommit determiner for each, and creates PENDING deployments.
//!
//! It reads the branch head itself rather than trusting the message, so out-of-order or
//! duplicate triggers converge: whatever arrives last sees the newest head, and a head already
//! scanned is a no-op. Intermediate commits collapse into one deployment at the head.

use std::collections::BTreeMap;

use gannet_config::trigger::{self as determiner, Decision};
use gannet_config::{self as config, AppConfig};
use gannet_domain::app::{App, RepoState, SyncStatus};
use gannet_domain::deployment::{
    Commit, Deployment, DeploymentStatus, SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::duration::Millis;
use gannet_domain::ports::{Changes, CommitInfo, Expect, GitError, Write};
use gannet_domain::{AppId, CommitSha, DeploymentId, RepoId};
use gannet_events::{Event, EventKind, Message, TriggerCause};
use gannet_sdk::check;
use gannet_sdk::plugin::Plugins;

use crate::settings::FirstSight;
use crate::{Controller, HandlerError};

impl Controller {
    pub(crate) async fn trigger(
        &self,
        repo: &RepoId,
        cause: &TriggerCause,
    ) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let settings = inner.settings.repo(repo).ok_or_else(|| {
            HandlerError::Unprocessable(format!("repository {repo} is not configured"))
        })?;
        let head = inner.git.head(repo, &settings.branch).await?;
        // A push names who pushed; the deployments of its head name them as their trigger.
        let pusher = match cause {
            TriggerCause::Push { after, pusher, .. } if after == head.sha.as_str() => {
                pusher.as_str()
            }
            _ => "",
        };
        let state = inner.store.repo(repo).await?;
        if state.as_ref().and_then(|s| s.scanned_head.as_ref()) == Some(&head.sha) {
            tracing::debug!(repo = %repo, head = %head.sha, "head already triggered");
            return Ok(());
        }
        let now = inner.clock.now();
        let files = inner.git.list_files(repo, &head.sha).await?;
        let known: BTreeMap<AppId, App> = inner
            .store
            .apps()
            .await?
            .into_iter()
            .filter(|a| &a.repo == repo)
            .map(|a| (a.id.clone(), a))
            .collect();

        // Nothing stored for the repository: this is its first scan, and the settings say
        // whether the apps found deploy or are adopted as they run.
        let adopting = state.is_none() && settings.on_first_sight == FirstSight::Adopt;
        let mut changes = Changes::default();
        let mut seen = Vec::new();
        for path in files.iter().filter(|p| config::is_app_config_path(p)) {
            let id = AppId::new(repo, path);
            seen.push(id.clone());
            let before = known.get(&id);
            let parsed = self.deployable_at(repo, &head.sha, path).await?;
            let mut app = before
                .cloned()
                .unwrap_or_else(|| App::new(id.clone(), dir_name(&id), String::new(), now));
            match parsed {
                Err(reason) => {
                    app.sync_status = SyncStatus::InvalidConfig;
                    app.sync_reason = reason;
                }
                Ok(cfg) if app.paused.is_some() => {
                    // Not judged while paused, so its checked commit stays put: resuming
                    // judges every change pushed meanwhile (see `Controller::resume`).
                    describe(&mut app, &cfg, &inner.plugins);
                    tracing::info!(app = %app.name, id = %id, commit = %head.sha, "not triggered: the app is paused");
                }
                Ok(cfg) if adopting => {
                    describe(&mut app, &cfg, &inner.plugins);
                    app.last_checked_commit = Some(head.sha.clone());
                    tracing::info!(app = %app.name, id = %id, commit = %head.sha.short(), "adopted, not deployed: first sight of the repository (repos[].onFirstSight: adopt); the next commit that changes it deploys it, or run gannet sync");
                }
                Ok(cfg) => {
                    describe(&mut app, &cfg, &inner.plugins);
                    let changed = match &app.last_checked_commit {
                        Some(from) => match inner.git.changed_files(repo, from, &head.sha).await {
                            Ok(files) => Some(files),
                            // The last checked commit is gone (force push, fresh clone):
                            // nothing to compare with, so the app counts as touched.
                            Err(GitError::NoCommit { .. }) => None,
                            Err(e) => return Err(e.into()),
                        },
                        None => None,
                    };
                    match determiner::on_commit(&cfg, id.dir(), changed.as_deref()) {
                        Decision::Deploy { reason } => {
                            let trigger = Trigger {
                                kind: TriggerKind::OnCommit,
                                commander: String::new(),
                                pushed_by: pusher.to_owned(),
                                strategy: SyncStrategy::Auto,
                                gate_skip: None,
                            };
                            let d = pending_deployment(
                                &app,
                                &cfg,
                                &head,
                                &settings.branch,
                                trigger,
                                "ON_COMMIT",
                                now,
                            );
                            let reason = if state.is_none() {
                                format!("first sight of the repository (repos[].onFirstSight: deploy): {reason}")
                            } else {
                                reason
                            };
                            tracing::info!(app = %app.name, id = %id, deployment = %d.id, commit = %head.sha, %reason, "deployment triggered");
                            add_pending(&mut changes, d, now);
                        }
                        Decision::Skip { reason } => {
                            tracing::debug!(app = %app.name, id = %id, %reason, "not triggered");
                        }
                    }
                    // Judged at this head, deployed or not: the next head is compared with it,
                    // so a change the app ignores is not seen again by every later commit.
                    app.last_checked_commit = Some(head.sha.clone());
                }
            }
            put_if_changed(&mut changes, before, app, now);
        }
        for (id, app) in &known {
            if !seen.contains(id) && app.sync_status != SyncStatus::InvalidConfig {
                let mut gone = app.clone();
                gone.sync_status = SyncStatus::InvalidConfig;
                gone.sync_reason = format!(
                    "config file {} no longer exists at {}",
                    id.config_path(),
                    head.sha.short()
                );
                put_if_changed(&mut changes, Some(app), gone, now);
            }
        }
        let (expect, version) = match &state {
            Some(s) => (Expect::Version(s.version), s.version + 1),
            None => (Expect::Absent, 1),
        };
        changes.writes.push(Write::PutRepo {
            repo: RepoState {
                repo: repo.clone(),
                scanned_head: Some(head.sha.clone()),
                updated_at: now,
                version,
            },
            expect,
        });
        inner.store.apply(changes).await?;
        if let TriggerCause::Push { delivery, .. } = cause {
            tracing::info!(repo = %repo, head = %head.sha, delivery = %delivery, "push triggered");
        }
        Ok(())
    }

    /// The app config at `path` in `repo` at `commit`, if it exists, parses and validates
    /// ([`deployable_config`]); otherwise why not. The outer error is git's (retry).
    pub(crate) async fn deployable_at(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Result<AppConfig, String>, GitError> {
        let Some(text) = self.inner.git.read_file(repo, commit, path).await? else {
            return Ok(Err(format!("{path} does not exist at {}", commit.short())));
        };
        Ok(std::str::from_utf8(&text)
            .map_err(|e| format!("{path}: not UTF-8: {e}"))
            .and_then(|t| deployable_config(path, t, &self.inner.plugins)))
    }
}

/// The config at `path`, if it parses and every stage validates with these plugins; otherwise
/// why not, as `file:line: field: message` lines.
pub(crate) fn deployable_config(
    path: &str,
    text: &str,
    plugins: &Plugins,
) -> Result<AppConfig, String> {
    let cfg = config::parse_app_config(path, text).map_err(|e| e.to_string())?;
    let issues = check::validate(path, text, &cfg, plugins);
    if issues.is_empty() {
        return Ok(cfg);
    }
    Err(issues
        .iter()
        .map(|i| {
            let line = i.line.map(|l| format!("{l}:")).unwrap_or_default();
            format!("{path}:{line} {}: {}", i.field, i.message)
        })
        .collect::<Vec<_>>()
        .join("; "))
}

/// The app's name before its config parses: its directory's last component.
fn dir_name(id: &AppId) -> String {
    let dir = id.dir();
    let name = dir.rsplit('/').next().unwrap_or(dir);
    if name.is_empty() {
        id.config_path().to_owned()
    } else {
        name.to_owned()
    }
}

/// Copies what the config says about the app into its record.
pub(crate) fn describe(app: &mut App, cfg: &AppConfig, plugins: &Plugins) {
    app.name = cfg.name().to_owned();
    app.kind = cfg.kind.as_str().to_owned();
    app.labels = cfg.labels().clone();
    // Known from the config: an app no compiled-in platform plugin deploys has no live state.
    app.no_live_state = match plugins.platform_for(cfg) {
        None => Some(format!(
            "no compiled-in platform plugin deploys it ({})",
            cfg.platform()
                .unwrap_or("it runs its pipeline's stages only")
        )),
        Some(_) => None,
    };
    if app.sync_status == SyncStatus::InvalidConfig {
        app.sync_status = SyncStatus::Unknown;
        app.sync_reason.clear();
    }
}

/// Writes `app` if it differs from what is stored (bumping its version).
pub(crate) fn put_if_changed(
    changes: &mut Changes,
    before: Option<&App>,
    mut app: App,
    now: Millis,
) {
    if before == Some(&app) {
        return;
    }
    let expect = match before {
        Some(b) => Expect::Version(b.version),
        None => Expect::Absent,
    };
    app.version = before.map_or(1, |b| b.version + 1);
    app.updated_at = now;
    changes.writes.push(Write::PutApp {
        app: Box::new(app),
        expect,
    });
}

/// A new PENDING deployment of `app` at `head`, its id derived from app, commit and cause.
pub(crate) fn pending_deployment(
    app: &App,
    cfg: &AppConfig,
    head: &CommitInfo,
    branch: &str,
    trigger: Trigger,
    cause: &str,
    now: Millis,
) -> Deployment {
    Deployment {
        id: DeploymentId::derive(&app.id, &head.sha, cause),
        app: app.id.clone(),
        app_name: cfg.name().to_owned(),
        kind: cfg.kind.as_str().to_owned(),
        labels: cfg.labels().clone(),
        commit: Commit {
            sha: head.sha.clone(),
            branch: branch.to_owned(),
            message: head.message.clone(),
            author: head.author.clone(),
        },
        trigger,
        status: DeploymentStatus::Pending,
        status_reason: "waiting to be planned".into(),
        strategy: None,
        summary: String::new(),
        stages: Vec::new(),
        running_commit: None,
        timeout: cfg.timeout(),
        seq: 1,
        created_at: now,
        updated_at: now,
        planned_at: None,
        completed_at: None,
        due_at: now,
        cancel: None,
        blocked_by: None,
        mentions: Vec::new(),
        rollback_of: None,
        chain: None,
        chain_next: Vec::new(),
    }
}

/// Writes the new PENDING deployment `d` (once: a duplicate cause conflicts), asks its app
/// to be planned and announces it.
pub(crate) fn add_pending(changes: &mut Changes, d: Deployment, now: Millis) {
    changes
        .send
        .push(Message::Plan { app: d.app.clone() }.outgoing());
    changes
        .send
        .push(notify(EventKind::DeploymentTriggered, &d, now));
    changes.writes.push(Write::PutDeployment {
        deployment: Box::new(d),
        expect: Expect::Absent,
    });
}

/// A notification message about `d`.
pub(crate) fn notify(
    kind: EventKind,
    d: &Deployment,
    now: Millis,
) -> gannet_domain::ports::Outgoing {
    Message::Notify {
        event: Box::new(Event::deployment(kind, d, None, now)),
    }
    .outgoing()
}
