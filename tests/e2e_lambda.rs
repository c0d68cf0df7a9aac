//! End to end on Lambda: a real `gannet up` deploys a `LambdaApp` (code in S3) to moto on
//! loopback, triggered by signed push webhooks; the alias's routing and the published versions
//! are read back through the Lambda API. A first deployment is a quick sync to 100%; a canary
//! splits exactly 0.9/0.1 then goes to 100%; cancel without rollback leaves the split, cancel
//! with rollback puts it back exactly; a SIGKILL inside LAMBDA_PROMOTE's AWS call resumes
//! without publishing again; a bad function manifest fails the plan and `config check`, naming
//! the file and the field.
//!
//! These tests need moto: `make test` starts it and sets GANNET_MOTO_ENDPOINT; without it they
//! fail saying how to start it.

mod lambda_moto;
mod support;

use std::time::Duration;

use lambda_moto as moto;
use lambda_moto::{Proxy, Routing};
use serde_json::{json, Value};
use support::{run_gannet, stage_of, Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(30);
const APP_DIR: &str = "apps/fn";
const ALIAS: &str = "Service";

/// The canary pipeline of the issue, with a WAIT of `wait`.
fn canary(wait: &str) -> String {
    format!(
        "      - name: LAMBDA_CANARY_ROLLOUT\n      - name: LAMBDA_PROMOTE\n        with: {{percent: 10}}\n      - name: WAIT\n        with: {{duration: {wait}}}\n      - name: LAMBDA_PROMOTE\n        with: {{percent: 100}}\n"
    )
}

/// A `LambdaApp` config; no pipeline when `stages` is empty.
fn lambda_app(stages: &str) -> String {
    let head = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n";
    if stages.is_empty() {
        head.to_owned()
    } else {
        format!("{head}  pipeline:\n    stages:\n{stages}")
    }
}

/// One Lambda function's app in a repository, and a `gannet up` whose Lambda deploy target is
/// `endpoint` (moto, or a proxy to it).
struct Lab {
    repo: Repo,
    g: Gannet,
    function: String,
    bucket: String,
    pushes: usize,
    _state: tempfile::TempDir,
}

/// Uploads code `version` to `bucket` and commits a manifest deploying it with `stages`.
fn commit_code(repo: &Repo, function: &str, bucket: &str, version: &str, stages: &str) -> String {
    repo.commit(
        &[
            (&format!("{APP_DIR}/app.pipecd.yaml"), &lambda_app(stages)),
            (
                &format!("{APP_DIR}/function.yaml"),
                &moto::upload_code(function, bucket, version),
            ),
        ],
        &format!("deploy {version}"),
    )
}

impl Lab {
    /// Commits code `v1` with `stages`, then starts `gannet up` (which deploys the head at
    /// once, having never seen the repository).
    fn start(prefix: &str, endpoint: &str, stages: &str) -> Self {
        Self::start_with(prefix, endpoint, |repo, function, bucket| {
            commit_code(repo, function, bucket, "v1", stages);
        })
    }

    /// [`Lab::start`] with the first commit made by `first` (given the function and bucket).
    fn start_with(prefix: &str, endpoint: &str, first: impl FnOnce(&Repo, &str, &str)) -> Self {
        moto::ensure_role();
        let function = moto::unique(prefix);
        let bucket = moto::unique("code").to_lowercase();
        moto::create_bucket(&bucket);
        let repo = Repo::new();
        first(&repo, &function, &bucket);
        let state = tempfile::tempdir().expect("tempdir");
        let opts = UpOptions {
            extra_config: format!(
                "intervals: {{poll: 1m, resume: 1s}}\nqueue: {{visibility: 3s}}\nplugins:\n  lambda:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {endpoint}\n",
                moto::REGION
            ),
            env: moto::gannet_env(),
            ..UpOptions::default()
        };
        let g = Gannet::start(&repo, state.path(), &opts);
        Self {
            repo,
            g,
            function,
            bucket,
            pushes: 0,
            _state: state,
        }
    }

    /// Uploads code `version` and commits a manifest deploying it with `stages`.
    fn commit(&self, version: &str, stages: &str) -> String {
        commit_code(&self.repo, &self.function, &self.bucket, version, stages)
    }

    /// Sends a signed push of `commit`; returns its deployment's id.
    fn push(&mut self, commit: &str) -> String {
        self.pushes += 1;
        let (status, body) = self.g.push(commit, &format!("lambda-{}", self.pushes));
        assert_eq!(status, 202, "{body}");
        self.g.deployment_of(commit, LIMIT)
    }

    fn alias(&self) -> Option<Routing> {
        moto::alias(&self.function, ALIAS)
    }

    fn versions(&self) -> Vec<String> {
        moto::versions(&self.function)
    }

    /// Cancels `id` through the API.
    fn cancel(&self, id: &str, rollback: bool) {
        let (status, body) = self.g.post(
            &format!("/deployments/{id}/cancel"),
            json!({"no_rollback": !rollback}),
        );
        assert_eq!(status, 200, "{body}");
    }
}

/// `(name, status)` of every stage, hidden ones included.
fn stages(d: &Value) -> Vec<(String, String)> {
    d["stages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_owned(),
                s["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The first deployment of the canary app: a quick sync that routes all traffic to version 1.
fn first_deployment(lab: &mut Lab) {
    let head = lab.repo.head();
    let id = lab.push(&head);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", lab.g.log());
    assert_eq!(d["strategy"], "QUICK_SYNC", "{d}");
    assert_eq!(
        stages(&d),
        owned(&[
            ("LAMBDA_SYNC", "SUCCESS"),
            ("LAMBDA_ROLLBACK", "NOT_STARTED_YET")
        ]),
        "{d}"
    );
    assert_eq!(lab.alias(), Some(Routing::all_to("1")));
    assert_eq!(lab.versions(), ["1"]);
}

#[test]
fn a_first_deployment_quick_syncs_then_the_canary_splits_exactly_90_10_then_all() {
    let mut lab = Lab::start("canary", &moto::endpoint(), &canary("3s"));
    first_deployment(&mut lab);

    let b = lab.commit("v2", &canary("3s"));
    let id = lab.push(&b);
    let at_wait = lab.g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);
    assert_eq!(
        lab.alias(),
        Some(Routing::split("2", "1", 0.9)),
        "during the WAIT the new version 2 has 10%, version 1 the other 90%: {at_wait}"
    );
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", lab.g.log());
    assert_eq!(d["strategy"], "PIPELINE", "{d}");
    assert_eq!(
        stages(&d),
        owned(&[
            ("LAMBDA_CANARY_ROLLOUT", "SUCCESS"),
            ("LAMBDA_PROMOTE", "SUCCESS"),
            ("WAIT", "SUCCESS"),
            ("LAMBDA_PROMOTE", "SUCCESS"),
            ("LAMBDA_ROLLBACK", "NOT_STARTED_YET"),
        ]),
        "{d}"
    );
    assert_eq!(
        lab.alias(),
        Some(Routing::all_to("2")),
        "100%: no routing config"
    );
    assert_eq!(lab.versions(), ["1", "2"]);
}

#[test]
fn cancel_without_rollback_keeps_the_split_and_cancel_with_rollback_restores_it_exactly() {
    let mut lab = Lab::start("cancel", &moto::endpoint(), &canary("60s"));
    first_deployment(&mut lab);
    let v1_code = moto::code_sha256(&lab.function).expect("the function exists");

    // Without rollback: the deployment ends CANCELLED, and the 10% canary stays in place.
    let b = lab.commit("v2", &canary("60s"));
    let id = lab.push(&b);
    lab.g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);
    let split = Routing::split("2", "1", 0.9);
    assert_eq!(lab.alias(), Some(split.clone()));
    let v2_code = moto::code_sha256(&lab.function).expect("the function exists");
    assert_ne!(v2_code, v1_code, "the canary changed $LATEST's code");
    lab.cancel(&id, false);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "CANCELLED", "{d}");
    assert_eq!(
        stages(&d)[4],
        ("LAMBDA_ROLLBACK".to_owned(), "NOT_STARTED_YET".to_owned()),
        "{d}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        lab.alias(),
        Some(split.clone()),
        "the split is left in place"
    );
    assert_eq!(lab.versions(), ["1", "2"]);

    // With rollback, from the middle of the next canary: that split comes back exactly, and
    // $LATEST is the running commit's (the first deployment's) code again.
    let c = lab.commit("v3", &canary("60s"));
    let id = lab.push(&c);
    let at_wait = lab.g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);
    let canary_routing = lab.alias().expect("the alias exists");
    assert_eq!(canary_routing.version, "3", "{at_wait}");
    assert_ne!(canary_routing, split);
    lab.cancel(&id, true);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "CANCELLED", "{d}\n{}", lab.g.log());
    assert_eq!(
        stages(&d)[4],
        ("LAMBDA_ROLLBACK".to_owned(), "SUCCESS".to_owned()),
        "{d}"
    );
    assert_eq!(
        lab.alias(),
        Some(split),
        "the routing before the deployment, exactly"
    );
    assert_eq!(moto::code_sha256(&lab.function), Some(v1_code));
    assert_eq!(lab.versions(), ["1", "2", "3"]);
}

