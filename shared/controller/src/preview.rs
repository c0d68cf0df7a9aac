//! Plan previews: what merging a pull request into a watched branch would change, app by app,
//! as each platform says it, shown as a GitHub check run on the pull request's head.
//!
//! A `pull_request` delivery (opened, synchronize, reopened) to a watched branch writes a
//! QUEUED [`Preview`] (its id derived from repository, pull request and head, so a repeated
//! delivery finds it) and queues [`Message::Preview`]. The handler then, on each delivery:
//!
//! 1. ends the preview SUPERSEDED when a newer head of the pull request was received (its
//!    check run is completed `cancelled`, naming the newer head);
//! 2. keeps a QUEUED preview waiting while the pull request's last preview started less than
//!    `planPreview.minInterval` ago, so a burst of pushes is previewed once, at its newest head;
//! 3. starts it: fetches the head, finds where it and the branch part (the merge base), selects
//!    the apps the pull request's changes touch by the rules a push uses, plans each one's
//!    pipeline, and creates the check run `in_progress`;
//! 4. reads each selected app's live state against the desired state at the head, through the
//!    plugins built with the deploy targets' `planPreview` credentials (never the deploy
//!    credentials): the fields of each Kubernetes object Git sets against the live object (not
//!    a server-side dry run: Kubernetes authorizes a dry run as the write itself, and preview
//!    credentials must not write), a Terraform plan (a job), the Lambda,
//!    ECS and Cloud Run fields. A read still running (a job) is looked at again after the job
//!    runner's poll interval;
//! 5. when every app is done, completes the check run: `success` when something would change,
//!    `neutral` when nothing would, `failure` when an app's preview failed.
//!
//! An app whose target has no `planPreview`, or a pull request from a fork whose author the
//! repository's settings do not list, is previewed without reading the platform at all: its
//! section shows the diff of the app's files and says why.
//!
//! Every step is safe to repeat: the check run is replaced (never created twice once its id
//! is stored), the record is written conditionally on its version, and a duplicate delivery
//! of the message finds the record already moved on.

use std::sync::Arc;

use gannet_config as config;
use gannet_config::trigger::{self as determiner, Decision};
use gannet_domain::app::{App, SyncStatus};
use gannet_domain::callers::{Caller, Need};
use gannet_domain::deployment::{SyncStrategy, Trigger, TriggerKind};
use gannet_domain::drift::LiveState;
use gannet_domain::duration::Millis;
use gannet_domain::ports::{
    Changes, CheckConclusion, CheckRun, CheckRuns, CheckStatus, CommitInfo, Expect, GitError,
    PreviewFilter, StoreError, Write,
};
use gannet_domain::preview::{
    cut_details, AppPreview, Preview, PreviewResult, PreviewStatus, MAX_DETAILS_BYTES,
};
use gannet_domain::{AppId, CommitSha, GoDuration, PreviewId, RepoId};
use gannet_events::github::PullRequest;
use gannet_events::Message;
use gannet_sdk::jobs::JobKey;
use gannet_sdk::previews::Previews;
use serde_json::json;

use crate::drift::Examined;
use crate::settings::RepoSettings;
use crate::trigger::pending_deployment;
use crate::webhook::WebhookResponse;
use crate::{ApiError, Controller, HandlerError};

/// The check run's name on the pull request's head.
pub const CHECK_NAME: &str = "gannet/plan-preview";

/// The most apps one preview reads; more are listed as not previewed.
pub const MAX_APPS: usize = 50;

/// The details of every app together stay under this many bytes in the record (DynamoDB's
/// item limit is 400 KB).
const DETAILS_BUDGET: usize = 256 * 1024;

/// GitHub's limit on a check run's summary and text (characters; kept in bytes too).
const CHECK_TEXT_LIMIT: usize = 60_000;

/// The largest file whose diff a preview without credentials shows.
const MAX_DIFF_FILE: usize = 256 * 1024;

/// A day, for the per-day cap on one pull request's previews.
const DAY: Millis = Millis(24 * 3600 * 1000);

impl Controller {
    /// The same controller, reading plan previews with `previews` (the plugins built with the
    /// deploy targets' `planPreview` credentials).
    pub fn with_previews(mut self, previews: Previews) -> Self {
        Arc::make_mut(&mut self.inner).previews = previews;
        self
    }

    /// The same controller, showing plan previews as check runs on pull requests.
    pub fn with_check_runs(mut self, checks: Arc<dyn CheckRuns>) -> Self {
        Arc::make_mut(&mut self.inner).checks = Some(checks);
        self
    }

