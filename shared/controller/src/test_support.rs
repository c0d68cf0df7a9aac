//! What the handler tests share: git on a real repository, a test clock, and a platform plugin
//! whose live state is scripted.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gannet_config::AppConfig;
use gannet_domain::drift::{DriftField, Health, LiveResource, LiveState};
use gannet_domain::duration::Millis;
use gannet_domain::ports::Clock;
use gannet_domain::RepoId;
use gannet_embedded::{RuntimeOptions, SqliteRuntime};
use gannet_git::{LocalGit, Location, RepoSpec};
use gannet_sdk::plugin::Plugins;
use gannet_sdk::plugin::{
    AppFileError, Faces, Live as Found, LiveContext, LiveStates, PlanContext, Plugin, Presenter,
    StageConfigError, StageResult, StepContext, StepError, StepOutcome, Steps,
};

use crate::{Controller, RepoSettings, Settings};

/// Runs git in `dir` with a fixed identity and no user or system configuration.
pub(crate) fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// What the platform answers the next live-state reads.
#[derive(Clone, Debug)]
pub(crate) enum Live {
    InSync,
    Drifted(&'static str),
    NotSupported,
    /// The check runs as a job that has not ended.
    Pending,
    Refused,
    Throttled,
}

/// A platform plugin whose live state is scripted, counting its reads; it deploys `LambdaApp`s,
/// refuses a function manifest that says `bad`, and says its live read runs code when
/// `runs_code` is set.
pub(crate) struct Platform {
    pub live: Mutex<Live>,
    pub reads: AtomicUsize,
    pub runs_code: AtomicBool,
}

impl Platform {
    pub fn new(live: Live) -> Self {
        Self {
            live: Mutex::new(live),
            reads: AtomicUsize::new(0),
            runs_code: AtomicBool::new(false),
        }
    }
}

impl Plugin for Platform {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["SCRIPTED_SYNC"]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("lambda")
    }

    fn validate_stage(
        &self,
        _name: &str,
        with: &serde_json::Value,
    ) -> Result<serde_json::Value, StageConfigError> {
        Ok(with.clone())
    }

    fn check_app(
        &self,
        _ctx: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        match read("function.yaml") {
            Some(text) if text.contains("bad") => Err(AppFileError {
                named_by: "spec.input.functionManifestFile".into(),
                file: "function.yaml".into(),
                line: Some(1),
                field: "spec.memory".into(),
                message: "bad value".into(),
                unsupported: false,
            }),
            _ => Ok(()),
        }
    }

    fn live_read_runs_code(&self, _app: &AppConfig) -> bool {
        self.runs_code.load(Ordering::SeqCst)
    }
}

impl Presenter for Platform {}

#[async_trait]
impl Steps for Platform {
    async fn execute_step(&self, _ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        Ok(StepOutcome::Done(StageResult::Success))
    }
}

#[async_trait]
impl LiveStates for Platform {
    async fn live_state(&self, ctx: LiveContext<'_>) -> Result<Found, StepError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        assert!(
            ctx.app_dir.join("function.yaml").is_file(),
            "the check reads the app's directory at the head: {}",
            ctx.app_dir.display()
        );
        let script = self.live.lock().expect("script").clone();
        let resources = vec![LiveResource {
            kind: "LambdaAlias".into(),
            id: "fn:Service".into(),
            health: Health::Healthy,
            summary: "version 1 100%".into(),
        }];
        match script {
            Live::InSync => Ok(Found::Read(LiveState {
                resources,
                drift: Vec::new(),
            })),
            Live::Drifted(field) => Ok(Found::Read(LiveState {
                resources,
                drift: vec![DriftField {
                    field: field.into(),
                    git: "128".into(),
                    live: "1024".into(),
                }],
            })),
            Live::NotSupported => Ok(Found::NotRead),
            Live::Pending => Ok(Found::Pending {
                what: "the check's job runs".into(),
                job: Some(gannet_sdk::jobs::JobKey::of(&[("preview-read", 12)])),
            }),
            Live::Refused => Err(StepError::Permanent(
                "Lambda GetAlias was refused: AccessDeniedException: no".into(),
            )),
            Live::Throttled => Err(StepError::transient(
                "Lambda GetAlias",
                "TooManyRequestsException (HTTP 429)",
            )),
        }
    }
}

pub(crate) struct TestClock(pub AtomicU64);

impl Clock for TestClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
}

/// A controller over an in-memory SQLite store and the git repository at a path (as `demo`,
/// branch `main`), whose only plugin is a scripted [`Platform`].
pub(crate) struct Rig {
    pub controller: Controller,
    pub store: SqliteRuntime,
    pub clock: Arc<TestClock>,
    pub platform: Arc<Platform>,
    /// gannet's git cache (checked-out trees go under `trees`).
    pub cache: tempfile::TempDir,
    pub repo_id: RepoId,
}

/// A [`Rig`] on the repository at `repo`, its clock at `now`, its platform answering `live`.
pub(crate) fn rig(repo: &Path, now: Millis, live: Live) -> Rig {
    rig_with(repo, now, live, |_| {})
}

/// [`rig`], its settings edited by `edit` first.
pub(crate) fn rig_with(
    repo: &Path,
    now: Millis,
    live: Live,
    edit: impl FnOnce(&mut Settings),
) -> Rig {
    let cache = tempfile::tempdir().expect("tempdir");
    let repo_id = RepoId::parse("demo").expect("repo id");
    let source = LocalGit::new(
        cache.path(),
        vec![RepoSpec {
            id: repo_id.clone(),
            location: Location::Path(repo.to_owned()),
            branch: "main".into(),
        }],
    )
    .expect("local git");
    let clock = Arc::new(TestClock(AtomicU64::new(now.0)));
    let store =
        SqliteRuntime::open_in_memory(clock.clone(), RuntimeOptions::default()).expect("sqlite");
    let platform = Arc::new(Platform::new(live));
    let settings = Settings {
        repos: vec![RepoSettings {
            id: repo_id.clone(),
            branch: "main".into(),
            github: None,
            url: None,
            supersede: crate::Supersede::Never,
            on_first_sight: crate::FirstSight::Deploy,
            plan_preview: Default::default(),
        }],
        ..Settings::default()
    };
    let mut settings = settings;
    edit(&mut settings);
    let controller = Controller::new(
        Arc::new(store.clone()),
        Arc::new(source),
        clock.clone(),
        Plugins::new(vec![Faces::platform(platform.clone())]),
        settings,
    );
    Rig {
        controller,
        store,
        clock,
        platform,
        cache,
        repo_id,
    }
}

/// Stores `app` as SYNCED by a deployment, as the trigger and a finished deployment leave it.
pub(crate) async fn store_synced(store: &SqliteRuntime, mut app: gannet_domain::app::App) {
    use gannet_domain::ports::{Changes, Expect, Store, Write};
    app.sync_status = gannet_domain::app::SyncStatus::Synced;
    app.sync_reason = "deployed".into();
    store
        .apply(Changes {
            writes: vec![Write::PutApp {
                app: Box::new(app),
                expect: Expect::Absent,
            }],
            send: Vec::new(),
        })
        .await
        .expect("store the app");
}