#[test]
fn sigkill_inside_lambda_promote_then_restart_completes_with_no_extra_versions() {
    let proxy = Proxy::start();
    let mut lab = Lab::start("crash", &proxy.url, &canary("2s"));
    first_deployment(&mut lab);

    let b = lab.commit("v2", &canary("2s"));
    proxy.hold_next_alias_update();
    let id = lab.push(&b);
    let call = proxy.wait_held(LIMIT);
    let d = lab.g.deployment(&id);
    assert_eq!(
        (
            stage_of(&d, "stage-0")["status"].as_str(),
            stage_of(&d, "stage-1")["status"].as_str()
        ),
        (Some("SUCCESS"), Some("RUNNING")),
        "the held call ({call}) is LAMBDA_PROMOTE 10's: {d}"
    );
    lab.g.kill();
    // The call lands after the process died: AWS changed, gannet never heard back.
    proxy.release();
    let split = Routing::split("2", "1", 0.9);
    lab.g.wait_until(LIMIT, "the held UpdateAlias lands", || {
        (lab.alias() == Some(split.clone())).then_some(())
    });
    assert_eq!(lab.versions(), ["1", "2"]);

    lab.g = lab.g.restart();
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", lab.g.log());
    assert_eq!(
        stages(&d),
        owned(&[
            ("LAMBDA_CANARY_ROLLOUT", "SUCCESS"),
            ("LAMBDA_PROMOTE", "SUCCESS"),
            ("WAIT", "SUCCESS"),
            ("LAMBDA_PROMOTE", "SUCCESS"),
            ("LAMBDA_ROLLBACK", "NOT_STARTED_YET"),
        ]),
        "{d}"
    );
    assert_eq!(lab.alias(), Some(Routing::all_to("2")));
    assert_eq!(lab.versions(), ["1", "2"], "no version was published again");
    let promote = lab.g.stage_log(&id, "stage-1").join("\n");
    assert!(
        promote.contains(&format!("Alias {ALIAS} already routes")),
        "the resumed step found the alias as the killed one left it: {promote}"
    );
}

