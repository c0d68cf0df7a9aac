//! End to end on drift: a real `gannet up` deploys a `LambdaApp` (zip code) to moto on loopback
//! and checks its drift every two seconds. An operator re-points the alias at the older version
//! by hand: the app is OUT_OF_SYNC within one drift interval, with the field named in
//! `gannet apps show` and in the API. With the default `trigger.onOutOfSync` only the status
//! changes; with `{disabled: false, minWindow: 0s}` a deployment puts the alias back and the
//! app is SYNCED again. A version with its subnets and security groups reordered by hand is
//! not drift; one with a subnet replaced is. `gannet apps diff` names what a commit would
//! change on the Lambda function and on an ECS service, and `gannet rollback` brings the
//! function back to an earlier commit, SYNCED and held there until resumed.
//!
//! These tests need moto: `make test` starts it and sets GANNET_MOTO_ENDPOINT; without it they
//! fail saying how to start it.

mod lambda_moto;
mod support;

use std::time::{Duration, Instant};

use lambda_moto as moto;
use lambda_moto::Routing;
use serde_json::Value;
use support::{Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(30);
/// The drift interval these tests configure.
const DRIFT: Duration = Duration::from_secs(2);
const APP_DIR: &str = "apps/fn";
const ALIAS: &str = "Service";
const AUTO_SYNC: &str =
    "  trigger:\n    onOutOfSync:\n      disabled: false\n      minWindow: 0s\n";
const VPC: &str =
    "  vpcConfig:\n    subnetIds: [subnet-a, subnet-b]\n    securityGroupIds: [sg-a, sg-b]\n";

/// What the app's commits hold: its function, config and extra manifest lines.
struct Spec {
    function: String,
    /// A plain `LambdaApp` with the `trigger` lines given.
    config: String,
    /// Extra `function.yaml` spec lines.
    manifest: String,
}

impl Spec {
    /// Commits code `version` (a zip in the app's directory).
    fn commit(&self, repo: &Repo, version: &str) -> String {
        let zip = String::from_utf8(moto::zip_bytes(version)).expect("zip bytes are text");
        let manifest = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {}\n  role: {}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  zipFile: fn.zip\n{}",
            self.function,
            moto::ROLE,
            self.manifest
        );
        repo.commit(
            &[
                (&format!("{APP_DIR}/app.pipecd.yaml"), &self.config),
                (&format!("{APP_DIR}/function.yaml"), &manifest),
                (&format!("{APP_DIR}/fn.zip"), &zip),
            ],
            &format!("deploy {version}"),
        )
    }
}

/// One Lambda app in a repository, deployed by a `gannet up` that checks drift every [`DRIFT`].
struct Lab {
    repo: Repo,
    g: Gannet,
    spec: Spec,
    function: String,
    _state: tempfile::TempDir,
}

impl Lab {
    /// Commits code `v1` and starts `gannet up`, which deploys it at once; waits for that.
    fn start(prefix: &str, trigger: &str, manifest: &str) -> Self {
        moto::ensure_role();
        let spec = Spec {
            function: moto::unique(prefix),
            config: format!(
                "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n{trigger}"
            ),
            manifest: manifest.to_owned(),
        };
        let repo = Repo::new();
        let v1 = spec.commit(&repo, "v1");
        let state = tempfile::tempdir().expect("tempdir");
        let opts = UpOptions {
            extra_config: format!(
                "intervals: {{poll: 1m, resume: 1s, drift: {}s}}\nqueue: {{visibility: 3s}}\nplugins:\n  lambda:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {}\n",
                DRIFT.as_secs(),
                moto::REGION,
                moto::endpoint()
            ),
            env: moto::gannet_env(),
            ..UpOptions::default()
        };
        let g = Gannet::start(&repo, state.path(), &opts);
        let lab = Self {
            repo,
            g,
            function: spec.function.clone(),
            spec,
            _state: state,
        };
        lab.deployed(&v1);
        lab
    }

