//! An application as gannet tracks it: where its config lives, its sync status, its lock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deployment::DeploymentStatus;
use crate::drift::{DriftField, Health, LiveResource};
use crate::duration::Millis;
use crate::ids::{AppId, CommitSha, DeploymentId, RepoId};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SyncStatus {
    #[default]
    Unknown,
    Synced,
    Deploying,
    OutOfSync,
    InvalidConfig,
}

impl SyncStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::Synced => "SYNCED",
            Self::Deploying => "DEPLOYING",
            Self::OutOfSync => "OUT_OF_SYNC",
            Self::InvalidConfig => "INVALID_CONFIG",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct App {
    pub id: AppId,
    pub repo: RepoId,
    /// `spec.name`; for an app whose config does not parse, the config file's directory.
    pub name: String,
    pub kind: String,
    pub labels: BTreeMap<String, String>,
    pub sync_status: SyncStatus,
    pub sync_reason: String,
    /// The branch head the trigger last judged this app at, deployed or not: the next head is
    /// compared with it, so each commit is judged by its own changes (PipeCD records the
    /// checked head the same way). Older records call it `last_triggered_commit`.
    #[serde(alias = "last_triggered_commit")]
    pub last_checked_commit: Option<CommitSha>,
    /// The commit of the last successful deployment: what is running.
    pub running_commit: Option<CommitSha>,
    pub last_deployment_finished_at: Option<Millis>,
    /// The deployment holding the app's lock (PLANNED, RUNNING or ROLLING_BACK).
    pub active_deployment: Option<DeploymentId>,
    /// What the last drift check found differing from Git (empty when in sync).
    #[serde(default)]
    pub drift: Vec<DriftField>,
    /// The live resources the last drift check saw.
    #[serde(default)]
    pub live: Vec<LiveResource>,
    /// When a drift check last changed the sync status, drift or live resources recorded
    /// here (a check that finds nothing new writes nothing).
    #[serde(default)]
    pub drift_changed_at: Option<Millis>,
    /// Set while automatic deployments are off (`gannet apps pause`, or a rollback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// Why the app has no live state at all (no compiled-in platform plugin deploys it), as the
    /// trigger found reading its config; `None` when a platform plugin deploys it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_live_state: Option<String>,
    /// How the app's last deployment ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<LastResult>,
    pub updated_at: Millis,
    /// Optimistic-concurrency version, bumped by every write.
    pub version: u64,
}

impl App {
    pub fn new(id: AppId, name: String, kind: String, now: Millis) -> Self {
        Self {
            repo: id.repo(),
            id,
            name,
            kind,
            labels: BTreeMap::new(),
            sync_status: SyncStatus::Unknown,
            sync_reason: String::new(),
            last_checked_commit: None,
            running_commit: None,
            last_deployment_finished_at: None,
            active_deployment: None,
            drift: Vec::new(),
            live: Vec::new(),
            drift_changed_at: None,
            paused: None,
            no_live_state: None,
            last_result: None,
            updated_at: now,
            version: 0,
        }
    }

    /// The app's health (PipeCD's and Argo CD's idea), from what the last drift check saw of
    /// its live resources: PROGRESSING while a deployment is under way; UNKNOWN with no live
    /// state, or before any was read; MISSING when the platform has none of the app's
    /// resources; DEGRADED when one is unhealthy; HEALTHY when every one is healthy.
    pub fn health(&self) -> AppHealth {
        if self.active_deployment.is_some() || self.sync_status == SyncStatus::Deploying {
            return AppHealth::Progressing;
        }
        if self.no_live_state.is_some() {
            return AppHealth::Unknown;
        }
        if self.live.is_empty() {
            // Drift with nothing live: the platform lacks what Git describes.
            return if self.sync_status == SyncStatus::OutOfSync && !self.drift.is_empty() {
                AppHealth::Missing
            } else {
                AppHealth::Unknown
            };
        }
        if self.live.iter().any(|r| r.health == Health::Unhealthy) {
            AppHealth::Degraded
        } else if self.live.iter().all(|r| r.health == Health::Healthy) {
            AppHealth::Healthy
        } else {
            AppHealth::Unknown
        }
    }
}