#[test]
fn a_bad_function_manifest_fails_the_plan_and_config_check_naming_file_and_field() {
    let mut lab = Lab::start_with(
        "badmanifest",
        &moto::endpoint(),
        |repo, function, bucket| {
            let bad =
                moto::upload_code(function, bucket, "v1").replace("memory: 128", "memory: 64");
            repo.commit(
                &[
                    (&format!("{APP_DIR}/app.pipecd.yaml"), &lambda_app("")),
                    (&format!("{APP_DIR}/function.yaml"), &bad),
                ],
                "memory too small",
            );
        },
    );
    let head = lab.repo.head();
    let id = lab.push(&head);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let reason = d["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("spec.input.functionManifestFile: function.yaml:")
            && reason.contains(": spec.memory: 64 is out of range"),
        "{reason}"
    );
    assert_eq!(
        stages(&d),
        Vec::<(String, String)>::new(),
        "nothing ran: {d}"
    );
    assert_eq!(
        moto::code_sha256(&lab.function),
        None,
        "no function was created"
    );

    let app_dir = lab.repo.path().join(APP_DIR);
    let run = run_gannet(&["config", "check", &app_dir.display().to_string()], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    let config = app_dir.join("app.pipecd.yaml");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with(&config.display().to_string()))
        .unwrap_or_else(|| panic!("no line about {}: {run:?}", config.display()));
    assert!(
        line.contains(": spec.input.functionManifestFile: function.yaml:")
            && line.contains(": spec.memory: 64 is out of range"),
        "{line}"
    );
}