    fn commit(&self, version: &str) -> String {
        self.spec.commit(&self.repo, version)
    }

    /// Waits for the deployment of `commit` to succeed.
    fn deployed(&self, commit: &str) {
        let id = self.g.deployment_of(commit, LIMIT);
        let d = self.g.wait_terminal(&id, LIMIT);
        assert_eq!(d["status"], "SUCCESS", "{d}\n{}", self.g.log());
    }

    /// Pushes code `version` and waits for its deployment.
    fn deploy(&self, version: &str) {
        let commit = self.commit(version);
        let (status, body) = self.g.push(&commit, &format!("drift-{version}"));
        assert_eq!(status, 202, "{body}");
        self.deployed(&commit);
    }

    fn app(&self) -> Value {
        self.g.app_view("fn")
    }

    /// Waits until the app (as the API shows it) satisfies `ok`; returns it.
    fn wait_app(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        self.g.wait_until(LIMIT, what, || {
            let app = self.app();
            ok(&app).then_some(app)
        })
    }

    /// Waits until a drift check has seen the alias serving `version` alone, in sync.
    fn wait_synced_on(&self, version: &str) -> Value {
        let summary = format!("version {version} 100%");
        self.wait_app(&format!("a drift check sees {summary}, in sync"), |a| {
            a["sync_status"] == "SYNCED" && alias_summary(a) == Some(summary.as_str())
        })
    }

    fn alias(&self) -> Option<Routing> {
        moto::alias(&self.function, ALIAS)
    }

    fn deployment_count(&self) -> usize {
        self.g.deployments().len()
    }
}

/// The alias's summary among the app's live resources.
fn alias_summary(app: &Value) -> Option<&str> {
    app["live"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "LambdaAlias")?["summary"]
        .as_str()
}

/// The names of the drifted fields the API shows.
fn drifted(app: &Value) -> Vec<String> {
    app["drift"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f["field"].as_str().map(str::to_owned))
        .collect()
}

/// Deploys v1 then v2, waits for a check to see v2 in sync, then re-points the alias at
/// version 1 by hand; returns when that was done.
fn repoint_to_v1(lab: &Lab) -> Instant {
    lab.deploy("v2");
    assert_eq!(lab.alias(), Some(Routing::all_to("2")));
    lab.wait_synced_on("2");
    moto::update_alias(&lab.function, ALIAS, &Routing::all_to("1"));
    Instant::now()
}

/// Asserts `what` was seen at most one drift interval (plus the check itself) after `changed`.
fn within_one_interval(changed: Instant, what: &str) {
    let took = changed.elapsed();
    assert!(
        took < DRIFT + Duration::from_millis(1500),
        "{what} {took:?} after the change; the drift interval is {DRIFT:?}"
    );
}

#[test]
fn a_hand_repointed_alias_is_out_of_sync_within_one_interval_and_by_default_only_the_status_changes(
) {
    let lab = Lab::start("drift", "", "");
    let changed = repoint_to_v1(&lab);
    let app = lab.wait_app("the app is OUT_OF_SYNC", |a| {
        a["sync_status"] == "OUT_OF_SYNC"
    });
    within_one_interval(changed, "OUT_OF_SYNC");
    assert_eq!(drifted(&app), ["spec.zipFile"], "{app}");
    let field = &app["drift"][0];
    assert_ne!(field["git"], field["live"], "{app}");
    assert!(
        app["sync_reason"]
            .as_str()
            .is_some_and(|r| r.contains("spec.zipFile")),
        "{app}"
    );
    assert_eq!(alias_summary(&app), Some("version 1 100%"), "{app}");
    assert!(app["drift_changed_at"].is_string(), "{app}");

    let (code, out) = lab.g.cli(&["apps", "show", "fn"]);
    assert_eq!(code, 0, "{out}");
    for words in [
        "OUT_OF_SYNC",
        "DRIFTED FIELD",
        "spec.zipFile",
        "LambdaAlias",
        "version 1 100%",
    ] {
        assert!(out.contains(words), "`apps show` lacks {words:?}:\n{out}");
    }
    let (code, out) = lab.g.cli(&["apps", "list"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("fn ") && l.contains("OUT_OF_SYNC")),
        "{out}"
    );

    // Three more intervals: nothing is deployed, the alias stays where the operator put it.
    let deployments = lab.deployment_count();
    std::thread::sleep(DRIFT * 3);
    assert_eq!(lab.deployment_count(), deployments);
    assert_eq!(lab.alias(), Some(Routing::all_to("1")));
    assert_eq!(lab.app()["sync_status"], "OUT_OF_SYNC");
}

