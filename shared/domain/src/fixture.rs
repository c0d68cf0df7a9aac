//! Builder fixtures for tests: `Deployment::test().with_stages(...)`, `Stage::test(...)`, the
//! commit they are at, and the wall clock.

use std::collections::BTreeMap;

use crate::deployment::{
    Commit, Deployment, DeploymentStatus, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind,
};
use crate::duration::{GoDuration, Millis};
use crate::ids::{AppId, CommitSha, DeploymentId, StageId};

/// The commit fixtures are at (`ccc…`).
pub fn sha() -> CommitSha {
    CommitSha::parse(&"c".repeat(40)).expect("fixture sha")
}

impl Deployment {
    /// A PLANNED deployment of `demo:app/app.pipecd.yaml` with no stages, planned at t=1000.
    pub fn test() -> Self {
        let app = AppId::parse("demo:app/app.pipecd.yaml").expect("fixture app id");
        let sha = sha();
        Self {
            id: DeploymentId::derive(&app, &sha, "ON_COMMIT"),
            app,
            app_name: "app".into(),
            kind: "Application".into(),
            labels: BTreeMap::new(),
            commit: Commit {
                sha,
                branch: "main".into(),
                message: "change".into(),
                author: "dev".into(),
            },
            trigger: Trigger {
                kind: TriggerKind::OnCommit,
                commander: String::new(),
                pushed_by: String::new(),
                strategy: SyncStrategy::Auto,
                gate_skip: None,
            },
            status: DeploymentStatus::Planned,
            status_reason: String::new(),
            strategy: Some(SyncStrategy::Pipeline),
            summary: String::new(),
            stages: Vec::new(),
            running_commit: None,
            timeout: GoDuration::from_secs(6 * 3600),
            seq: 1,
            created_at: Millis(1000),
            updated_at: Millis(1000),
            planned_at: Some(Millis(1000)),
            completed_at: None,
            due_at: Millis(1000),
            cancel: None,
            blocked_by: None,
            mentions: Vec::new(),
            rollback_of: None,
            chain: None,
            chain_next: Vec::new(),
        }
    }

    pub fn with_stages(mut self, stages: Vec<Stage>) -> Self {
        self.stages = stages;
        self
    }

    pub fn with_status(mut self, status: DeploymentStatus) -> Self {
        self.status = status;
        self
    }
}

impl Stage {
    /// A forward stage `id` of kind `name`, not started, with a 1h timeout.
    pub fn test(id: &str, name: &str) -> Self {
        let mut s = Stage::planned(
            StageId::parse(id).expect("fixture stage id"),
            name,
            0,
            serde_json::Value::Null,
        );
        s.timeout = GoDuration::from_secs(3600);
        s
    }

    /// A hidden rollback stage undoing `of`.
    pub fn test_rollback(of: &str, name: &str) -> Self {
        let mut s = Stage::test(StageId::rollback(of).as_str(), name);
        s.rollback = true;
        s.visible = false;
        s
    }

    pub fn running_since(mut self, at: u64) -> Self {
        self.status = StageStatus::Running;
        self.started_at = Some(Millis(at));
        self
    }

    pub fn finished(mut self, status: StageStatus) -> Self {
        self.status = status;
        self.started_at.get_or_insert(Millis(1000));
        self.completed_at = Some(Millis(1000));
        self
    }
}

/// The wall clock, for plugin tests whose steps meet real servers and processes.
pub fn wall_clock() -> Millis {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Millis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}
