//! End to end on Lambda: a real `gannet up` deploys a `LambdaApp` (code in S3) to moto on
//! loopback, triggered by signed push webhooks; the alias's routing and the published versions
//! are read back through the Lambda API. A first deployment is a quick sync to 100%; a canary
//! splits exactly 0.9/0.1 then goes to 100%; cancel without rollback leaves the split, cancel
//! with rollback puts it back exactly; a SIGKILL inside LAMBDA_PROMOTE's AWS call resumes
//! without publishing again; a bad function manifest fails the plan and `config check`, naming
//! the file and the field. The approval gate holds on every path that deploys: only an
//! approval, or an admin's recorded skip, gets a change of a gated app to the platform.
//!
//! These tests need moto: `make test` starts it and sets GANNET_MOTO_ENDPOINT; without it they
//! fail saying how to start it.

mod lambda_moto;
mod support;

use std::time::Duration;

use lambda_moto as moto;
use lambda_moto::{Proxy, Routing};
use serde_json::{json, Value};
use support::receiver::Receiver;
use support::{run_gannet, stage_named, stage_of, token_of, Gannet, Repo, UpOptions};

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
        Self::start_configured(prefix, endpoint, ("1m", ""), first)
    }

    /// [`Lab::start_with`] with the drift interval and `extra` lines for gannet.yaml.
    fn start_configured(
        prefix: &str,
        endpoint: &str,
        (drift, extra): (&str, &str),
        first: impl FnOnce(&Repo, &str, &str),
    ) -> Self {
        moto::ensure_role();
        let function = moto::unique(prefix);
        let bucket = moto::unique("code").to_lowercase();
        moto::create_bucket(&bucket);
        let repo = Repo::new();
        first(&repo, &function, &bucket);
        let state = tempfile::tempdir().expect("tempdir");
        let opts = UpOptions {
            extra_config: format!(
                "intervals: {{poll: 1m, resume: 1s, drift: {drift}}}\nqueue: {{visibility: 3s}}\nplugins:\n  lambda:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {endpoint}\n{extra}",
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

// ------------------------------------------------------------------ the approval gate

/// A canary whose promotion waits for alice's approval.
const GATED: &str = "      - name: LAMBDA_CANARY_ROLLOUT\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice]}\n      - name: LAMBDA_PROMOTE\n        with: {percent: 100}\n";

impl Lab {
    /// POSTs `body` to an API path as the person `who` (see support::TOKENS).
    fn post_as(&self, who: &str, path: &str, body: Value) -> (u16, Value) {
        self.g.post_as(token_of(who), path, body)
    }

    /// Waits until `id` waits for approval; the alias must still route as `routing` then.
    fn waits_at_the_gate(&self, id: &str, routing: &Routing) -> Value {
        let d = self.g.wait_stage(id, "WAIT_APPROVAL", "RUNNING", LIMIT);
        assert_eq!(
            self.alias().as_ref(),
            Some(routing),
            "nothing reached the alias before the approval: {d}"
        );
        d
    }

    /// Alice approves `id`, which then ends SUCCESS.
    fn approve(&self, id: &str) -> Value {
        let (status, body) =
            self.post_as("alice", &format!("/deployments/{id}/approve"), json!({}));
        assert_eq!(status, 200, "{body}");
        let d = self.g.wait_terminal(id, LIMIT);
        assert_eq!(d["status"], "SUCCESS", "{d}\n{}", self.g.log());
        d
    }

    /// `who` cancels `id`, which then ends CANCELLED.
    fn cancel_as(&self, who: &str, id: &str) {
        let (status, body) = self.post_as(who, &format!("/deployments/{id}/cancel"), json!({}));
        assert_eq!(status, 200, "{body}");
        assert_eq!(self.g.wait_terminal(id, LIMIT)["status"], "CANCELLED");
    }
}

/// The deployment an API answer holds, as the id of a deployment that then waits at the gate.
fn started(answer: (u16, Value)) -> String {
    let (status, body) = answer;
    assert_eq!(status, 200, "{body}");
    body["deployment"]["id"]
        .as_str()
        .expect("deployment id")
        .to_owned()
}

/// Every command that could deploy a gated app, by every role: only an approval or an
/// admin's skip with a reason reaches the alias; each refusal says why and stores nothing.
#[test]
fn no_role_gets_past_the_approval_gate_of_a_lambda_app_without_an_admin() {
    let receiver = Receiver::start(0);
    let notify = format!(
        "notifications:\n  receivers:\n    - name: audit\n      webhook: {{url: \"{}\"}}\n",
        receiver.url
    );
    let mut lab =
        Lab::start_configured("gate", &moto::endpoint(), ("1m", &notify), |repo, f, b| {
            commit_code(repo, f, b, "v1", GATED);
        });
    // The first deployment is a quick sync, and still waits for the approval first.
    let first = lab.g.deployment_of(&lab.repo.head(), LIMIT);
    let d = lab.g.wait_stage(&first, "WAIT_APPROVAL", "RUNNING", LIMIT);
    assert_eq!(d["strategy"], "QUICK_SYNC", "{d}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("approval gate"),
        "{d}"
    );
    assert_eq!(lab.alias(), None, "nothing is deployed before the approval");
    lab.approve(&first);
    let v1 = Routing::all_to("1");
    assert_eq!(lab.alias().as_ref(), Some(&v1));

    // v2 waits at the gate; the deployer cancels it and tries to force it through.
    let v2 = lab.commit("v2", GATED);
    let id = lab.push(&v2);
    lab.waits_at_the_gate(&id, &v1);
    lab.cancel_as("dora", &id);
    let count = lab.g.deployments().len();
    let sync = "/apps/fn/sync";
    let quick = json!({"strategy": "QUICK_SYNC"});
    let refusals = [
        ("dora", 403, "only an admin may skip an approval"),
        (
            "vic",
            403,
            "syncing or cancelling needs the role deployer or admin",
        ),
        (
            "alice",
            403,
            "syncing or cancelling needs the role deployer or admin",
        ),
        ("admin", 400, "must say why"),
    ];
    for (who, want, says) in refusals {
        let (status, body) = lab.post_as(who, sync, quick.clone());
        let error = body["error"].as_str().unwrap_or_default();
        assert_eq!(
            (status, error.contains(says)),
            (want, true),
            "{who}: {body}"
        );
    }
    let (status, body) = lab.post_as("dora", sync, quick.clone());
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        status == 403
            && error.contains("dora has the role deployer")
            && error.contains("WAIT_APPROVAL")
            && error.contains("ask an approver"),
        "the refusal says why and what to do: {body}"
    );
    assert_eq!(
        lab.g.deployments().len(),
        count,
        "a refused command stores nothing"
    );
    assert_eq!(lab.alias().as_ref(), Some(&v1));

    // What a deployer may start runs the gate: the pipeline, or the planner's choice.
    for body in [json!({}), json!({"strategy": "PIPELINE"})] {
        let id = started(lab.post_as("dora", sync, body));
        lab.waits_at_the_gate(&id, &v1);
        lab.cancel_as("dora", &id);
    }

    // The admin skips the gate, saying why: the deployment and its events record it.
    let reason = "sev1: the checkout is down";
    let (status, body) = lab.post_as(
        "admin",
        sync,
        json!({"strategy": "QUICK_SYNC", "reason": reason}),
    );
    assert_eq!(status, 200, "{body}");
    let skipped = body["deployment"]["id"].as_str().expect("id").to_owned();
    let d = lab.g.wait_terminal(&skipped, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", lab.g.log());
    assert_eq!(
        d["gate_skip"],
        json!({"by": "admin", "reason": reason}),
        "{d}"
    );
    assert!(
        d["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("admin skipped the approval gate"),
        "{d}"
    );
    assert!(
        d["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .all(|s| s["name"] != "WAIT_APPROVAL"),
        "{d}"
    );
    // The canary rollouts that waited published versions; the quick sync routes to a new one.
    let newest = lab.versions().last().cloned().expect("versions");
    assert_ne!(newest, "1");
    let v2_live = Routing::all_to(&newest);
    assert_eq!(lab.alias().as_ref(), Some(&v2_live));
    lab.g.wait_until(
        LIMIT,
        "the receiver has the skip in the deployment's events",
        || {
            receiver
                .events()
                .into_iter()
                .any(|(_, e)| {
                    e["data"]["deployment"] == skipped.as_str()
                        && e["data"]["gate_skip"]["by"] == "admin"
                })
                .then_some(())
        },
    );
    assert!(
        lab.g.log().contains("an admin skipped the approval gate"),
        "the server log says so"
    );

    // A rollback: forced quick, refused for the deployer; the planner's, behind the gate.
    let (status, body) = lab.post_as("dora", "/apps/fn/rollback", quick.clone());
    assert_eq!(status, 403, "{body}");
    let id = started(lab.post_as("dora", "/apps/fn/rollback", json!({})));
    let d = lab.waits_at_the_gate(&id, &v2_live);
    assert_eq!(stage_named(&d, "WAIT_APPROVAL")["status"], "RUNNING", "{d}");
    lab.cancel_as("dora", &id);
}

/// The paths nobody commands directly (resume after a pause, auto-sync on drift) wait at the
/// gate too, and `alwaysUsePipeline` lets nobody force a quick sync.
#[test]
fn automatic_deployments_of_a_gated_lambda_app_wait_for_the_approval() {
    let auto = "  trigger:\n    onOutOfSync:\n      disabled: false\n      minWindow: 0s\n";
    let config = |stages: &str| format!("{}{auto}", lambda_app(stages));
    let lab = Lab::start_configured("gate-auto", &moto::endpoint(), ("1s", ""), |repo, f, b| {
        repo.commit(
            &[
                (&format!("{APP_DIR}/app.pipecd.yaml"), &config(GATED)),
                (
                    &format!("{APP_DIR}/function.yaml"),
                    &moto::upload_code(f, b, "v1"),
                ),
            ],
            "deploy v1",
        );
    });
    let first = lab.g.deployment_of(&lab.repo.head(), LIMIT);
    lab.g.wait_stage(&first, "WAIT_APPROVAL", "RUNNING", LIMIT);
    lab.approve(&first);

    // Paused, a push deploys nothing; resuming deploys it, behind the gate.
    let (status, body) = lab.post_as("dora", "/apps/fn/pause", json!({"reason": "freeze"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["app"]["paused"]["by"], "dora", "{body}");
    // Meanwhile someone changes the function by hand: once resumed, the app is out of sync.
    moto::update_memory(&lab.function, 256);
    let by_hand = moto::publish_version(&lab.function);
    moto::update_alias(&lab.function, ALIAS, &Routing::all_to(&by_hand));
    let live = Routing::all_to(&by_hand);
    let v2 = lab.repo.commit(
        &[
            (&format!("{APP_DIR}/app.pipecd.yaml"), &config(GATED)),
            (
                &format!("{APP_DIR}/function.yaml"),
                &moto::upload_code(&lab.function, &lab.bucket, "v2"),
            ),
        ],
        "deploy v2",
    );
    let (status, body) = lab.g.push(&v2, "gate-auto-v2");
    assert_eq!(status, 202, "{body}");
    lab.g
        .wait_until(LIMIT, "the trigger passes over the paused app", || {
            lab.g
                .log()
                .contains("not triggered: the app is paused")
                .then_some(())
        });
    assert_eq!(lab.g.deployments().len(), 1, "nothing deploys while paused");
    let (status, body) = lab.post_as("dora", "/apps/fn/resume", json!({}));
    assert_eq!(status, 200, "{body}");
    let resumed = lab.g.deployment_of(&v2, LIMIT);
    lab.waits_at_the_gate(&resumed, &live);
    lab.cancel_as("dora", &resumed);

    // The change by hand is drift, and auto-sync starts a deployment: it waits at the gate too.
    let auto_synced = lab
        .g
        .wait_until(LIMIT, "auto-sync starts a deployment", || {
            lab.g
                .deployments()
                .into_iter()
                .find(|d| d["trigger"] == "ON_OUT_OF_SYNC")
                .map(|d| d["id"].as_str().unwrap_or_default().to_owned())
        });
    lab.waits_at_the_gate(&auto_synced, &live);
    lab.approve(&auto_synced);
    assert_ne!(
        lab.alias(),
        Some(live),
        "the approved deployment moved the alias"
    );

    // With alwaysUsePipeline nobody forces a quick sync, not even an admin with a reason.
    lab.repo.commit(
        &[(
            &format!("{APP_DIR}/app.pipecd.yaml"),
            &config(GATED).replace(
                "spec:\n",
                "spec:\n  planner:\n    alwaysUsePipeline: true\n",
            ),
        )],
        "always use the pipeline",
    );
    let before = lab.g.deployments().len();
    let (status, body) = lab.post_as(
        "admin",
        "/apps/fn/sync",
        json!({"strategy": "QUICK_SYNC", "reason": "please"}),
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("alwaysUsePipeline"),
        "{body}"
    );
    assert_eq!(lab.g.deployments().len(), before, "nothing stored");
}

/// PipeCD's CUSTOM_SYNC on a LambdaApp (its `sam deploy` example's shape, with no function
/// manifest): the commands run as a job with their `env`, their output in the stage log; a
/// commit whose CUSTOM_SYNC fails rolls back by running the running commit's CUSTOM_SYNC.
#[test]
fn custom_sync_runs_the_commands_and_its_rollback_runs_the_running_commits() {
    let repo = Repo::new();
    let config = |run: &str| {
        format!("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: sam\n  planner:\n    alwaysUsePipeline: true\n  pipeline:\n    stages:\n      - name: CUSTOM_SYNC\n        with:\n          env:\n            AWS_PROFILE: sample\n          run: |\n{run}")
    };
    let first = repo.commit(
        &[(
            &format!("{APP_DIR}/app.pipecd.yaml"),
            &config("            echo \"sam deploy v1 --profile $AWS_PROFILE\"\n"),
        )],
        "custom sync v1",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deployment_of(&first, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let sync = stage_named(&d, "CUSTOM_SYNC");
    let log = g.stage_log(&id, sync["id"].as_str().expect("id"));
    assert!(
        log.iter().any(|l| l == "sam deploy v1 --profile sample"),
        "{log:#?}"
    );

    g.wait_unlocked("sam", LIMIT);
    let second = repo.commit(
        &[(
            &format!("{APP_DIR}/app.pipecd.yaml"),
            &config("            echo \"sam deploy v2\"\n            exit 3\n"),
        )],
        "custom sync v2, which fails",
    );
    let (status, body) = g.push(&second, "custom-2");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&second, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let rollback = stage_named(&d, "CUSTOM_SYNC_ROLLBACK");
    assert_eq!(rollback["status"], "SUCCESS", "{d}");
    let log = g.stage_log(&id, rollback["id"].as_str().expect("id"));
    assert!(
        log.iter().any(|l| l == "sam deploy v1 --profile sample"),
        "the running commit's commands: {log:#?}"
    );
}

/// A function whose code is a directory of another git repository (PipeCD's `spec.source`),
/// deployed by `gannet up` through its job runner: the first deployment and a second one (a
/// configuration change) upload byte-identical zips of the same tree (one `CodeSha256`), the
/// zip holds the directory's files, and a ref the remote lacks fails the stage naming it.
#[test]
fn a_git_sourced_function_deploys_twice_with_identical_zips() {
    let code = tempfile::tempdir().expect("tempdir");
    let work = code.path().join("work");
    std::fs::create_dir_all(work.join("fn")).expect("mkdir");
    support::git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fn/app.py"), "def handler(e, c):\n    return 1\n").expect("write");
    std::fs::write(work.join("README.md"), "not deployed\n").expect("write");
    support::git(&work, &["add", "-A"]);
    support::git(&work, &["commit", "-q", "-m", "code"]);
    support::git(&work, &["tag", "v1"]);
    let bare = code.path().join("code.git");
    support::git(code.path(), &["clone", "-q", "--bare", "work", "code.git"]);
    let remote = format!("file://{}", bare.display());
    let manifest = move |function: &str, memory: u32, git_ref: &str| {
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {function}\n  role: {}\n  handler: app.handler\n  runtime: python3.12\n  memory: {memory}\n  timeout: 10\n  source:\n    git: {remote}\n    ref: {git_ref}\n    path: fn\n",
            moto::ROLE
        )
    };
    let first_manifest = manifest.clone();
    let mut lab = Lab::start_configured(
        "gitsrc",
        &moto::endpoint(),
        ("1m", "        git: {allowFileRemotes: true}\n"),
        |repo, function, _bucket| {
            repo.commit(
                &[
                    (&format!("{APP_DIR}/app.pipecd.yaml"), &lambda_app("")),
                    (
                        &format!("{APP_DIR}/function.yaml"),
                        &first_manifest(function, 128, "v1"),
                    ),
                ],
                "a function from git",
            );
        },
    );
    first_deployment(&mut lab);
    let first = moto::code_sha256(&lab.function).expect("deployed");

    let again = lab.repo.commit(
        &[(
            &format!("{APP_DIR}/function.yaml"),
            &manifest(&lab.function, 256, "v1"),
        )],
        "more memory",
    );
    let id = lab.push(&again);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(
        lab.versions(),
        ["1", "2"],
        "a new version for the new memory"
    );
    assert_eq!(
        moto::code_sha256(&lab.function).as_deref(),
        Some(first.as_str()),
        "the same tree, the same zip"
    );

    lab.g.wait_unlocked("fn", LIMIT);
    let missing = lab.repo.commit(
        &[(
            &format!("{APP_DIR}/function.yaml"),
            &manifest(&lab.function, 512, "v9"),
        )],
        "a ref that does not exist",
    );
    let id = lab.push(&missing);
    let d = lab.g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let sync = stage_named(&d, "LAMBDA_SYNC");
    let reason = sync["status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("cannot fetch ref v9 from"), "{d}");
    assert_eq!(lab.versions(), ["1", "2"], "nothing deployed");
}

/// PipeCD's sealed secrets on a LambdaApp: a value sealed by `gannet encrypt` (for the
/// server's public key, read from a PEM file as PipeCD's web console hands it out) is filled
/// into the function manifest's environment when the stage runs, reaches the function's
/// configuration on Lambda, and is in no deployment, app, stage log, server log or stored row.
#[test]
fn a_sealed_secret_reaches_the_function_environment_and_nowhere_else() {
    moto::ensure_role();
    let function = moto::unique("sealed");
    let bucket = moto::unique("code").to_lowercase();
    moto::create_bucket(&bucket);
    let key = support::private_key();
    let state = tempfile::tempdir().expect("tempdir");
    let public = state.path().join("public.pem");
    let pem = gannet_sdk::sealed::SealingKey::from_pem(&key)
        .expect("a key")
        .public_pem();
    std::fs::write(&public, pem).expect("write");
    let plain = "db-pa55-only-in-the-function-env";
    let input = state.path().join("password.txt");
    std::fs::write(&input, plain).expect("write");
    let run = run_gannet(
        &[
            "encrypt",
            "--input-file",
            &input.to_string_lossy(),
            "--public-key",
            &public.to_string_lossy(),
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sealed = run.stdout.trim().to_owned();
    assert!(!sealed.contains(plain), "{sealed}");

    let repo = Repo::new();
    let manifest = format!(
        "{}  environments:\n    DB_PASSWORD: \"{{{{ .encryptedSecrets.db }}}}\"\n",
        moto::upload_code(&function, &bucket, "v1")
    );
    let config = format!(
        "{}  encryption:\n    encryptedSecrets:\n      db: {sealed}\n    decryptionTargets:\n      - function.yaml\n",
        lambda_app("")
    );
    let head = repo.commit(
        &[
            (&format!("{APP_DIR}/app.pipecd.yaml"), &config),
            (&format!("{APP_DIR}/function.yaml"), &manifest),
        ],
        "a function with a sealed password",
    );
    let opts = UpOptions {
        extra_config: format!(
            "intervals: {{poll: 1m, resume: 1s, drift: 1m}}\nqueue: {{visibility: 3s}}\nplugins:\n  lambda:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {}\n",
            moto::REGION,
            moto::endpoint()
        ),
        env: moto::gannet_env(),
        ..UpOptions::default()
    }
    .with_sealing_key(key);
    let g = Gannet::start(&repo, state.path(), &opts);
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let env = moto::environment(&function);
    assert_eq!(
        env.get("DB_PASSWORD").map(String::as_str),
        Some(plain),
        "{env:?}"
    );

    g.assert_nowhere(plain, &id, "fn");
    let text = std::fs::read_to_string(repo.path().join(APP_DIR).join("function.yaml")).unwrap();
    assert!(
        text.contains("{{ .encryptedSecrets.db }}"),
        "the checkout is untouched"
    );
}