    /// The same controller, linking check runs to the console at `url` (its root).
    pub fn with_console_url(mut self, url: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.inner).console_url = Some(url.into().trim_end_matches('/').into());
        self
    }

    /// A `pull_request` delivery, its signature and delivery id checked: queues a preview of
    /// its head when it was opened, pushed to or reopened against a watched branch.
    pub(crate) async fn pull_request_delivery(
        &self,
        delivery: String,
        pr: PullRequest,
        repo: &RepoSettings,
    ) -> Result<WebhookResponse, HandlerError> {
        if pr.base_ref != repo.branch {
            return Ok(WebhookResponse::new(
                202,
                "ignored",
                format!(
                    "pull request #{} is to branch {} (repository {} watches {})",
                    pr.number, pr.base_ref, repo.id, repo.branch
                ),
            ));
        }
        if !repo.plan_preview.enabled {
            return Ok(WebhookResponse::new(
                202,
                "ignored",
                format!(
                    "plan previews are off for repository {} (repos[].planPreview.enabled)",
                    repo.id
                ),
            ));
        }
        let fork = pr.from_fork();
        let author: String = pr.author.chars().take(100).collect();
        let preview = self.new_preview(
            repo,
            Some(pr.number),
            pr.head.clone(),
            author,
            fork,
            repo.plan_preview.credentials_for(fork, &pr.author),
        );
        let id = preview.id.clone();
        let record = Write::RecordDelivery {
            id: delivery.clone(),
            at: preview.created_at,
        };
        let changes = Changes {
            writes: vec![
                record.clone(),
                Write::PutPreview {
                    preview: Box::new(preview),
                    expect: Expect::Absent,
                },
            ],
            send: vec![Message::Preview {
                preview: id.clone(),
            }
            .outgoing()],
        };
        match self.inner.store.apply(changes).await {
            Ok(()) => {
                tracing::info!(repo = %repo.id, pr = pr.number, head = %pr.head, preview = %id, fork, "plan preview queued");
                Ok(WebhookResponse {
                    status: 202,
                    body: json!({"status": "queued", "repo": repo.id, "delivery": delivery, "preview": id}),
                })
            }
            Err(StoreError::Conflict { .. }) => {
                // The delivery was received before, or another delivery (a redelivery, a
                // reopen) already asked for this head: record this one, and let it stand.
                match self
                    .inner
                    .store
                    .apply(Changes {
                        writes: vec![record],
                        send: vec![],
                    })
                    .await
                {
                    Ok(()) => Ok(WebhookResponse {
                        status: 200,
                        body: json!({"status": "duplicate", "reason": format!("head {} of pull request #{} is previewed already", pr.head.short(), pr.number), "preview": id}),
                    }),
                    Err(StoreError::Conflict { .. }) => Ok(WebhookResponse::new(
                        200,
                        "duplicate",
                        format!("delivery {delivery} was already received"),
                    )),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    fn new_preview(
        &self,
        repo: &RepoSettings,
        pr: Option<u64>,
        head: CommitSha,
        author: String,
        fork: bool,
        credentials: Result<(), String>,
    ) -> Preview {
        let now = self.inner.clock.now();
        Preview {
            id: PreviewId::derive(&repo.id, pr, &head),
            repo: repo.id.clone(),
            pr,
            head,
            base_ref: repo.branch.clone(),
            base: None,
            merge_base: None,
            author,
            fork,
            credentials: credentials.is_ok(),
            status: PreviewStatus::Queued,
            result: PreviewResult::Pending,
            reason: credentials.err().unwrap_or_default(),
            check_run: None,
            apps: Vec::new(),
            created_at: now,
            started_at: None,
            updated_at: now,
            version: 1,
        }
    }

    /// `POST /api/v1/plan-previews`: a preview of `head` against the watched branch of `repo`
    /// (the only repository when `None`), for a CI system that asks gannet itself. Only a
    /// caller who may deploy gets one; it reads with the preview credentials. Asking again for
    /// the same head answers the same preview.
    pub async fn request_preview(
        &self,
        repo: Option<&str>,
        head: &str,
        caller: &Caller,
    ) -> Result<Preview, ApiError> {
        if !caller.role.allows(Need::Deploy) {
            return Err(ApiError::Forbidden(format!(
                "{} has the role {}; a plan preview runs the commit's code and needs the role {}",
                caller.name,
                caller.role,
                Need::Deploy.roles()
            )));
        }
        let head =
            CommitSha::parse(head).map_err(|e| ApiError::BadRequest(format!("head: {e}")))?;
        let repos = &self.inner.settings.repos;
        let settings = match repo {
            Some(id) => repos
                .iter()
                .find(|r| r.id.as_str() == id)
                .ok_or_else(|| ApiError::NotFound(format!("repository {id} is not configured")))?,
            None => match repos.as_slice() {
                [one] => one,
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "name the repository (repo): {} are configured",
                        repos.len()
                    )))
                }
            },
        };
        if !settings.plan_preview.enabled {
            return Err(ApiError::Conflict(format!(
                "plan previews are off for repository {} (repos[].planPreview.enabled)",
                settings.id
            )));
        }
        let preview = self.new_preview(settings, None, head, caller.name.clone(), false, Ok(()));
        let id = preview.id.clone();
        let changes = Changes {
            writes: vec![Write::PutPreview {
                preview: Box::new(preview),
                expect: Expect::Absent,
            }],
            send: vec![Message::Preview {
                preview: id.clone(),
            }
            .outgoing()],
        };
        match self.inner.store.apply(changes).await {
            Ok(()) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        tracing::info!(repo = %settings.id, preview = %id, by = %caller.name, "plan preview requested");
        self.get_preview(id.as_str()).await
    }

    /// One preview, by id.
    pub async fn get_preview(&self, id: &str) -> Result<Preview, ApiError> {
        let parsed = PreviewId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        self.inner
            .store
            .preview(&parsed)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no plan preview {id}")))
    }

    /// Previews, newest first: of a repository, of one of its pull requests.
    pub async fn list_previews(
        &self,
        repo: Option<&str>,
        pr: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Preview>, ApiError> {
        let repo = repo
            .map(RepoId::parse)
            .transpose()
            .map_err(|e| ApiError::BadRequest(format!("repo: {e}")))?;
        if pr.is_some() && repo.is_none() {
            return Err(ApiError::BadRequest("pr needs repo".into()));
        }
        Ok(self
            .inner
            .store
            .previews(&PreviewFilter {
                repo,
                pr,
                statuses: Vec::new(),
                limit: Some(limit),
            })
            .await?)
    }

    /// [`Message::Preview`]: moves a preview on (see the module).
    pub(crate) async fn preview(&self, id: &PreviewId) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(stored) = inner.store.preview(id).await? else {
            tracing::debug!(preview = %id, "no such plan preview");
            return Ok(());
        };
        if stored.status.is_terminal() {
            return Ok(());
        }
        let now = inner.clock.now();
        let Some(repo) = inner.settings.repo(&stored.repo).cloned() else {
            let reason = format!("repository {} is no longer configured", stored.repo);
            return self.end(stored, PreviewStatus::Failed, reason).await;
        };
        if let Some(pr) = stored.pr {
            let limits = &repo.plan_preview;
            let others = inner
                .store
                .previews(&PreviewFilter {
                    repo: Some(stored.repo.clone()),
                    pr: Some(pr),
                    statuses: Vec::new(),
                    limit: Some(limits.max_per_day as usize + 20),
                })
                .await?;
            let newer = others.iter().find(|o| {
                o.id != stored.id && (o.created_at, &o.id) > (stored.created_at, &stored.id)
            });
            if let Some(newer) = newer {
                let reason = format!(
                    "superseded by head {} of pull request #{pr}",
                    newer.head.short()
                );
                return self.end(stored, PreviewStatus::Superseded, reason).await;
            }
            if stored.status == PreviewStatus::Queued {
                let earlier = others.iter().filter(|o| o.id != stored.id);
                if let Some(last) = earlier.clone().filter_map(|o| o.started_at).max() {
                    let next = Millis(last.0 + limits.min_interval.as_millis());
                    if now < next {
                        let wait = GoDuration::from_millis(next.0 - now.0);
                        tracing::info!(preview = %id, pr, wait = %wait, "plan preview waits for planPreview.minInterval");
                        inner
                            .store
                            .apply(Changes {
                                writes: vec![],
                                send: vec![Message::Preview {
                                    preview: id.clone(),
                                }
                                .outgoing_after(wait)],
                            })
                            .await?;
                        return Ok(());
                    }
                }
                let today = earlier
                    .filter(|o| {
                        o.started_at
                            .is_some_and(|s| now.0.saturating_sub(s.0) < DAY.0)
                    })
                    .count();
                if today >= limits.max_per_day as usize {
                    let reason = format!(
                        "pull request #{pr} had {today} previews in the last day (planPreview.maxPerDay: {}); push again later",
                        limits.max_per_day
                    );
                    return self.end(stored, PreviewStatus::Done, reason).await;
                }
            }
        }
        let preview = match stored.status {
            PreviewStatus::Queued => match self.start(stored.clone(), &repo).await? {
                Ok(started) => started,
                Err(reason) => return self.end(stored, PreviewStatus::Failed, reason).await,
            },
            _ => stored,
        };
        self.advance(preview).await
    }

    /// Selects and plans the apps of a QUEUED preview, creates its check run and stores it
    /// RUNNING. `Err` is why it cannot be previewed at all.
    async fn start(
        &self,
        stored: Preview,
        repo: &RepoSettings,
    ) -> Result<Result<Preview, String>, HandlerError> {
        let inner = &self.inner;
        let commits = match inner
            .git
            .pull_request(&stored.repo, &repo.branch, stored.pr, &stored.head)
            .await
        {
            Ok(commits) => commits,
            Err(
                e @ (GitError::NoCommit { .. }
                | GitError::NoBranch { .. }
                | GitError::PullRequest { .. }),
            ) => return Ok(Err(e.to_string())),
            Err(e) => return Err(e.into()),
        };
        let mut preview = stored.clone();
        preview.base = Some(commits.base.clone());
        preview.merge_base = Some(commits.merge_base.clone());
        let (apps, left_out) = self.select_apps(&preview, &commits.head).await?;
        preview.apps = apps;
        if left_out > 0 {
            let note =
                format!("{left_out} more apps are touched and not previewed (at most {MAX_APPS})");
            preview.reason = join_reason(&preview.reason, &note);
        }
        preview.status = PreviewStatus::Running;
        preview.started_at = Some(inner.clock.now());
        if preview.check_run.is_none() {
            preview.check_run = self.create_check_run(&preview).await;
        }
        Ok(Ok(self.save(&stored, preview).await?))
    }

    /// The apps the pull request touches, by the rules a push uses, each planned; and how
    /// many more were left out.
    async fn select_apps(
        &self,
        preview: &Preview,
        head: &CommitInfo,
    ) -> Result<(Vec<AppPreview>, usize), HandlerError> {
        let inner = &self.inner;
        let repo = &preview.repo;
        let merge_base = preview.merge_base.as_ref().unwrap_or(&preview.head);
        let changed = inner.git.changed_files(repo, merge_base, &head.sha).await?;
        let files = inner.git.list_files(repo, &head.sha).await?;
        let known = inner.store.apps().await?;
        let mut apps = Vec::new();
        for path in files.iter().filter(|p| config::is_app_config_path(p)) {
            let id = AppId::new(repo, path);
            let touched = |p: &String| p == path || is_under(p, id.dir());
            let cfg = match self.deployable_at(repo, &head.sha, path).await? {
                Ok(cfg) => cfg,
                Err(reason) if changed.iter().any(touched) => {
                    apps.push(app_preview(
                        &id,
                        dir_of(&id),
                        "",
                        PreviewResult::Error,
                        reason,
                    ));
                    continue;
                }
                Err(_) => continue,
            };
            let why = match determiner::on_commit(&cfg, id.dir(), Some(&changed)) {
                Decision::Deploy { reason } => reason,
                Decision::Skip { .. } => continue,
            };
            let stored = known.iter().find(|a| a.id == id);
            let pipeline = self.planned_pipeline(stored, &id, &cfg, head).await?;
            let mut app = app_preview(
                &id,
                cfg.name().to_owned(),
                cfg.kind.as_str(),
                PreviewResult::Pending,
                "waiting for its read".into(),
            );
            app.pipeline = pipeline;
            app.why = why;
            app.credentials = preview.credentials;
            apps.push(app);
        }
        // A config the pull request deletes: the app is no longer deployed.
        for path in changed.iter().filter(|p| config::is_app_config_path(p)) {
            if !files.contains(path) {
                let id = AppId::new(repo, path);
                let name = known
                    .iter()
                    .find(|a| a.id == id)
                    .map_or_else(|| dir_of(&id), |a| a.name.clone());
                let mut app = app_preview(
                    &id,
                    name,
                    "",
                    PreviewResult::Changes,
                    format!("{path} is deleted: gannet stops deploying the app (what it deployed stays on the platform)"),
                );
                app.why = format!("{path} is deleted");
                apps.push(app);
            }
        }
        let left_out = apps.len().saturating_sub(MAX_APPS);
        apps.truncate(MAX_APPS);
        Ok((apps, left_out))
    }

    /// The pipeline a deployment of `head` would run, as the planner says, with its reason.
    async fn planned_pipeline(
        &self,
        stored: Option<&App>,
        id: &AppId,
        cfg: &gannet_config::AppConfig,
        head: &CommitInfo,
    ) -> Result<String, HandlerError> {
        let now = self.inner.clock.now();
        let app = stored.cloned().unwrap_or_else(|| {
            App::new(
                id.clone(),
                cfg.name().to_owned(),
                cfg.kind.as_str().to_owned(),
                now,
            )
        });
        let trigger = Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        };
        let mut d = pending_deployment(&app, cfg, head, "", trigger, "PREVIEW", now);
        d.running_commit = app.running_commit.clone();
        Ok(match self.build_plan(&app, &d).await? {
            Ok((plan, _)) => {
                let stages: Vec<&str> = plan
                    .stages
                    .iter()
                    .filter(|s| s.visible && !s.rollback)
                    .map(|s| s.name.as_str())
                    .collect();
                match plan.strategy {
                    SyncStrategy::Pipeline => {
                        format!("PIPELINE: {} ({})", stages.join(" → "), plan.summary)
                    }
                    other => format!("{} ({})", other.as_str(), plan.summary),
                }
            }
            Err(reason) => format!("cannot be planned: {reason}"),
        })
    }

    /// Reads the apps still pending; completes the preview when none is.
    async fn advance(&self, stored: Preview) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let mut preview = stored.clone();
        let budget = (DETAILS_BUDGET / preview.apps.len().max(1)).min(MAX_DETAILS_BYTES);
        // The pull request's changed files, read once for every app shown as its files' diff.
        let changed = ChangedFiles::new();
        for i in 0..preview.apps.len() {
            if preview.apps[i].result != PreviewResult::Pending {
                continue;
            }
            let read = self.read_app(&preview, &preview.apps[i], &changed).await?;
            let app = &mut preview.apps[i];
            match read {
                Read::Pending { what, job } => {
                    app.summary = what;
                    app.job = job.map(|k| k.as_str().to_owned());
                }
                Read::Found {
                    result,
                    summary,
                    details,
                    credentials,
                } => {
                    app.result = result;
                    app.summary = summary;
                    app.details = cut_details(&details, budget);
                    app.credentials = credentials;
                    app.job = None;
                }
            }
        }
        preview.result = Preview::overall(&preview.apps);
        let pending = preview.result == PreviewResult::Pending;
        if !pending {
            preview.status = PreviewStatus::Done;
        }
        if preview.check_run.is_none() {
            preview.check_run = self.create_check_run(&preview).await;
        } else if !pending || preview.apps != stored.apps {
            self.update_check_run(&preview).await?;
        }
        let saved = self.save(&stored, preview).await?;
        if pending {
            // Looked at as often as the job runner says for reads running this long.
            let started = saved.started_at.unwrap_or(saved.created_at);
            let running_for = inner.clock.now().0.saturating_sub(started.0);
            let after = inner
                .jobs
                .poll_interval(GoDuration::from_millis(running_for));
            inner
                .store
                .apply(Changes {
                    writes: vec![],
                    send: vec![Message::Preview {
                        preview: saved.id.clone(),
                    }
                    .outgoing_after(after)],
                })
                .await?;
        } else {
            tracing::info!(preview = %saved.id, repo = %saved.repo, pr = ?saved.pr, head = %saved.head.short(), result = saved.result.as_str(), "plan preview done");
        }
        Ok(())
    }

    /// One app's preview: its live state read with the preview credentials, or its files'
    /// diff when it may not be read.
    async fn read_app(
        &self,
        preview: &Preview,
        app: &AppPreview,
        changed: &ChangedFiles,
    ) -> Result<Read, HandlerError> {
        let no_read =
            |why: String| async move { self.files_diff(preview, &app.app, why, changed).await };
        if !preview.credentials {
            return no_read(preview.reason.clone()).await;
        }
        let stored = self.inner.store.app(&app.app).await?;
        let now = self.inner.clock.now();
        let subject = stored
            .unwrap_or_else(|| App::new(app.app.clone(), app.name.clone(), app.kind.clone(), now));
        Ok(match self.examine_preview(&subject, &preview.head).await? {
            Examined::Pending { what, job } => Read::Pending { what, job },
            Examined::NotWatched { why } => return no_read(why).await,
            Examined::Done(finding) => Read::Found {
                result: PreviewResult::Error,
                summary: finding.reason.clone(),
                details: finding.reason,
                credentials: true,
            },
            Examined::Live { finding, .. } => match finding.status {
                SyncStatus::Synced => Read::Found {
                    result: PreviewResult::NoChanges,
                    summary: "merging changes nothing on the platform".into(),
                    details: String::new(),
                    credentials: true,
                },
                SyncStatus::OutOfSync => {
                    let live = finding.live.unwrap_or_default();
                    Read::Found {
                        result: PreviewResult::Changes,
                        summary: changes_summary(&live),
                        details: render_changes(&live),
                        credentials: true,
                    }
                }
                _ => Read::Found {
                    result: PreviewResult::Error,
                    summary: finding.reason.clone(),
                    details: finding.reason,
                    credentials: true,
                },
            },
        })
    }

    /// The diff of an app's files between the merge base and the head, for an app previewed
    /// without reading the platform (`why`).
    async fn files_diff(
        &self,
        preview: &Preview,
        app: &AppId,
        why: String,
        changed: &ChangedFiles,
    ) -> Result<Read, HandlerError> {
        let git = &self.inner.git;
        let base = preview.merge_base.as_ref().unwrap_or(&preview.head);
        let changed = changed
            .get_or_try_init(|| git.changed_files(&preview.repo, base, &preview.head))
            .await?;
        let mut details = format!("not read from the platform: {why}\n\n");
        let mut count = 0;
        for path in changed.iter().filter(|p| is_under(p, app.dir())) {
            count += 1;
            let old = git.read_file(&preview.repo, base, path).await?;
            let new = git.read_file(&preview.repo, &preview.head, path).await?;
            details.push_str(&file_diff(path, old.as_deref(), new.as_deref()));
        }
        Ok(Read::Found {
            result: if count == 0 {
                PreviewResult::NoChanges
            } else {
                PreviewResult::Changes
            },
            summary: format!("{count} files of the app change (the platform was not read: {why})"),
            details,
            credentials: false,
        })
    }

    /// Ends a preview that is not done (superseded, failed, or refused by the day's cap) with
    /// `reason`, completing its check run.
    async fn end(
        &self,
        stored: Preview,
        status: PreviewStatus,
        reason: String,
    ) -> Result<(), HandlerError> {
        let mut preview = stored.clone();
        preview.status = status;
        preview.reason = join_reason(&stored.reason, &reason);
        preview.result = match status {
            PreviewStatus::Failed => PreviewResult::Error,
            _ => PreviewResult::NoChanges,
        };
        for app in preview
            .apps
            .iter_mut()
            .filter(|a| a.result == PreviewResult::Pending)
        {
            app.summary = format!("not previewed: {reason}");
            app.result = PreviewResult::NoChanges;
            // Its read's job (a plan) is of no use now: stopped, and safe to stop twice.
            if let Some(key) = app.job.take().as_deref().and_then(JobKey::parse) {
                if let Err(e) = self.inner.jobs.cancel(&key).await {
                    tracing::warn!(preview = %stored.id, job = %key, error = %e, "a superseded preview's job could not be stopped");
                }
            }
        }
        if preview.check_run.is_some() {
            self.update_check_run(&preview).await?;
        } else if stored.pr.is_some() && status != PreviewStatus::Superseded {
            preview.check_run = self.create_check_run(&preview).await;
        }
        let saved = self.save(&stored, preview).await?;
        tracing::info!(preview = %saved.id, status = saved.status.as_str(), reason = %reason, "plan preview ended");
        Ok(())
    }

    /// Writes `next` over `stored` (conditional on its version); a conflict is retried by
    /// the queue, which finds the preview as the other writer left it.
    async fn save(&self, stored: &Preview, mut next: Preview) -> Result<Preview, HandlerError> {
        next.version = stored.version + 1;
        next.updated_at = self.inner.clock.now();
        self.inner
            .store
            .apply(Changes {
                writes: vec![Write::PutPreview {
                    preview: Box::new(next.clone()),
                    expect: Expect::Version(stored.version),
                }],
                send: vec![],
            })
            .await?;
        Ok(next)
    }

    /// Creates the preview's check run; `None` when there is nowhere to show it (no GitHub
    /// checks configured, a preview asked through the API) or GitHub refused (logged: the
    /// preview itself goes on, and is in the console).
    async fn create_check_run(&self, preview: &Preview) -> Option<u64> {
        let checks = self.inner.checks.as_ref()?;
        preview.pr?;
        let run = self.check_run(preview);
        match checks.create(&preview.repo, &run).await {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!(preview = %preview.id, error = %crate::error_chain(e.as_ref()), "check run not created");
                None
            }
        }
    }

    async fn update_check_run(&self, preview: &Preview) -> Result<(), HandlerError> {
        let (Some(checks), Some(id)) = (self.inner.checks.as_ref(), preview.check_run) else {
            return Ok(());
        };
        let run = self.check_run(preview);
        checks
            .update(&preview.repo, id, &run)
            .await
            .map_err(|source| HandlerError::CheckRun {
                what: format!("check run {id} of plan preview {}", preview.id),
                source,
            })
    }

    /// The check run showing `preview`.
    pub(crate) fn check_run(&self, preview: &Preview) -> CheckRun {
        let details_url = self
            .inner
            .console_url
            .as_ref()
            .map(|root| format!("{root}/previews/{}", preview.id));
        render_check_run(preview, details_url)
    }
}