#[test]
fn with_on_out_of_sync_a_deployment_puts_the_alias_back() {
    let lab = Lab::start("autosync", AUTO_SYNC, "");
    let changed = repoint_to_v1(&lab);
    // With minWindow 0s the check that finds the drift starts the deployment.
    let d = lab
        .g
        .wait_until(LIMIT, "an ON_OUT_OF_SYNC deployment exists", || {
            lab.g
                .deployments()
                .into_iter()
                .find(|d| d["trigger"] == "ON_OUT_OF_SYNC")
        });
    within_one_interval(changed, "the ON_OUT_OF_SYNC deployment");
    let id = d["id"].as_str().expect("id");
    let d = lab.g.wait_terminal(id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", lab.g.log());
    assert_eq!(lab.alias(), Some(Routing::all_to("2")));
    assert_eq!(
        moto::versions(&lab.function),
        ["1", "2"],
        "the same code is not published again"
    );
    let app = lab.wait_synced_on("2");
    assert_eq!(drifted(&app), Vec::<String>::new(), "{app}");
    let auto: Vec<Value> = lab
        .g
        .deployments()
        .into_iter()
        .filter(|d| d["trigger"] == "ON_OUT_OF_SYNC")
        .collect();
    assert_eq!(auto.len(), 1, "one deployment for one drift: {auto:?}");
}

#[test]
fn reordered_subnets_and_security_groups_are_not_drift_but_a_replaced_subnet_is() {
    let lab = Lab::start("vpc", "", VPC);
    lab.wait_synced_on("1");

    // Version 2 by hand: the same code and settings, subnets and security groups reordered.
    moto::update_vpc(&lab.function, &["subnet-b", "subnet-a"], &["sg-b", "sg-a"]);
    let v2 = moto::publish_version(&lab.function);
    moto::update_alias(&lab.function, ALIAS, &Routing::all_to(&v2));
    let app = lab.wait_synced_on(&v2);
    assert_eq!(drifted(&app), Vec::<String>::new(), "{app}");

    // Version 3: one subnet replaced.
    moto::update_vpc(&lab.function, &["subnet-a", "subnet-c"], &["sg-b", "sg-a"]);
    let v3 = moto::publish_version(&lab.function);
    moto::update_alias(&lab.function, ALIAS, &Routing::all_to(&v3));
    let app = lab.wait_app("the replaced subnet is drift", |a| {
        a["sync_status"] == "OUT_OF_SYNC"
    });
    assert_eq!(drifted(&app), ["spec.vpcConfig.subnetIds"], "{app}");
    // Each side a JSON value, not JSON inside a string.
    assert_eq!(
        app["drift"][0]["git"],
        serde_json::json!(["subnet-a", "subnet-b"]),
        "{app}"
    );
    assert_eq!(
        app["drift"][0]["live"],
        serde_json::json!(["subnet-a", "subnet-c"]),
        "{app}"
    );
}

/// `gannet apps diff` names what deploying a commit would change, read from the live function,
/// and changes nothing; `gannet rollback` deploys the earlier commit again, and the app ends
/// SYNCED on it: held there (paused) so that a push does not undo the rollback until
/// `gannet apps resume`.
#[test]
fn apps_diff_names_what_a_commit_would_change_and_rollback_returns_to_the_earlier_commit_synced() {
    let lab = Lab::start("rollback", "", "");
    let v1 = lab.repo.head();
    let v1_deployment = lab.g.deployment_of(&v1, LIMIT);
    lab.wait_synced_on("1");

    // v2: new code and an environment variable, committed but not pushed.
    let v2_spec = Spec {
        function: lab.function.clone(),
        config: lab.spec.config.clone(),
        manifest: "  environments:\n    COLOR: blue\n".into(),
    };
    let v2 = v2_spec.commit(&lab.repo, "v2");
    let (code, out) = lab.g.cli(&["apps", "diff", "fn", "--commit", &v2]);
    assert_eq!(code, 0, "{out}");
    for words in ["OUT_OF_SYNC", "FIELD THAT WOULD CHANGE", "spec.zipFile"] {
        assert!(out.contains(words), "`apps diff` lacks {words:?}:\n{out}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("spec.environments.COLOR") && l.contains("\"blue\"")),
        "{out}"
    );
    let (code, out) = lab
        .g
        .cli(&["apps", "diff", "fn", "--commit", &v2, "--exit-code"]);
    assert_eq!(code, 1, "something would change: {out}");
    // The branch head is v2 too; the running commit would change nothing.
    let (code, out) = lab.g.cli(&["apps", "diff", "fn", "--exit-code", "--json"]);
    assert_eq!(code, 1, "{out}");
    let diff: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(diff["commit"], v2.as_str(), "{diff}");
    let (code, out) = lab
        .g
        .cli(&["apps", "diff", "fn", "--commit", &v1, "--exit-code"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing would change"), "{out}");
    // Bad input is named, and nothing was deployed by any of it.
    let (code, _) = lab.g.cli(&["apps", "diff", "fn", "--commit", "abc123"]);
    assert_eq!(code, 1);
    let run = lab
        .g
        .cli_env(&["apps", "diff", "fn", "--commit", &"0".repeat(40)], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("not found"), "{run:?}");
    // With --exit-code, as `diff`: 2 when nothing could be compared (1 is a difference).
    let run = lab.g.cli_env(
        &[
            "apps",
            "diff",
            "fn",
            "--commit",
            &"0".repeat(40),
            "--exit-code",
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not found"), "{run:?}");
    assert_eq!(lab.deployment_count(), 1);
    assert_eq!(lab.alias(), Some(Routing::all_to("1")));

    // Deploy v2, then roll back to v1's deployment (the default: the newest successful one of
    // another commit).
    let (status, body) = lab.g.push(&v2, "rollback-v2");
    assert_eq!(status, 202, "{body}");
    lab.deployed(&v2);
    lab.wait_synced_on("2");
    let run = lab
        .g
        .cli_env(&["rollback", "fn", "--wait", "--timeout", "30s"], &[]);
    assert_eq!(run.code, 0, "{run:?}\n{}", lab.g.log());
    let rollback = lab
        .g
        .deployments()
        .into_iter()
        .find(|d| !d["rollback_of"].is_null())
        .expect("a rollback deployment");
    assert_eq!(
        rollback["rollback_of"],
        v1_deployment.as_str(),
        "{rollback}"
    );
    assert_eq!(rollback["commit"], v1.as_str(), "{rollback}");
    assert_eq!(rollback["status"], "SUCCESS", "{rollback}");
    assert_eq!(rollback["commander"], "admin", "{rollback}");
    // v1's code is served again, and drift checks compare with v1: SYNCED.
    let served = lab.alias().expect("alias");
    let app = lab.wait_app("a drift check finds the app in sync on v1", |a| {
        a["sync_status"] == "SYNCED"
            && a["drift"].as_array().is_some_and(Vec::is_empty)
            && alias_summary(a).is_some_and(|s| !s.starts_with("version 2 "))
    });
    assert_eq!(app["paused"]["commit"], v1.as_str(), "{app}");
    assert_eq!(app["running_commit"], v1.as_str(), "{app}");
    std::thread::sleep(DRIFT * 2);
    assert_eq!(lab.app()["sync_status"], "SYNCED", "still held at v1");
    let (_, out) = lab.g.cli(&["apps", "history", "fn"]);
    assert!(
        out.contains(&format!("ROLLBACK to {v1_deployment}")),
        "{out}"
    );

    // A push does not undo the rollback; resuming compares with the branch again.
    let v3 = lab.commit("v3");
    let (status, _) = lab.g.push(&v3, "rollback-v3");
    assert_eq!(status, 202);
    lab.g.wait_until(LIMIT, "the push was judged", || {
        lab.g
            .log()
            .contains("not triggered: the app is paused")
            .then_some(())
    });
    std::thread::sleep(DRIFT);
    assert_eq!(lab.alias(), Some(served.clone()));
    let (code, out) = lab.g.cli(&["apps", "resume", "fn"]);
    assert_eq!(code, 0, "{out}");
    lab.deployed(&v3);
    assert_ne!(lab.alias(), Some(served));
}

/// A call to moto's ECS JSON API (moto reads the region from the credential scope).
fn ecs(action: &str, body: Value) -> Value {
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/", moto::endpoint()))
        .header("X-Amz-Target", format!("AmazonEC2ContainerServiceV20141113.{action}"))
        .header("Content-Type", "application/x-amz-json-1.1")
        .header(
            "Authorization",
            format!("AWS4-HMAC-SHA256 Credential=testing/20240101/{}/ecs/aws4_request, SignedHeaders=host, Signature=0", moto::REGION),
        )
        .body(body.to_string())
        .send()
        .expect("moto answers");
    assert!(res.status().is_success(), "ECS {action}: {}", res.status());
    res.json().expect("ECS answer")
}

/// A new ECS cluster on moto, named after `prefix`; its ARN.
fn cluster(prefix: &str) -> String {
    let name = moto::unique(prefix);
    ecs("CreateCluster", serde_json::json!({"clusterName": name}))["cluster"]["clusterArn"]
        .as_str()
        .expect("cluster ARN")
        .to_owned()
}

/// `gannet apps diff` on an ECS service (quick sync, no load balancer) deployed to moto names
/// the image and the desired count a commit would change.
#[test]
fn apps_diff_on_an_ecs_service_names_the_image_and_the_count_a_commit_would_change() {
    let arn = cluster("diff");
    let service = moto::unique("svc");
    let files = |image: &str, count: u32| {
        [
            (
                "apps/svc/app.pipecd.yaml".to_owned(),
                "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: svc\n  input:\n    serviceDefinitionFile: servicedef.yaml\n    taskDefinitionFile: taskdef.yaml\n".to_owned(),
            ),
            (
                "apps/svc/servicedef.yaml".to_owned(),
                format!("cluster: {arn}\nserviceName: {service}\ndesiredCount: {count}\ndeploymentController:\n  type: EXTERNAL\nlaunchType: FARGATE\n"),
            ),
            (
                "apps/svc/taskdef.yaml".to_owned(),
                format!("family: {service}\ncontainerDefinitions:\n  - name: web\n    image: {image}\n    memory: 100\n    portMappings:\n      - containerPort: 80\nnetworkMode: bridge\nmemory: 512\ncpu: 256\n"),
            ),
        ]
    };
    let commit = |repo: &Repo, image: &str, count: u32, message: &str| {
        let files = files(image, count);
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        repo.commit(&files, message)
    };
    let repo = Repo::new();
    let v1 = commit(&repo, "nginx:1.25", 2, "svc v1");
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        extra_config: format!(
            "intervals: {{poll: 1m, resume: 1s}}\nqueue: {{visibility: 3s}}\nplugins:\n  ecs:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {}\n",
            moto::REGION,
            moto::endpoint()
        ),
        env: moto::gannet_env(),
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    let id = g.deployment_of(&v1, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());

    let (code, out) = g.cli(&["apps", "diff", "svc", "--commit", &v1, "--exit-code"]);
    assert_eq!(code, 0, "the deployed commit changes nothing: {out}");
    let v2 = commit(&repo, "nginx:1.27", 3, "svc v2");
    let (code, out) = g.cli(&["apps", "diff", "svc", "--commit", &v2, "--exit-code"]);
    assert_eq!(code, 1, "{out}");
    let image = out
        .lines()
        .find(|l| l.contains("taskDefinition.containerDefinitions[0].image"))
        .unwrap_or_else(|| panic!("no image line:\n{out}"));
    assert!(
        image.contains("nginx:1.25") && image.contains("nginx:1.27"),
        "{image}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("serviceDefinition.desiredCount")
                && l.contains('2')
                && l.contains('3')),
        "{out}"
    );
    assert_eq!(g.deployments().len(), 1, "a diff deploys nothing");
}

/// PipeCD's sealed secrets and attachments on an ECSApp (moto): a sealed password and a file
/// attached to the task definition are filled into the container's environment when the stage
/// runs and reach ECS's registered task definition; the password is in no deployment, app,
/// stage log, server log or stored row.
#[test]
fn an_ecs_task_definition_gets_a_sealed_secret_and_an_attachment_and_nothing_else_shows_it() {
    let arn = cluster("sealed");
    let service = moto::unique("svc");
    let key = support::private_key();
    let public = gannet_sdk::sealed::SealingKey::from_pem(&key)
        .expect("a key")
        .public_pem();
    let plain = "ecs-db-pa55-only-in-the-task";
    let sealed = gannet_sdk::sealed::seal(&public, plain).expect("seal");
    let repo = Repo::new();
    let config = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: svc\n  input:\n    serviceDefinitionFile: servicedef.yaml\n    taskDefinitionFile: taskdef.yaml\n  encryption:\n    encryptedSecrets:\n      db: {sealed}\n    decryptionTargets:\n      - taskdef.yaml\n  attachment:\n    sources:\n      mode: mode.txt\n    targets:\n      - taskdef.yaml\n"
    );
    let head = repo.commit(
        &[
            ("apps/svc/app.pipecd.yaml", &config),
            (
                "apps/svc/servicedef.yaml",
                &format!("cluster: {arn}\nserviceName: {service}\ndesiredCount: 1\ndeploymentController:\n  type: EXTERNAL\nlaunchType: FARGATE\n"),
            ),
            (
                "apps/svc/taskdef.yaml",
                &format!("family: {service}\ncontainerDefinitions:\n  - name: web\n    image: nginx:1.25\n    memory: 100\n    environment:\n      - name: DB_PASSWORD\n        value: \"{{{{ .encryptedSecrets.db }}}}\"\n      - name: MODE\n        value: \"{{{{ .attachment.mode }}}}\"\nnetworkMode: bridge\nmemory: 512\ncpu: 256\n"),
            ),
            ("apps/svc/mode.txt", "blue-green"),
        ],
        "svc with a sealed password and an attachment",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        extra_config: format!(
            "intervals: {{poll: 1m, resume: 1s}}\nqueue: {{visibility: 3s}}\nplugins:\n  ecs:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {}\n",
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
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    let task = ecs(
        "DescribeTaskDefinition",
        serde_json::json!({"taskDefinition": service}),
    );
    let vars = &task["taskDefinition"]["containerDefinitions"][0]["environment"];
    let value = |name: &str| {
        vars.as_array()
            .and_then(|l| l.iter().find(|v| v["name"] == name))
            .map(|v| v["value"].clone())
    };
    assert_eq!(
        value("DB_PASSWORD"),
        Some(serde_json::json!(plain)),
        "{task}"
    );
    assert_eq!(
        value("MODE"),
        Some(serde_json::json!("blue-green")),
        "{task}"
    );

    g.assert_nowhere(plain, &id, "svc");
}