/// An app's health: [`App::health`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AppHealth {
    Healthy,
    Progressing,
    Degraded,
    Missing,
    Unknown,
}

impl AppHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "HEALTHY",
            Self::Progressing => "PROGRESSING",
            Self::Degraded => "DEGRADED",
            Self::Missing => "MISSING",
            Self::Unknown => "UNKNOWN",
        }
    }
}

/// How an app's last deployment ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastResult {
    pub deployment: DeploymentId,
    pub status: DeploymentStatus,
    pub commit: CommitSha,
    pub at: Millis,
}

/// Why an app's automatic deployments are off. While paused, a push does not trigger the app
/// and a drift check does not auto-sync it; a person may still sync, cancel and roll back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// Who paused it (the caller's name).
    pub by: String,
    pub at: Millis,
    pub reason: String,
    /// Set by a rollback: the commit the app is held at. Drift checks compare the live state
    /// with this commit instead of the branch head, so a rolled-back app reads SYNCED until
    /// it is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitSha>,
}

/// What gannet last saw of one repository branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoState {
    pub repo: RepoId,
    /// The branch head whose apps were last discovered and triggered.
    pub scanned_head: Option<CommitSha>,
    pub updated_at: Millis,
    pub version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_read_from_the_live_resources_and_says_when_there_are_none() {
        let resource = |health: Health| LiveResource {
            kind: "EcsService".into(),
            id: "web".into(),
            health,
            summary: String::new(),
        };
        let id = AppId::parse("demo:apps/web/app.pipecd.yaml").unwrap();
        let base = App::new(id, "web".into(), "ECSApp".into(), Millis(1));
        let with = |change: &dyn Fn(&mut App)| {
            let mut app = base.clone();
            change(&mut app);
            app.health()
        };
        assert_eq!(with(&|_| {}), AppHealth::Unknown, "before any check");
        assert_eq!(
            with(&|a| a.live = vec![resource(Health::Healthy), resource(Health::Healthy)]),
            AppHealth::Healthy
        );
        assert_eq!(
            with(&|a| a.live = vec![resource(Health::Healthy), resource(Health::Unhealthy)]),
            AppHealth::Degraded
        );
        assert_eq!(
            with(&|a| a.live = vec![resource(Health::Healthy), resource(Health::Unknown)]),
            AppHealth::Unknown
        );
        assert_eq!(
            with(&|a| {
                a.sync_status = SyncStatus::OutOfSync;
                a.drift = vec![DriftField {
                    field: "service web".into(),
                    git: "exists".into(),
                    live: crate::drift::UNSET.into(),
                }];
            }),
            AppHealth::Missing
        );
        assert_eq!(
            with(&|a| {
                a.live = vec![resource(Health::Unhealthy)];
                a.sync_status = SyncStatus::Deploying;
            }),
            AppHealth::Progressing
        );
        assert_eq!(
            with(&|a| {
                a.live = vec![resource(Health::Healthy)];
                a.no_live_state = Some("no compiled-in plugin deploys Application apps".into());
            }),
            AppHealth::Unknown
        );
    }

    #[test]
    fn an_app_stored_before_the_rename_keeps_its_checked_commit() {
        let id = AppId::parse("demo:apps/web/app.pipecd.yaml").unwrap();
        let sha = CommitSha::parse(&"a".repeat(40)).unwrap();
        let mut app = App::new(id, "web".into(), "LambdaApp".into(), Millis(1));
        app.last_checked_commit = Some(sha.clone());
        let mut stored = serde_json::to_value(&app).unwrap();
        let fields = stored.as_object_mut().unwrap();
        let value = fields.remove("last_checked_commit").unwrap();
        fields.insert("last_triggered_commit".into(), value);

        let loaded: App = serde_json::from_value(stored).unwrap();
        assert_eq!(loaded.last_checked_commit, Some(sha));
    }
}