/// The files a pull request changes, read on first need.
type ChangedFiles = tokio::sync::OnceCell<Vec<String>>;

/// What one app's read found.
enum Read {
    Pending {
        what: String,
        job: Option<JobKey>,
    },
    Found {
        result: PreviewResult,
        summary: String,
        details: String,
        credentials: bool,
    },
}

fn app_preview(
    id: &AppId,
    name: String,
    kind: &str,
    result: PreviewResult,
    summary: String,
) -> AppPreview {
    AppPreview {
        app: id.clone(),
        name,
        kind: kind.to_owned(),
        result,
        details: if result == PreviewResult::Error {
            summary.clone()
        } else {
            String::new()
        },
        summary,
        pipeline: String::new(),
        why: String::new(),
        credentials: false,
        job: None,
    }
}

fn dir_of(id: &AppId) -> String {
    let dir = id.dir();
    dir.rsplit('/')
        .next()
        .filter(|d| !d.is_empty())
        .unwrap_or(dir)
        .to_owned()
}

fn is_under(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn join_reason(before: &str, more: &str) -> String {
    match (before.is_empty(), more.is_empty()) {
        (true, _) => more.to_owned(),
        (_, true) => before.to_owned(),
        _ => format!("{before}; {more}"),
    }
}

/// "3 changes: spec.image, ..." for a finding that differs.
fn changes_summary(live: &LiveState) -> String {
    let n = live.drift.len();
    let fields: Vec<&str> = live
        .drift
        .iter()
        .take(3)
        .map(|f| f.field.as_str())
        .collect();
    let more = if n > 3 {
        format!(", and {} more", n - 3)
    } else {
        String::new()
    };
    format!(
        "{n} change{}: {}{more}",
        if n == 1 { "" } else { "s" },
        fields.join(", ")
    )
}

/// Each field that would change, live value then the merged one, as a diff a person reads.
fn render_changes(live: &LiveState) -> String {
    let mut out = String::from("--- live\n+++ after merging\n");
    for f in &live.drift {
        out.push_str(&format!("@@ {} @@\n-{}\n+{}\n", f.field, f.live, f.git));
    }
    out
}

/// A unified diff of one file between two versions (`None`: absent).
fn file_diff(path: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    let text = |b: Option<&[u8]>| -> Result<String, &'static str> {
        match b {
            None => Ok(String::new()),
            Some(b) if b.len() > MAX_DIFF_FILE => Err("too large to show"),
            Some(b) => std::str::from_utf8(b)
                .map(str::to_owned)
                .map_err(|_| "not text"),
        }
    };
    match (text(old), text(new)) {
        (Ok(a), Ok(b)) => similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(
                &if old.is_some() {
                    format!("a/{path}")
                } else {
                    "/dev/null".into()
                },
                &if new.is_some() {
                    format!("b/{path}")
                } else {
                    "/dev/null".into()
                },
            )
            .to_string(),
        (Err(why), _) | (_, Err(why)) => format!("{path}: changed ({why})\n"),
    }
}

