//! End to end: a plugin written only in this test is registered through the plugin registry
//! and deploys an app on the embedded runtime (`gannet up`, run in-process through the
//! `gannet_cli` library), with no edit to the cli or functions code. Its settings come from
//! gannet.yaml's `plugins.fake`, parsed generically and handed to it.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use gannet_cli::settings::UpConfig;
use gannet_config::typed::FieldError;
use gannet_sdk::plugin::{
    Plugin, Presenter, StageConfigError, StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, PluginSettings, PluginSpec};
use gannet_sdk::stage_options;
use gannet_sdk::targets::Named;
use serde_json::Value;
use support::{app_config, free_port, Repo, ADMIN_TOKEN};

const LIMIT: Duration = Duration::from_secs(30);

/// A deploy target of the fake platform: a directory it writes a marker into.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FakeTarget {
    name: String,
    out_dir: PathBuf,
}

impl Named for FakeTarget {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The fake platform: one stage, FAKE_DEPLOY, that records the deployed commit in its only
/// target's directory.
struct FakePlatform {
    out_dir: PathBuf,
}

impl Plugin for FakePlatform {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["FAKE_DEPLOY"]
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        stage_options::none(with)
    }
}

impl Presenter for FakePlatform {}

#[async_trait]
impl Steps for FakePlatform {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let marker = self
            .out_dir
            .join(format!("deployed-{}", ctx.deployment.commit.sha));
        std::fs::write(&marker, ctx.deployment.app.as_str())
            .map_err(|e| StepError::transient("writing the marker", e))?;
        ctx.io.log("fake platform deployed").await;
        Ok(StepOutcome::Done(StageResult::Success))
    }
}

impl FromSettings for FakePlatform {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let targets = settings.deploy_targets(|at, t: &FakeTarget| {
            if t.out_dir.is_dir() {
                Ok(())
            } else {
                Err(FieldError {
                    path: format!("{at}.outDir"),
                    message: format!("{} is not a directory", t.out_dir.display()),
                })
            }
        })?;
        let out_dir = targets
            .into_iter()
            .next()
            .map(|t| t.out_dir)
            .unwrap_or_default();
        Ok(FakePlatform { out_dir })
    }
}

const FAKE: PluginSpec = PluginSpec::stages::<FakePlatform>("fake");

#[test]
fn a_plugin_registered_in_a_test_deploys_an_app() {
    let repo = Repo::new();
    let head = repo.commit(
        &[(
            "apps/fake/app.pipecd.yaml",
            &app_config("fake", "      - name: FAKE_DEPLOY\n"),
        )],
        "add the fake app",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let config = state.path().join("gannet.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\nrepos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: deploy\nintervals: {{poll: 1m, resume: 1s}}\nplugins:\n  fake:\n    deployTargets:\n      - {{name: local, outDir: {}}}\napi:\n  tokens: {{env: GANNET_REGISTRY_TEST_TOKENS}}\n",
            repo.path().display(),
            out.path().display()
        ),
    )
    .expect("write config");
    let tokens = format!("- {{name: test, role: viewer, token: {ADMIN_TOKEN}}}");

    let registry = gannet_plugins::registry().with(FAKE);
    let bad = UpConfig::parse(
        "plugins: {fake: {deployTargets: [{name: local, outDir: /nonexistent/gannet}]}}",
        state.path(),
        &|_| None,
        &registry,
    )
    .unwrap_err();
    assert_eq!(
        bad, "plugins.fake.deployTargets[0].outDir: /nonexistent/gannet is not a directory",
        "the plugin's own check runs on its settings"
    );
    let cfg = UpConfig::parse(
        &std::fs::read_to_string(&config).expect("read config"),
        state.path(),
        &|name| (name == "GANNET_REGISTRY_TEST_TOKENS").then(|| tokens.clone()),
        &registry,
    )
    .expect("config loads");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        runtime.block_on(gannet_cli::up::run_until(cfg, async {
            let _ = stop_rx.await;
        }))
    });

    let http = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/deployments");
    let started = std::time::Instant::now();
    let finished = loop {
        assert!(
            started.elapsed() < LIMIT,
            "no finished deployment within {LIMIT:?}"
        );
        let list: Value = http
            .get(&url)
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .ok()
            .and_then(|r| r.json().ok())
            .unwrap_or(Value::Null);
        let done = list["deployments"].as_array().and_then(|ds| {
            ds.iter()
                .find(|d| d["commit"] == head.as_str() && d["status"] != "RUNNING")
                .filter(|d| {
                    ["SUCCESS", "FAILURE", "CANCELLED"]
                        .contains(&d["status"].as_str().unwrap_or(""))
                })
                .cloned()
        });
        if let Some(d) = done {
            break d;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = stop_tx.send(());
    server
        .join()
        .expect("server thread")
        .expect("gannet up stops cleanly");

    assert_eq!(finished["status"], "SUCCESS", "{finished}");
    assert_eq!(finished["stages"][0]["name"], "FAKE_DEPLOY", "{finished}");
    let marker = out.path().join(format!("deployed-{head}"));
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the fake platform wrote its marker"),
        "shop:apps/fake/app.pipecd.yaml"
    );
}
