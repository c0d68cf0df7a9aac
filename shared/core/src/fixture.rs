//! Builder fixtures for tests: `Deployment::test().with_stages(...)`, `Stage::test(...)`,
//! [`RecordingIo`], a `StepIo` that keeps what a plugin step logs and saves, and
//! [`pipecd_examples`], where PipeCD's example configs are.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::deployment::{
    Commit, Deployment, DeploymentStatus, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind,
};
use crate::duration::{GoDuration, Millis};
use crate::ids::{AppId, CommitSha, DeploymentId, StageId};
use crate::plugin::{StepError, StepIo};
use crate::ports::Metadata;

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

/// A [`StepIo`] for plugin tests: it keeps what a step logs and saves.
#[derive(Default)]
pub struct RecordingIo {
    logs: std::sync::Mutex<Vec<String>>,
    metadata: std::sync::Mutex<Metadata>,
    fail_saves: bool,
    previous: Option<Deployment>,
}

impl RecordingIo {
    /// One whose every metadata save fails with a transient error (the store is down).
    pub fn failing_saves() -> Self {
        Self {
            fail_saves: true,
            ..Self::default()
        }
    }

    /// One whose app's last successful deployment is `previous`.
    pub fn with_previous(previous: Deployment) -> Self {
        Self {
            previous: Some(previous),
            ..Self::default()
        }
    }

    /// The lines logged so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The metadata saved so far, merged.
    pub fn saved(&self) -> Metadata {
        self.metadata.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl StepIo for RecordingIo {
    async fn log(&self, line: &str) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(line.to_owned());
        }
    }

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        if self.fail_saves {
            return Err(StepError::transient(
                "save stage metadata",
                "store unavailable",
            ));
        }
        if let Ok(mut metadata) = self.metadata.lock() {
            metadata.extend(entries);
        }
        Ok(())
    }

    async fn previous_success(&self) -> Result<Option<Deployment>, StepError> {
        Ok(self.previous.clone())
    }
}

/// Where PipeCD's example configs are (the compatibility corpus): `$GANNET_PIPECD_EXAMPLES`, or
/// `shared/pipecd-examples` in the folder that holds the checkout. `None` when they are not
/// there, so a fresh clone's tests pass without them; `make test` says in one line that the
/// compatibility suite was skipped. With `GANNET_REQUIRE_PIPECD_EXAMPLES` set (CI), a missing
/// corpus is a failure.
pub fn pipecd_examples() -> Option<PathBuf> {
    let dir = std::env::var_os("GANNET_PIPECD_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This crate is <checkout>/shared/core; the corpus sits beside <checkout>.
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pipecd-examples")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("GANNET_REQUIRE_PIPECD_EXAMPLES").is_none(),
        "PipeCD's examples are required (GANNET_REQUIRE_PIPECD_EXAMPLES) but missing at {}; set GANNET_PIPECD_EXAMPLES to their directory",
        dir.display()
    );
    None
}

/// A billion-laughs YAML document: `levels` anchors, each a list of ten aliases of the one
/// before, so it expands to 10^`levels` scalars. Every line is at the top level, so it can be
/// indented under any key.
pub fn yaml_bomb(levels: usize) -> String {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..levels {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text
}