/// The check run's title, summary (a table of the apps) and text (a section per app), each
/// cut to what GitHub takes.
pub(crate) fn render_check_run(preview: &Preview, details_url: Option<String>) -> CheckRun {
    let count = |r: PreviewResult| preview.apps.iter().filter(|a| a.result == r).count();
    let (changes, unchanged, errors, pending) = (
        count(PreviewResult::Changes),
        count(PreviewResult::NoChanges),
        count(PreviewResult::Error),
        count(PreviewResult::Pending),
    );
    let n = preview.apps.len();
    let title = match preview.status {
        PreviewStatus::Superseded => format!("Superseded: {}", preview.reason),
        PreviewStatus::Failed => "The plan preview failed".to_owned(),
        _ if preview.started_at.is_none() => format!("Not previewed: {}", preview.reason),
        _ if n == 0 => "No app is changed by this pull request".to_owned(),
        _ => {
            let mut parts = vec![
                format!("{changes} with changes"),
                format!("{unchanged} unchanged"),
            ];
            if errors > 0 {
                parts.push(format!("{errors} with errors"));
            }
            if pending > 0 {
                parts.push(format!("{pending} being read"));
            }
            format!(
                "{n} app{}: {}",
                if n == 1 { "" } else { "s" },
                parts.join(", ")
            )
        }
    };
    let (status, conclusion) = match (preview.status, preview.result) {
        (PreviewStatus::Queued | PreviewStatus::Running, _) => (CheckStatus::InProgress, None),
        (PreviewStatus::Superseded, _) => {
            (CheckStatus::Completed, Some(CheckConclusion::Cancelled))
        }
        (PreviewStatus::Failed, _) | (_, PreviewResult::Error) => {
            (CheckStatus::Completed, Some(CheckConclusion::Failure))
        }
        (_, PreviewResult::Changes) => (CheckStatus::Completed, Some(CheckConclusion::Success)),
        _ => (CheckStatus::Completed, Some(CheckConclusion::Neutral)),
    };
    let mut summary = String::new();
    let short = |c: &Option<CommitSha>| c.as_ref().map_or("?".to_owned(), |c| c.short().to_owned());
    summary.push_str(&format!(
        "Merging `{}` into `{}` (at `{}`, merge base `{}`).\n\n",
        preview.head.short(),
        preview.base_ref,
        short(&preview.base),
        short(&preview.merge_base)
    ));
    if !preview.reason.is_empty() {
        summary.push_str(&format!("**Note:** {}\n\n", escape_md(&preview.reason)));
    }
    if n > 0 {
        summary.push_str("| App | Kind | Result | Summary | Pipeline |\n|---|---|---|---|---|\n");
        for a in &preview.apps {
            summary.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                escape_cell(&a.name),
                a.kind,
                a.result.as_str(),
                escape_cell(&a.summary),
                escape_cell(&a.pipeline)
            ));
        }
    }
    if let Some(url) = &details_url {
        summary.push_str(&format!("\nThe whole preview: {url}\n"));
    }
    let per_app = CHECK_TEXT_LIMIT / n.max(1);
    let mut text = String::new();
    for a in &preview.apps {
        let mut section = format!(
            "### {} ({})\n\n",
            escape_md(&a.name),
            if a.kind.is_empty() { "?" } else { &a.kind }
        );
        section.push_str(&format!(
            "**{}**: {}\n\n",
            a.result.as_str(),
            escape_md(&a.summary)
        ));
        if !a.why.is_empty() {
            section.push_str(&format!("Why: {}\n\n", escape_md(&a.why)));
        }
        if !a.pipeline.is_empty() {
            section.push_str(&format!("Pipeline: {}\n\n", escape_md(&a.pipeline)));
        }
        if !a.details.is_empty() {
            let fence = fence_for(&a.details);
            let body = cut_details(&a.details, per_app.saturating_sub(section.len() + 200));
            section.push_str(&format!(
                "<details><summary>Details</summary>\n\n{fence}diff\n{body}\n{fence}\n</details>\n\n"
            ));
        }
        text.push_str(&section);
    }
    CheckRun {
        name: CHECK_NAME.to_owned(),
        head_sha: preview.head.clone(),
        status,
        conclusion,
        external_id: preview.id.to_string(),
        details_url,
        title: cut_details(&title, 200),
        summary: cut_details(&summary, CHECK_TEXT_LIMIT),
        text: cut_details(&text, CHECK_TEXT_LIMIT),
    }
}

/// A code fence longer than any run of backticks in `text`, so the text cannot close it.
fn fence_for(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Text in a Markdown table cell: one line, no cell separator.
fn escape_cell(text: &str) -> String {
    let one_line: String = text.lines().collect::<Vec<_>>().join(" ");
    escape_md(&cut_details(&one_line, 300)).replace('|', "\\|")
}

/// Text from a repository or a platform, shown as text: no HTML, no links GitHub would render.
fn escape_md(text: &str) -> String {
    text.replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests;
