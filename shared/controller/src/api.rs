//! The JSON API's operations: list and show apps and deployments, stage logs, and the
//! commands (sync, cancel, approve). Transport-free; `http` maps them onto routes.

use std::collections::BTreeMap;

use gannet_config::trigger::{self as determiner, Decision};
use gannet_config::{self as config, AppConfig};
use gannet_domain::app::{App, AppHealth, SyncStatus};
use gannet_domain::callers::{Caller, Role};
use gannet_domain::deployment::{
    CancelMode, CancelRequest, Deployment, DeploymentStatus, GateSkip, Stage, StageStatus,
    SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::drift::{DriftField, LiveResource};
use gannet_domain::ports::{
    Changes, CommitInfo, DeploymentCursor, DeploymentFilter, LogLine, StoreError,
};
use gannet_domain::{AppId, CommitSha, DeploymentId, RepoId, StageId};
use gannet_events::{rfc3339, Message};
use gannet_sdk::planner;
use gannet_sdk::plugin::Plugins;
use gannet_sdk::presentation::StagePresentation;
use serde::{Deserialize, Serialize};

use crate::plan::put_deployment;
use crate::settings::Settings;
use crate::trigger::{notify, pending_deployment, put_if_changed};
use crate::{error_chain, Controller, HandlerError};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The caller is not identified (no token, or an unknown one).
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    /// A service this call depends on failed (the drift function, for a diff on AWS).
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(#[from] HandlerError),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        Self::Internal(e.into())
    }
}

impl From<gannet_domain::ports::GitError> for ApiError {
    fn from(e: gannet_domain::ports::GitError) -> Self {
        use gannet_domain::ports::GitError;
        match e {
            GitError::NoCommit { .. } => Self::NotFound(e.to_string()),
            GitError::NoBranch { .. } | GitError::UnknownRepo(_) | GitError::PullRequest { .. } => {
                Self::Conflict(e.to_string())
            }
            GitError::Failed { .. } => Self::Internal(e.into()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppView {
    pub id: AppId,
    pub name: String,
    pub repo: String,
    /// The config file's path in the repository.
    pub path: String,
    pub kind: String,
    pub labels: BTreeMap<String, String>,
    pub sync_status: SyncStatus,
    pub sync_reason: String,
    pub running_commit: Option<String>,
    /// HEALTHY, PROGRESSING, DEGRADED, MISSING or UNKNOWN, from its live resources.
    pub health: AppHealth,
    /// Why the app has no live state at all (no compiled-in platform plugin deploys it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_live_state: Option<String>,
    /// How the app's last deployment ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<LastResultView>,
    /// The branch head the trigger last judged the app at (deployed or not): a commit it
    /// has seen, so `apps wait --commit` can tell "no deployment" from "not judged yet".
    #[serde(default)]
    pub checked_commit: Option<String>,
    /// How many commits the branch head (`head_commit`) has beyond the running commit:
    /// "pinned at X, the branch is N commits ahead" while paused. Absent when none, or when
    /// either commit is unknown or the repository could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    /// The branch head `ahead` counts to: the last one the trigger scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_commit: Option<String>,
    pub active_deployment: Option<DeploymentId>,
    /// The fields the last drift check found differing from Git, each with both values.
    #[serde(default, with = "gannet_domain::drift::as_values")]
    pub drift: Vec<DriftField>,
    /// The live resources the last drift check saw.
    #[serde(default)]
    pub live: Vec<LiveResource>,
    /// When a drift check last found something new (RFC 3339).
    #[serde(default)]
    pub drift_changed_at: Option<String>,
    /// Set while automatic deployments are off.
    #[serde(default)]
    pub paused: Option<PauseView>,
}

/// Why an app's automatic deployments are off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseView {
    pub by: String,
    /// RFC 3339.
    pub at: String,
    pub reason: String,
    /// The commit a rollback holds the app at (drift compares with it until resumed).
    pub commit: Option<String>,
}

impl From<App> for AppView {
    fn from(a: App) -> Self {
        let health = a.health();
        Self {
            path: a.id.config_path().to_owned(),
            repo: a.repo.to_string(),
            id: a.id,
            name: a.name,
            kind: a.kind,
            labels: a.labels,
            sync_status: a.sync_status,
            sync_reason: a.sync_reason,
            running_commit: a.running_commit.map(|c| c.to_string()),
            health,
            no_live_state: a.no_live_state,
            last_result: a.last_result.map(|r| LastResultView {
                deployment: r.deployment,
                status: r.status,
                commit: r.commit.to_string(),
                at: rfc3339(r.at),
            }),
            checked_commit: a.last_checked_commit.map(|c| c.to_string()),
            ahead: None,
            head_commit: None,
            active_deployment: a.active_deployment,
            drift: a.drift,
            live: a.live,
            drift_changed_at: a.drift_changed_at.map(rfc3339),
            paused: a.paused.map(|p| PauseView {
                by: p.by,
                at: rfc3339(p.at),
                reason: p.reason,
                commit: p.commit.map(|c| c.to_string()),
            }),
        }
    }
}

/// How an app's last deployment ended, as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LastResultView {
    pub deployment: DeploymentId,
    pub status: DeploymentStatus,
    pub commit: String,
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageView {
    pub id: StageId,
    pub name: String,
    pub desc: String,
    pub status: StageStatus,
    pub status_reason: String,
    pub rollback: bool,
    pub visible: bool,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// What its plugin shows of it, and whether it may be approved or cancelled now.
    #[serde(default)]
    pub presentation: StagePresentation,
}

impl StageView {
    fn new(s: &Stage, plugins: &Plugins) -> Self {
        Self {
            id: s.id.clone(),
            name: s.name.clone(),
            desc: s.desc.clone(),
            status: s.status,
            status_reason: s.status_reason.clone(),
            rollback: s.rollback,
            visible: s.visible,
            started_at: s.started_at.map(rfc3339),
            completed_at: s.completed_at.map(rfc3339),
            metadata: s.metadata.clone(),
            presentation: plugins.present(s),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeploymentView {
    pub id: DeploymentId,
    /// The app's name.
    pub app: String,
    pub app_id: AppId,
    pub kind: String,
    pub commit: String,
    pub commit_message: String,
    /// The commit's author, as Git records it.
    #[serde(default)]
    pub commit_author: String,
    /// The commit on GitHub, when its repository is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_url: Option<String>,
    pub branch: String,
    pub status: DeploymentStatus,
    pub status_reason: String,
    pub trigger: TriggerKind,
    pub commander: String,
    /// Who pushed the commit, for a deployment a push webhook triggered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pushed_by: String,
    pub strategy: Option<SyncStrategy>,
    pub summary: String,
    pub stages: Vec<StageView>,
    pub running_commit: Option<String>,
    pub blocked_by: Option<DeploymentId>,
    /// For a rollback: the earlier deployment whose commit this one deploys again.
    #[serde(default)]
    pub rollback_of: Option<DeploymentId>,
    /// Set when an admin let this deployment skip the app's approval gate: who, and why.
    #[serde(default)]
    pub gate_skip: Option<GateSkip>,
    /// The deployment chain this deployment belongs to, or started by succeeding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<gannet_domain::ChainId>,
    pub created_at: String,
    pub planned_at: Option<String>,
    pub completed_at: Option<String>,
}

impl DeploymentView {
    /// `d` as the API shows it, each stage presented by its plugin.
    pub fn new(d: &Deployment, plugins: &Plugins, settings: &Settings) -> Self {
        Self {
            id: d.id.clone(),
            app: d.app_name.clone(),
            app_id: d.app.clone(),
            kind: d.kind.clone(),
            commit: d.commit.sha.to_string(),
            commit_message: d.commit.message.clone(),
            commit_author: d.commit.author.clone(),
            commit_url: settings.commit_url(&d.app.repo(), &d.commit.sha),
            branch: d.commit.branch.clone(),
            status: d.status,
            status_reason: d.status_reason.clone(),
            trigger: d.trigger.kind,
            commander: d.trigger.commander.clone(),
            pushed_by: d.trigger.pushed_by.clone(),
            strategy: d.strategy,
            summary: d.summary.clone(),
            stages: d
                .stages
                .iter()
                .map(|s| StageView::new(s, plugins))
                .collect(),
            running_commit: d.running_commit.as_ref().map(|c| c.to_string()),
            blocked_by: d.blocked_by.clone(),
            rollback_of: d.rollback_of.clone(),
            gate_skip: d.trigger.gate_skip.clone(),
            chain: match &d.chain {
                Some(link) => Some(link.chain.clone()),
                None => (d.status == DeploymentStatus::Success && !d.chain_next.is_empty())
                    .then(|| gannet_domain::ChainId::of(&d.id)),
            },
            created_at: rfc3339(d.created_at),
            planned_at: d.planned_at.map(rfc3339),
            completed_at: d.completed_at.map(rfc3339),
        }
    }
}

/// A manual sync.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SyncRequest {
    /// `QUICK_SYNC` or `PIPELINE` to force one; absent lets the planner decide.
    #[serde(default)]
    pub strategy: Option<SyncStrategy>,
    #[serde(default)]
    pub commander: String,
    /// An idempotency key: the same key never starts two deployments.
    #[serde(default)]
    pub key: Option<String>,
    /// Why an admin's quick sync skips the app's approval gate (required then).
    #[serde(default)]
    pub reason: Option<String>,
    /// Start a new deployment even when one of the same commit is already under way
    /// (without it, a sync of a commit that is deploying answers with that deployment).
    #[serde(default)]
    pub force: bool,
}

/// The most log lines one call returns; the caller asks again after the last one it got.
pub const LOG_PAGE: usize = 1000;

/// A deployment a person asked for: a sync, or a rollback to an earlier deployment's commit.
pub(crate) struct DeployCommand<'c> {
    pub caller: &'c Caller,
    pub strategy: Option<SyncStrategy>,
    /// Why the caller skips the approval gate, if the command does.
    pub reason: Option<String>,
    /// Part of the deployment's id: the same cause never starts two deployments.
    pub cause: String,
    pub rollback_of: Option<DeploymentId>,
    /// Pauses the app in the same write (a rollback holds it at its commit).
    pub pause: Option<gannet_domain::app::Pause>,
    /// The branch head the command judged the app at: it becomes the app's checked commit,
    /// as a push's trigger would make it, so the next poll does not deploy it again.
    pub checked: CommitSha,
}

/// The shortest prefix of a deployment id the API accepts for the id (`d-` and 6 more).
pub const MIN_ID_PREFIX: usize = 8;

/// How many of the newest deployments a short id is looked for among.
pub const PREFIX_SEARCH: usize = 1000;

/// Commit pairs [`Controller::app_view`] remembers the distance of (then starts again).
const AHEAD_REMEMBERED: usize = 4096;

/// Optimistic commands retry this often when a step writes at the same moment.
pub(crate) const COMMAND_TRIES: usize = 5;

impl Controller {
    pub async fn list_apps(&self) -> Result<Vec<AppView>, ApiError> {
        let apps = self.inner.store.apps().await?;
        self.app_views(apps).await
    }

    /// `app` as the API shows it, with how far its branch has moved on from what runs.
    pub async fn app_view(&self, app: App) -> Result<AppView, ApiError> {
        let mut views = self.app_views(vec![app]).await?;
        Ok(views.remove(0))
    }

    /// Apps as the API shows them. The branch head is the one the trigger last scanned for
    /// the app's repository (read once per repository), so a paused app, which the trigger
    /// no longer judges, still says how far its branch has moved on; before any scan, the head
    /// the app was last judged at.
    async fn app_views(&self, apps: Vec<App>) -> Result<Vec<AppView>, ApiError> {
        let mut heads: BTreeMap<RepoId, Option<CommitSha>> = BTreeMap::new();
        let mut views = Vec::with_capacity(apps.len());
        for app in apps {
            if !heads.contains_key(&app.repo) {
                let scanned = self.inner.store.repo(&app.repo).await?;
                heads.insert(app.repo.clone(), scanned.and_then(|r| r.scanned_head));
            }
            let head = heads[&app.repo]
                .clone()
                .or_else(|| app.last_checked_commit.clone());
            let ahead = match (&app.running_commit, &head) {
                (Some(running), Some(head)) if running != head => {
                    self.commits_ahead(&app.repo, running, head).await
                }
                _ => None,
            };
            views.push(AppView {
                ahead: ahead.filter(|n| *n > 0),
                head_commit: head.map(|c| c.to_string()),
                ..AppView::from(app)
            });
        }
        Ok(views)
    }

    /// `git.commits_ahead`, remembered: two commits always stand the same way to each other,
    /// so each pair is asked once (a list of apps, or `apps list --watch`, asks the host
    /// nothing new until a push). A failure is logged and shown as unknown.
    async fn commits_ahead(
        &self,
        repo: &RepoId,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Option<u64> {
        let key = (repo.clone(), base.clone(), head.clone());
        if let Some(n) = self.inner.ahead.lock().ok()?.get(&key) {
            return Some(*n);
        }
        match self.inner.git.commits_ahead(repo, base, head).await {
            Ok(n) => {
                let mut known = self.inner.ahead.lock().ok()?;
                if known.len() >= AHEAD_REMEMBERED {
                    known.clear();
                }
                known.insert(key, n);
                Some(n)
            }
            Err(e) => {
                tracing::warn!(repo = %repo, base = %base, head = %head, error = %error_chain(&e), "could not count the commits the branch is ahead");
                None
            }
        }
    }

    /// An app by id, or by name when the name is unique.
    pub async fn find_app(&self, key: &str) -> Result<App, ApiError> {
        let apps = self.inner.store.apps().await?;
        if let Some(app) = apps.iter().find(|a| a.id.as_str() == key) {
            return Ok(app.clone());
        }
        let named: Vec<&App> = apps.iter().filter(|a| a.name == key).collect();
        match named.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ApiError::NotFound(format!("no application named {key}"))),
            many => Err(ApiError::BadRequest(format!(
                "{} applications are named {key}; use an id: {}",
                many.len(),
                many.iter()
                    .map(|a| a.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// A page of deployments, newest first: at most `limit`, older than deployment `before`
    /// when given. The page's cursor (the id to ask for the next page `before`) is returned
    /// when the page is full, so more may follow.
    pub async fn list_deployments(
        &self,
        app: Option<&str>,
        statuses: Vec<DeploymentStatus>,
        limit: usize,
        before: Option<&str>,
    ) -> Result<(Vec<DeploymentView>, Option<DeploymentId>), ApiError> {
        let app = match app {
            Some(key) => Some(self.find_app(key).await?.id),
            None => None,
        };
        let before = match before {
            Some(id) => Some(DeploymentCursor::of(&self.load(id).await?)),
            None => None,
        };
        let filter = DeploymentFilter {
            app,
            statuses,
            limit: Some(limit),
            before,
        };
        let list = self.inner.store.deployments(&filter).await?;
        let next = match list.last() {
            Some(last) if list.len() == limit => Some(last.id.clone()),
            _ => None,
        };
        let views = list
            .iter()
            .map(|d| DeploymentView::new(d, &self.inner.plugins, &self.inner.settings))
            .collect();
        Ok((views, next))
    }

    /// A deployment by its id, or by a unique prefix of it of at least [`MIN_ID_PREFIX`]
    /// characters (`d-1a2b3c4d`, as the console and the CLI print ids), looked up among the
    /// newest [`PREFIX_SEARCH`] deployments. A whole id that is not there is not looked for
    /// as a prefix: no id is a prefix of another, and the search decodes up to
    /// [`PREFIX_SEARCH`] deployments (a client waiting for a deployment asks for its id before
    /// the trigger has made it, many times a second).
    pub(crate) async fn load(&self, id: &str) -> Result<Deployment, ApiError> {
        let id = DeploymentId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let store = &self.inner.store;
        if let Some(d) = store.deployment(&id).await? {
            return Ok(d);
        }
        let prefix = id.as_str();
        if prefix.len() >= DeploymentId::LEN {
            return Err(ApiError::NotFound(format!("no deployment {id}")));
        }
        if prefix.chars().count() < MIN_ID_PREFIX {
            return Err(ApiError::NotFound(format!(
                "no deployment {id} (a short id needs at least {MIN_ID_PREFIX} characters)"
            )));
        }
        let newest = store
            .deployments(&DeploymentFilter {
                app: None,
                statuses: Vec::new(),
                limit: Some(PREFIX_SEARCH),
                before: None,
            })
            .await?;
        let mut found: Vec<Deployment> = newest
            .into_iter()
            .filter(|d| d.id.as_str().starts_with(prefix))
            .collect();
        match found.len() {
            0 => Err(ApiError::NotFound(format!("no deployment {id}"))),
            1 => Ok(found.remove(0)),
            n => Err(ApiError::BadRequest(format!(
                "{n} deployments' ids start with {id} ({}); give more of the id",
                found
                    .iter()
                    .map(|d| d.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    pub async fn get_deployment(&self, id: &str) -> Result<DeploymentView, ApiError> {
        Ok(DeploymentView::new(
            &self.load(id).await?,
            &self.inner.plugins,
            &self.inner.settings,
        ))
    }

    pub async fn stage_logs(
        &self,
        id: &str,
        stage: &str,
        after: u64,
    ) -> Result<Vec<LogLine>, ApiError> {
        let d = self.load(id).await?;
        let stage = StageId::parse(stage).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        if d.stage(&stage).is_none() {
            return Err(ApiError::NotFound(format!(
                "deployment {} has no stage {stage}",
                d.id
            )));
        }
        let lines = self
            .inner
            .store
            .logs(&d.id, &stage, after, LOG_PAGE)
            .await?;
        Ok(lines.into_iter().map(LogLine::marked).collect())
    }

    /// Starts a deployment of the app at its branch head (PipeCD's ON_COMMAND).
    pub async fn sync(
        &self,
        app_key: &str,
        req: SyncRequest,
        caller: &Caller,
    ) -> Result<DeploymentView, ApiError> {
        let app = self.find_app(app_key).await?;
        // The status is the branch head's; a rollback to an earlier commit checks only that
        // commit's config (deploy_commit), so a broken head can still be rolled back from.
        if app.sync_status == SyncStatus::InvalidConfig {
            return Err(ApiError::Conflict(format!(
                "application {} has an invalid config: {}",
                app.name, app.sync_reason
            )));
        }
        let repo = self.configured_repo(&app)?;
        let head = self.inner.git.head(&app.repo, &repo.branch).await?;
        if !req.force {
            if let Some(under_way) = self.deploying(&app, &head.sha).await? {
                return self.get_deployment(under_way.id.as_str()).await;
            }
        }
        let key = req
            .key
            .unwrap_or_else(|| self.inner.clock.now().0.to_string());
        let command = DeployCommand {
            caller,
            strategy: req.strategy,
            reason: req.reason,
            cause: format!("ON_COMMAND:{key}"),
            rollback_of: None,
            pause: None,
            checked: head.sha.clone(),
        };
        self.deploy_commit(&app, &head, &repo.branch, command).await
    }

    /// The app's deployment of `commit` that has not ended, if there is one (a rollback
    /// deploys an older commit for another reason, so it does not count).
    async fn deploying(
        &self,
        app: &App,
        commit: &CommitSha,
    ) -> Result<Option<gannet_domain::deployment::Deployment>, ApiError> {
        let statuses = DeploymentStatus::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .collect();
        let open = self
            .inner
            .store
            .deployments(&DeploymentFilter {
                app: Some(app.id.clone()),
                statuses,
                limit: None,
                before: None,
            })
            .await?;
        Ok(open
            .into_iter()
            .find(|d| &d.commit.sha == commit && d.rollback_of.is_none()))
    }

    /// The settings of the repository `app` lives in, which must still be configured.
    pub(crate) fn configured_repo(
        &self,
        app: &App,
    ) -> Result<crate::settings::RepoSettings, ApiError> {
        self.inner.settings.repo(&app.repo).cloned().ok_or_else(|| {
            ApiError::Conflict(format!("repository {} is no longer configured", app.repo))
        })
    }

    /// Creates a PENDING deployment of `app` at `commit` for a person's command, checking the
    /// app's config at that commit first; with `pause`, pauses the app in the same write.
    pub(crate) async fn deploy_commit(
        &self,
        app: &App,
        commit: &CommitInfo,
        branch: &str,
        command: DeployCommand<'_>,
    ) -> Result<DeploymentView, ApiError> {
        let inner = &self.inner;
        let cfg = self.config_at(app, &commit.sha).await?;
        if let Decision::Skip { reason } = determiner::on_command(&cfg) {
            return Err(ApiError::Forbidden(reason));
        }
        let gate_skip = self.gate_check(app, &cfg, branch, &command).await?;
        let now = inner.clock.now();
        let trigger = Trigger {
            kind: TriggerKind::OnCommand,
            commander: command.caller.name.clone(),
            pushed_by: String::new(),
            strategy: command.strategy.unwrap_or_default(),
            gate_skip,
        };
        let mut d = pending_deployment(app, &cfg, commit, branch, trigger, &command.cause, now);
        d.rollback_of = command.rollback_of;
        // The app is written too (its checked commit, a pause): a trigger writing it at the
        // same moment makes the write conflict, so it is tried again on the app as it is now.
        let mut app = app.clone();
        for _ in 0..COMMAND_TRIES {
            let mut changes = Changes {
                writes: vec![gannet_domain::ports::Write::PutDeployment {
                    deployment: Box::new(d.clone()),
                    expect: gannet_domain::ports::Expect::Absent,
                }],
                send: vec![
                    Message::Plan {
                        app: app.id.clone(),
                    }
                    .outgoing(),
                    notify(gannet_events::EventKind::DeploymentTriggered, &d, now),
                ],
            };
            let mut judged = app.clone();
            judged.last_checked_commit = Some(command.checked.clone());
            if let Some(pause) = &command.pause {
                judged.paused = Some(pause.clone());
            }
            put_if_changed(&mut changes, Some(&app), judged, now);
            match inner.store.apply(changes).await {
                Ok(()) => {
                    if let Some(skip) = &d.trigger.gate_skip {
                        tracing::warn!(app = %app.name, id = %app.id, deployment = %d.id, by = %skip.by, reason = %skip.reason, "an admin skipped the approval gate");
                    }
                    return self.get_deployment(d.id.as_str()).await;
                }
                // The same command again (its idempotency key): the deployment it made.
                Err(StoreError::Conflict { .. })
                    if inner.store.deployment(&d.id).await?.is_some() =>
                {
                    return self.get_deployment(d.id.as_str()).await;
                }
                Err(StoreError::Conflict { .. }) => {
                    app = inner.store.app(&app.id).await?.ok_or_else(|| {
                        ApiError::NotFound(format!("application {} is gone", app.name))
                    })?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Conflict(format!(
            "application {} kept changing while the command ran; try again",
            app.name
        )))
    }

    /// The app's config at `commit`; a conflict naming why when it is missing or invalid.
    async fn config_at(&self, app: &App, commit: &CommitSha) -> Result<AppConfig, ApiError> {
        let path = app.id.config_path();
        let text = self
            .inner
            .git
            .read_file(&app.repo, commit, path)
            .await?
            .ok_or_else(|| {
                ApiError::Conflict(format!("{path} does not exist at {}", commit.short()))
            })?;
        config::parse_app_config(path, &String::from_utf8_lossy(&text))
            .map_err(|e| ApiError::Conflict(format!("invalid config at {}: {e}", commit.short())))
    }

    /// Holds a command to the app's approval gate: a command that would deploy past the
    /// pipeline's approval stages (a forced quick sync; a rollback to a commit whose pipeline
    /// lacks the branch head's approval) is an admin's alone, and needs a reason, which the
    /// deployment records. With `planner.alwaysUsePipeline`, nobody forces a quick sync.
    async fn gate_check(
        &self,
        app: &App,
        cfg: &AppConfig,
        branch: &str,
        command: &DeployCommand<'_>,
    ) -> Result<Option<GateSkip>, ApiError> {
        let plugins = &self.inner.plugins;
        let quick = command.strategy == Some(SyncStrategy::QuickSync);
        if quick && cfg.has_pipeline() && cfg.planner().always_use_pipeline {
            return Err(ApiError::Conflict(format!(
                "{} sets planner.alwaysUsePipeline: every deployment of {} runs its pipeline, so nobody can force a quick sync; sync without a strategy",
                app.id.config_path(),
                app.name
            )));
        }
        let gate = planner::approval_stages(cfg, plugins);
        let what = if quick && !gate.is_empty() {
            format!(
                "a quick sync skips the approval gate of {} ({})",
                app.name,
                planner::gate_names(&gate)
            )
        } else if gate.is_empty() && command.rollback_of.is_some() {
            // The rollback's commit has no gate: does the branch it rolls back on have one?
            let head = self.inner.git.head(&app.repo, branch).await?;
            let Ok(head_cfg) = self.config_at(app, &head.sha).await else {
                return Ok(None);
            };
            let head_gate = planner::approval_stages(&head_cfg, plugins);
            if head_gate.is_empty() {
                return Ok(None);
            }
            format!(
                "the commit rolled back to has no approval stage, so the rollback skips the approval gate of {} at the branch head ({})",
                app.name,
                planner::gate_names(&head_gate)
            )
        } else {
            return Ok(None);
        };
        let caller = command.caller;
        if caller.role != Role::Admin {
            return Err(ApiError::Forbidden(format!(
                "{} has the role {}: {what}, and only an admin may skip an approval; run the pipeline (no quick sync) and ask an approver to approve it, or ask an admin",
                caller.name, caller.role
            )));
        }
        let reason = command
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "reason: {what}; an admin may skip it, but must say why (send \"reason\", or --reason with the CLI)"
                ))
            })?;
        Ok(Some(GateSkip {
            by: caller.name.clone(),
            reason: reason.to_owned(),
        }))
    }

    /// Cancels a deployment, rolling back or not.
    pub async fn cancel(
        &self,
        id: &str,
        mode: CancelMode,
        by: &str,
    ) -> Result<DeploymentView, ApiError> {
        self.command(id, |d, now| {
            if d.status.is_terminal() {
                return Err(ApiError::Conflict(format!(
                    "deployment {} already ended {}",
                    d.id,
                    d.status.as_str()
                )));
            }
            let mut next = d.clone();
            if d.status == DeploymentStatus::Pending {
                next.status = DeploymentStatus::Cancelled;
                next.status_reason = gannet_domain::machine::cancel_reason(by);
                next.completed_at = Some(now);
                return Ok((next, Message::Plan { app: d.app.clone() }));
            }
            if d.cancel.as_ref().is_some_and(|c| c.mode == mode) {
                return Err(ApiError::Conflict(format!(
                    "deployment {} is already being cancelled",
                    d.id
                )));
            }
            next.cancel = Some(CancelRequest {
                mode,
                by: by.to_owned(),
                at: now,
            });
            Ok((next, step_message(d)))
        })
        .await
    }

    /// Records `user`'s approval of a stage that waits for approvals (the running one by
    /// default).
    pub async fn approve(
        &self,
        id: &str,
        stage: Option<&str>,
        user: &str,
    ) -> Result<DeploymentView, ApiError> {
        let plugins = self.inner.plugins.clone();
        self.command(id, |d, now| {
            let target = match stage {
                Some(s) => d.stages.iter().find(|st| st.id.as_str() == s),
                None => d
                    .stages
                    .iter()
                    .find(|st| st.status == StageStatus::Running && plugins.approvable(&st.name)),
            }
            .ok_or_else(|| match stage {
                Some(s) => ApiError::NotFound(format!("deployment {} has no stage {s}", d.id)),
                // The deployment is there; nothing of it waits: a conflict with its state.
                None => {
                    ApiError::Conflict(format!("deployment {} is not waiting for approval", d.id))
                }
            })?;
            if target.status != StageStatus::Running {
                return Err(ApiError::Conflict(format!(
                    "stage {} is {}, not waiting for approval",
                    target.id,
                    target.status.as_str()
                )));
            }
            let plugin = plugins.for_stage(&target.name).ok_or_else(|| {
                ApiError::BadRequest(format!("no plugin runs stage {}", target.name))
            })?;
            let entries = plugin.approve(target, user, now).map_err(|e| match e {
                gannet_sdk::plugin::ApproveError::NotAnApprover { .. } => {
                    ApiError::Forbidden(e.to_string())
                }
                _ => ApiError::Conflict(e.to_string()),
            })?;
            let mut next = d.clone();
            let stage_id = target.id.clone();
            if let Some(s) = next.stage_mut(&stage_id) {
                s.metadata.extend(entries);
            }
            Ok((next, step_message(d)))
        })
        .await
    }

    /// Applies a command's change with the deployment's seq bumped and the message it sends,
    /// retrying when a step wrote at the same moment.
    async fn command<F>(&self, id: &str, change: F) -> Result<DeploymentView, ApiError>
    where
        F: Fn(
            &Deployment,
            gannet_domain::duration::Millis,
        ) -> Result<(Deployment, Message), ApiError>,
    {
        for _ in 0..COMMAND_TRIES {
            let d = self.load(id).await?;
            let now = self.inner.clock.now();
            let (next, message) = change(&d, now)?;
            let mut changes = Changes::default();
            put_deployment(&mut changes, &d, next, now);
            changes.send.push(message.outgoing());
            match self.inner.store.apply(changes).await {
                Ok(()) => return self.get_deployment(id).await,
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Conflict(format!(
            "deployment {id} is changing too fast; try again"
        )))
    }
}

/// The step message for the seq a command writes (stored seq + 1).
fn step_message(d: &Deployment) -> Message {
    Message::Step {
        deployment: d.id.clone(),
        seq: d.seq + 1,
    }
}

impl ApiError {
    pub fn status(&self) -> u16 {
        match self {
            Self::Unauthorized(_) => 401,
            Self::NotFound(_) => 404,
            Self::BadRequest(_) => 400,
            Self::Forbidden(_) => 403,
            Self::Conflict(_) => 409,
            Self::Internal(_) => 500,
            Self::Unavailable(_) => 502,
        }
    }

    /// The error a status and message stand for (a remote answer's).
    pub fn from_status(status: u64, message: String) -> Self {
        match status {
            400 => Self::BadRequest(message),
            401 => Self::Unauthorized(message),
            403 => Self::Forbidden(message),
            404 => Self::NotFound(message),
            409 => Self::Conflict(message),
            _ => Self::Unavailable(message),
        }
    }

    /// The message a client sees: internal details are logged, never returned.
    pub fn public_message(&self) -> String {
        match self {
            Self::Internal(err) => {
                tracing::error!(error = %error_chain(err), "api request failed");
                "internal error; see the server log".into()
            }
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use gannet_domain::deployment::Deployment;
    use gannet_domain::duration::Millis;
    use gannet_domain::ports::{Changes, Expect, Store, Write};

    use crate::test_support::{rig, Live};

    /// Stores deployments with these ids, created in this order.
    async fn with_ids(ids: &[&str]) -> (crate::test_support::Rig, tempfile::TempDir) {
        let repo = tempfile::tempdir().expect("tempdir");
        let r = rig(repo.path(), Millis(1000), Live::InSync);
        for (i, id) in ids.iter().enumerate() {
            let mut d = Deployment::test();
            d.id = gannet_domain::DeploymentId::parse(id).expect("id");
            d.created_at = Millis(1000 + i as u64);
            r.store
                .apply(Changes {
                    writes: vec![Write::PutDeployment {
                        deployment: Box::new(d),
                        expect: Expect::Absent,
                    }],
                    send: Vec::new(),
                })
                .await
                .expect("store");
        }
        (r, repo)
    }

    #[tokio::test]
    async fn a_deployment_is_found_by_a_unique_prefix_of_eight_characters_or_more() {
        let (r, _repo) = with_ids(&[
            "d-1234abcd00000000aaaa",
            "d-1234abce00000000bbbb",
            "d-99990000000000000000",
        ])
        .await;
        let found = |id: &str| {
            let c = r.controller.clone();
            let id = id.to_owned();
            async move { c.get_deployment(&id).await.map(|d| d.id.to_string()) }
        };
        assert_eq!(
            found("d-1234abcd").await.expect("unique"),
            "d-1234abcd00000000aaaa"
        );
        assert_eq!(
            found("d-99990000000000000000").await.expect("whole"),
            "d-99990000000000000000"
        );
        let many = found("d-1234ab").await.expect_err("ambiguous");
        assert_eq!(many.status(), 400, "{many}");
        assert!(
            many.to_string()
                .contains("2 deployments' ids start with d-1234ab"),
            "{many}"
        );
        let short = found("d-1234a").await.expect_err("too short");
        assert_eq!(short.status(), 404, "{short}");
        assert!(
            short.to_string().contains("at least 8 characters"),
            "{short}"
        );
        assert_eq!(found("d-5555aaaa").await.expect_err("none").status(), 404);
    }

    #[tokio::test]
    async fn a_whole_id_that_is_not_there_is_not_searched_for_as_a_prefix() {
        // Only a hand-made id can be longer than a whole one; derived ids never are.
        let (r, _repo) = with_ids(&["d-1234abcd00000000aaaa-x"]).await;
        let missing = r
            .controller
            .get_deployment("d-1234abcd00000000aaaa")
            .await
            .expect_err("a whole id is looked up, not searched for");
        assert_eq!(missing.status(), 404, "{missing}");
        let found = r
            .controller
            .get_deployment("d-1234abcd00000000aaa")
            .await
            .expect("a shorter prefix is still searched for");
        assert_eq!(found.id.to_string(), "d-1234abcd00000000aaaa-x");
    }
}
