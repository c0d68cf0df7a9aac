//! End to end on plan previews: a real `gannet up` gets signed `pull_request` deliveries for a
//! repository holding a Terraform app (local state, only the built-in `terraform_data`, so
//! nothing is downloaded), a Kubernetes app (a ConfigMap on a real kube-apiserver) and a
//! Lambda app (on moto), each deployed first from `main`; it writes check runs through the
//! GitHub fake (`shared/git/tests/github_fake`, a GitHub App installation), every address on
//! 127.0.0.1.
//!
//! Shown here: a pull request touching the three apps gets one `gannet/plan-preview` run for
//! its head, `success`, listing each app with its change as the platform reads it with the
//! targets' `planPreview` credentials (the Terraform plan got the preview's variable, never
//! the deploy's); a duplicate delivery answers 200 and changes nothing; a newer head
//! supersedes a preview whose plan is still running (its run `cancelled`, one run per head);
//! a fork's pull request by an unlisted author reads nothing (no job starts) and shows the
//! files' diff.
//!
//! These tests need moto (`GANNET_MOTO_ENDPOINT`), terraform on PATH and the Kubernetes tools
//! (`scripts/kube.sh ensure`): `make test` provides all three; without them they fail saying
//! how to get them.

#[path = "../shared/git/tests/github_fake/mod.rs"]
mod github_fake;
mod lambda_moto;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gannet_kube_fake::RealKube;
use github_fake::test_key::{APP_PRIVATE_KEY, APP_PUBLIC_KEY};
use github_fake::{Credentials, FakeGithub};
use serde_json::{json, Value};
use support::{git, Gannet, Repo, UpOptions, GITHUB, SECRET};

/// The bound on a deployment, and on a preview (a Terraform plan is a job).
const LIMIT: Duration = Duration::from_secs(90);
const CHECK_NAME: &str = "gannet/plan-preview";

/// What the preview's Terraform jobs get as `TF_VAR_who` (`planPreview.allowEnv`), and what
/// deployments get as `TF_VAR_deployer` (the target's own `allowEnv`).
const PREVIEW_VALUE: &str = "preview-reader-7c1";
const DEPLOY_VALUE: &str = "deploy-writer-9d4";

const TF_APP: &str = "apps/infra";
const KUBE_APP: &str = "apps/web";
const LAMBDA_APP: &str = "apps/fn";

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

/// A kube-apiserver, moto, the GitHub fake, a repository with the three apps deployed from
/// `main`, and the `gannet up` that deployed them.
struct Lab {
    g: Gannet,
    github: FakeGithub,
    repo: Repo,
    /// Files jobs read and write (the Terraform state, the CLI config): not under gannet's
    /// directory, which no job reaches.
    _outside: tempfile::TempDir,
    files: Files,
    _state: tempfile::TempDir,
    kube: RealKube,
    /// Last, so the fake's server tasks are aborted before the runtime goes.
    _runtime: tokio::runtime::Runtime,
}

impl Lab {
    fn new() -> Self {
        require_terraform();
        lambda_moto::ensure_role();
        let moto = lambda_moto::endpoint();
        let kube = RealKube::start();
        let outside = tempfile::tempdir().expect("tempdir");
        let state = tempfile::tempdir().expect("tempdir");
        // Deployments and previews reach the cluster through kubeconfigs of their own.
        let deploy_kube = outside.path().join("deploy");
        let preview_kube = outside.path().join("preview");
        for dir in [&deploy_kube, &preview_kube] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        let deploy_kubeconfig = kube.write_kubeconfig(&deploy_kube);
        let preview_kubeconfig = kube.write_kubeconfig(&preview_kube);
        let cli_config = outside.path().join("terraformrc");
        std::fs::write(&cli_config, "").expect("terraformrc");

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the GitHub fake");
        let github = runtime.block_on(FakeGithub::start(Credentials::App {
            app_id: 42,
            installation_id: 7,
            public_pem: APP_PUBLIC_KEY.into(),
            expires_at: "2099-01-01T00:00:00Z".into(),
        }));
        github.create_repo(GITHUB);

        let function = lambda_moto::unique("preview");
        let bucket = lambda_moto::unique("code").to_lowercase();
        lambda_moto::create_bucket(&bucket);
        let repo = Repo::new();
        let files = Files {
            tf_state: outside.path().join("infra.tfstate"),
            function,
            bucket,
        };
        let first = repo.commit(
            &files.all(&Change::default()).borrowed(),
            "add infra, web and fn",
        );

        let extra_config = format!(
            "    planPreview: {{minInterval: 1s, forks: {{credentials: true, authors: [trusted]}}}}\n\
             intervals: {{poll: 1m, resume: 1s}}\n\
             queue: {{visibility: 3s}}\n\
             github: {{apiUrl: '{api}', secretEnv: GANNET_E2E_GITHUB}}\n\
             plugins:\n\
             \x20 terraform:\n\
             \x20   deployTargets:\n\
             \x20     - name: local\n\
             \x20       env: {{TF_CLI_CONFIG_FILE: {cli_config}}}\n\
             \x20       allowEnv: [TF_VAR_deployer]\n\
             \x20       planPreview: {{allowEnv: [TF_VAR_who]}}\n\
             \x20 kubernetes:\n\
             \x20   deployTargets:\n\
             \x20     - name: local\n\
             \x20       kubeConfigPath: {deploy_kubeconfig}\n\
             \x20       planPreview: {{kubeConfigPath: {preview_kubeconfig}}}\n\
             \x20 lambda:\n\
             \x20   deployTargets:\n\
             \x20     - name: local\n\
             \x20       region: {region}\n\
             \x20       endpoint: {moto}\n\
             \x20       planPreview: {{roleArn: '{role}'}}\n",
            api = github.base,
            cli_config = cli_config.display(),
            deploy_kubeconfig = deploy_kubeconfig.display(),
            preview_kubeconfig = preview_kubeconfig.display(),
            region = lambda_moto::REGION,
            role = lambda_moto::ROLE,
        );
        let mut env = lambda_moto::gannet_env();
        env.extend(support::kube_tools());
        let secret =
            json!({"appId": 42, "installationId": 7, "privateKey": APP_PRIVATE_KEY}).to_string();
        env.extend(
            [
                ("GANNET_E2E_GITHUB", secret.as_str()),
                ("TF_VAR_who", PREVIEW_VALUE),
                ("TF_VAR_deployer", DEPLOY_VALUE),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let opts = UpOptions {
            extra_config,
            env,
            ..UpOptions::default()
        };
        let g = Gannet::start(&repo, state.path(), &opts);
        let (status, body) = g.push(&first, "main-1");
        assert_eq!(status, 202, "{body}");
        let deployed = g.wait_until(LIMIT, "the three apps are deployed from main", || {
            let of_first: Vec<Value> = g
                .deployments()
                .into_iter()
                .filter(|d| d["commit"] == first.as_str())
                .collect();
            let ended = of_first.iter().all(|d| {
                matches!(
                    d["status"].as_str(),
                    Some("SUCCESS" | "FAILURE" | "CANCELLED")
                )
            });
            (of_first.len() == 3 && ended).then_some(of_first)
        });
        for d in &deployed {
            assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
        }
        // From here on only the preview's kubeconfig exists: a preview reading the cluster
        // through the deploy target's connection would fail.
        std::fs::remove_file(&deploy_kubeconfig).expect("remove the deploy kubeconfig");
        let lab = Self {
            g,
            github,
            repo,
            _outside: outside,
            files,
            _state: state,
            kube,
            _runtime: runtime,
        };
        // The deployment's plan got the deploy credential, and only it.
        let applied = lab.tf_state();
        assert_eq!(lab.tf_input(&applied, "deploy_credential"), json!(true));
        assert_eq!(lab.tf_input(&applied, "who"), json!("nobody"));
        lab
    }

    /// Commits `change` on pull request `pr`'s branch (made from `main` the first time),
    /// points `refs/pull/<pr>/head` at it, as GitHub does, and returns its sha. `main` stays
    /// checked out.
    fn push_pr(&self, pr: u64, change: &Change) -> String {
        let dir = self.repo.path();
        let branch = format!("pr-{pr}");
        let exists = Command::new("git")
            .current_dir(dir)
            .args(["rev-parse", "--verify", "-q", &branch])
            .output()
            .expect("git")
            .status
            .success();
        if exists {
            git(dir, &["checkout", "-q", &branch]);
        } else {
            git(dir, &["checkout", "-q", "-b", &branch]);
        }
        let files = self.files.all(change);
        let head = self
            .repo
            .commit(&files.borrowed(), &format!("pull request {pr}"));
        git(dir, &["update-ref", &format!("refs/pull/{pr}/head"), &head]);
        git(dir, &["checkout", "-q", "main"]);
        head
    }

    /// Delivers a signed `pull_request` event; returns (status, body).
    fn deliver(&self, delivery: &str, pr: &PullRequest<'_>) -> (u16, Value) {
        let body = pr.payload().to_string();
        let sig = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
        self.g.hook(
            "pull_request",
            Some(delivery),
            Some(&sig),
            body.into_bytes(),
        )
    }

    /// Every check run on `head`, as the fake keeps it (the latest state of each).
    fn runs_on(&self, head: &str) -> Vec<(u64, Value)> {
        let runs = self.github.check_runs();
        runs.into_iter()
            .filter(|(_, r)| r["head_sha"] == head)
            .collect()
    }

    /// Waits until `head` has a run that is `status`; returns it.
    fn wait_run(&self, head: &str, status: &str) -> Value {
        self.g
            .wait_until(LIMIT, &format!("a check run on {head} is {status}"), || {
                self.runs_on(head)
                    .into_iter()
                    .map(|(_, r)| r)
                    .find(|r| r["status"] == status)
            })
    }

    /// The preview as the API shows it.
    fn preview(&self, id: &str) -> Value {
        let (status, body) = self.g.get(&format!("/plan-previews/{id}"));
        assert_eq!(status, 200, "{body}");
        body["preview"].clone()
    }

    /// The Terraform state deployments left (local, outside gannet's directory).
    fn tf_state(&self) -> Value {
        let text = std::fs::read_to_string(&self.files.tf_state).expect("the terraform state");
        serde_json::from_str(&text).expect("state JSON")
    }

    fn tf_input(&self, state: &Value, name: &str) -> Value {
        state["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == name))
            .map(|r| r["instances"][0]["attributes"]["input"]["value"].clone())
            .unwrap_or(Value::Null)
    }

    /// How many requests other than reads the API server got for the ConfigMap.
    fn configmap_writes(&self) -> usize {
        let requests = self.kube.requests().into_iter();
        requests
            .filter(|r| {
                r.method != "GET"
                    && r.path
                        .ends_with("/namespaces/default/configmaps/web-settings")
            })
            .count()
    }

    /// The ConfigMap's `data.greeting` on the API server.
    fn greeting(&self) -> Value {
        let map = self
            .kube
            .get("v1", "ConfigMap", Some("default"), "web-settings");
        map.expect("the ConfigMap")["data"]["greeting"].clone()
    }

    /// The names of the job directories gannet's job runner made.
    fn jobs(&self) -> Vec<String> {
        let dir = self.g.state_dir.join("state/jobs");
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("gannet's jobs directory {}: {e}", dir.display()));
        entries
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// Waits until no job gannet started is still running (jobs outlive `gannet up`).
    fn wait_jobs_ended(&self) {
        self.g
            .wait_until(LIMIT, "every job gannet started has ended", || {
                let dir = self.g.state_dir.join("state/jobs");
                let running = self
                    .jobs()
                    .into_iter()
                    .filter(|name| !name.starts_with('.') && !has_ended(&dir.join(name)));
                (running.count() == 0).then_some(())
            });
    }
}

/// Whether a job directory holds the job's end (its script's exit code recorded, or the job
/// stopped: cancelled, timed out).
fn has_ended(dir: &Path) -> bool {
    ["exit", "rc", "stopped"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// What a pull request changes in the three apps (`None`: as on `main`).
#[derive(Default)]
struct Change {
    /// `terraform_data.app`'s input.
    size: Option<&'static str>,
    /// More HCL in main.tf.
    hcl: Option<String>,
    /// The ConfigMap's `data.greeting`.
    greeting: Option<&'static str>,
    /// The function's memory.
    memory: Option<u32>,
}

/// The apps' files.
struct Files {
    tf_state: PathBuf,
    function: String,
    bucket: String,
}

/// Files to commit, owned.
struct Owned(Vec<(String, String)>);

impl Owned {
    fn borrowed(&self) -> Vec<(&str, &str)> {
        self.0
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect()
    }
}

impl Files {
    fn all(&self, change: &Change) -> Owned {
        let main_tf = format!(
            r#"terraform {{
  backend "local" {{
    path = "{state}"
  }}
}}

variable "who" {{
  type    = string
  default = "nobody"
}}

variable "deployer" {{
  type    = string
  default = "none"
}}

resource "terraform_data" "app" {{
  input = "{size}"
}}

resource "terraform_data" "who" {{
  input = var.who
}}

resource "terraform_data" "deploy_credential" {{
  input = var.deployer != "none"
}}
{hcl}"#,
            state = self.tf_state.display(),
            size = change.size.unwrap_or("size-1"),
            hcl = change.hcl.as_deref().unwrap_or_default(),
        );
        let configmap = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\n  namespace: default\ndata:\n  greeting: {}\n",
            change.greeting.unwrap_or("hello")
        );
        let function = lambda_moto::upload_code(&self.function, &self.bucket, "v1").replace(
            "memory: 128",
            &format!("memory: {}", change.memory.unwrap_or(128)),
        );
        let app = |kind: &str, name: &str| {
            format!("apiVersion: pipecd.dev/v1beta1\nkind: {kind}\nspec:\n  name: {name}\n")
        };
        Owned(vec![
            (
                format!("{TF_APP}/app.pipecd.yaml"),
                app("TerraformApp", "infra"),
            ),
            (format!("{TF_APP}/main.tf"), main_tf),
            (
                format!("{KUBE_APP}/app.pipecd.yaml"),
                app("KubernetesApp", "web"),
            ),
            (format!("{KUBE_APP}/configmap.yaml"), configmap),
            (
                format!("{LAMBDA_APP}/app.pipecd.yaml"),
                app("LambdaApp", "fn"),
            ),
            (format!("{LAMBDA_APP}/function.yaml"), function),
        ])
    }
}

/// A `pull_request` delivery's fields.
struct PullRequest<'a> {
    action: &'a str,
    number: u64,
    head: &'a str,
    /// `head.repo.full_name`: the repository itself, or a fork.
    from: &'a str,
    author: &'a str,
}

impl PullRequest<'_> {
    /// The payload as GitHub shapes it, with the fields gannet reads.
    fn payload(&self) -> Value {
        json!({
            "action": self.action,
            "number": self.number,
            "pull_request": {
                "number": self.number,
                "head": {"sha": self.head, "ref": format!("change-{}", self.number), "repo": {"full_name": self.from}},
                "base": {"ref": "main", "sha": "0000000000000000000000000000000000000000", "repo": {"full_name": GITHUB}},
                "user": {"login": self.author},
                "author_association": "CONTRIBUTOR",
                "draft": false
            },
            "repository": {
                "full_name": GITHUB,
                "clone_url": format!("https://github.com/{GITHUB}.git"),
                "html_url": format!("https://github.com/{GITHUB}"),
            },
            "sender": {"login": self.author},
        })
    }
}

/// The part of a check run's text about one app: from its `### <name>` heading to the next.
fn section<'a>(text: &'a str, app: &str) -> &'a str {
    let start = text
        .find(&format!("### {app} "))
        .unwrap_or_else(|| panic!("no section for {app} in:\n{text}"));
    let rest = &text[start + 4..];
    let end = rest.find("\n### ").map_or(rest.len(), |e| e + 1);
    &text[start..start + 4 + end]
}

/// Fails unless `part` (a check run's section) holds `want`.
fn assert_has(part: &str, want: &str) {
    assert!(part.contains(want), "{want:?} not in:\n{part}");
}

fn output(run: &Value, field: &str) -> String {
    run["output"][field].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_pull_request_gets_one_check_run_showing_each_platforms_change_read_with_preview_credentials() {
    let lab = Lab::new();
    let head = lab.push_pr(
        1,
        &Change {
            size: Some("size-2"),
            greeting: Some("bonjour"),
            memory: Some(256),
            ..Change::default()
        },
    );
    let pr = PullRequest {
        action: "opened",
        number: 1,
        head: &head,
        from: GITHUB,
        author: "dev",
    };
    let written = lab.configmap_writes();
    let (status, body) = lab.deliver("pr-1-opened", &pr);
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("queued")),
        "{body}"
    );
    let id = body["preview"].as_str().expect("a preview id").to_owned();
    // The same delivery again, at once: a duplicate.
    let (status, again) = lab.deliver("pr-1-opened", &pr);
    assert_eq!(
        (status, again["status"].as_str()),
        (200, Some("duplicate")),
        "{again}"
    );

    let run = lab.wait_run(&head, "completed");
    let runs = lab.runs_on(&head);
    assert_eq!(runs.len(), 1, "one check run for the head: {runs:#?}");
    assert_eq!(run["name"], CHECK_NAME, "{run}");
    assert_eq!(run["conclusion"], "success", "{run}");
    let (summary, text) = (output(&run, "summary"), output(&run, "text"));
    for app in ["infra", "web", "fn"] {
        let row = summary
            .lines()
            .find(|l| l.starts_with(&format!("| {app} |")))
            .unwrap_or_else(|| panic!("no row for {app} in the summary:\n{summary}"));
        assert!(row.contains("| CHANGES |"), "{app}: {row}\n{summary}");
    }
    // Terraform: the changed attribute; the preview's plan got `TF_VAR_who` (planPreview's
    // allowEnv) and not `TF_VAR_deployer` (the deploy target's), which the deployment's did.
    let infra = section(&text, "infra");
    assert_has(
        infra,
        "@@ terraform_data.app.input @@\n-\"size-1\"\n+\"size-2\"\n",
    );
    assert_has(
        infra,
        &format!("@@ terraform_data.who.input @@\n-\"nobody\"\n+\"{PREVIEW_VALUE}\"\n"),
    );
    assert_has(
        infra,
        "@@ terraform_data.deploy_credential.input @@\n-true\n+false\n",
    );
    assert!(
        !run.to_string().contains(DEPLOY_VALUE),
        "the deploy credential reached the preview:\n{text}"
    );
    // Kubernetes: the ConfigMap's field, live (read with the preview's kubeconfig: the deploy
    // target's is gone) against the head's manifest.
    assert_has(
        section(&text, "web"),
        "@@ ConfigMap/default/web-settings: data.greeting @@\n-\"hello\"\n+\"bonjour\"\n",
    );
    // Lambda: the function's memory, live against the head's manifest.
    assert_has(section(&text, "fn"), "@@ spec.memory @@\n-128\n+256\n");
    // Read, never written: the ConfigMap and the Terraform state are as deployed.
    assert_eq!(
        lab.configmap_writes(),
        written,
        "the preview wrote to the cluster"
    );
    assert_eq!(lab.greeting(), json!("hello"));
    assert_eq!(lab.tf_input(&lab.tf_state(), "app"), json!("size-1"));
    let preview = lab.preview(&id);
    assert_eq!(
        (&preview["status"], &preview["result"], &preview["pr"]),
        (&json!("DONE"), &json!("CHANGES"), &json!(1)),
        "{preview}"
    );
    assert!(
        preview["apps"]
            .as_array()
            .is_some_and(|apps| apps.len() == 3 && apps.iter().all(|a| a["credentials"] == true)),
        "{preview}"
    );
    // A preview's Terraform plan is a job of its own, keyed by the head.
    assert!(
        lab.jobs()
            .iter()
            .any(|j| j.starts_with("preview-") && j.contains(&head[..8])),
        "{:?}",
        lab.jobs()
    );

    // A redelivery once it is done: 200, and still one run, not touched again.
    let requests = lab.github.check_run_requests().len();
    let (status, again) = lab.deliver("pr-1-opened", &pr);
    assert_eq!(
        (status, again["status"].as_str()),
        (200, Some("duplicate")),
        "{again}"
    );
    let synchronize = PullRequest {
        action: "synchronize",
        ..pr
    };
    let (status, same_head) = lab.deliver("pr-1-synchronize-again", &synchronize);
    assert_eq!(
        (status, same_head["preview"].as_str()),
        (200, Some(id.as_str())),
        "{same_head}"
    );
    lab.g.wait_idle(LIMIT);
    assert_eq!(lab.runs_on(&head).len(), 1);
    assert_eq!(lab.github.check_run_requests().len(), requests);
    // The App's key and the installation tokens it got stay out of gannet's log.
    let log = lab.g.log();
    assert!(!log.contains("PRIVATE KEY"), "the App's key is in the log");
    for token in lab.github.issued_tokens() {
        assert!(!log.contains(&token), "an installation token is in the log");
    }
    assert!(
        !lab.github.issued_tokens().is_empty(),
        "no installation token was asked for"
    );
    lab.wait_jobs_ended();
}

/// An HTTP state backend on loopback that holds every request until released (at most
/// [`LIMIT`]): a Terraform plan reading it stays running.
struct Gate {
    address: String,
    released: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
}

impl Gate {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}/state", listener.local_addr().expect("addr"));
        let released = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let (r, h) = (released.clone(), hits.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (r, h) = (r.clone(), h.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf);
                    h.fetch_add(1, Ordering::SeqCst);
                    let start = Instant::now();
                    while !r.load(Ordering::SeqCst) && start.elapsed() < LIMIT {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let body = r#"{"version":4,"terraform_version":"1.5.0","serial":1,"lineage":"gate","outputs":{},"resources":[]}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        Self {
            address,
            released,
            hits,
        }
    }

    /// HCL reading this backend.
    fn hcl(&self) -> String {
        format!(
            "\ndata \"terraform_remote_state\" \"gate\" {{\n  backend = \"http\"\n  config = {{\n    address = \"{}\"\n  }}\n}}\n",
            self.address
        )
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.release();
    }
}

#[test]
fn a_newer_head_supersedes_a_running_preview_and_a_fork_is_read_without_credentials() {
    let lab = Lab::new();
    let gate = Gate::start();

    // Head A: its plan waits at the gate, so the preview is still running when B comes.
    let a = lab.push_pr(
        2,
        &Change {
            size: Some("size-3"),
            hcl: Some(gate.hcl()),
            ..Change::default()
        },
    );
    let (status, body) = lab.deliver(
        "pr-2-a",
        &PullRequest {
            action: "opened",
            number: 2,
            head: &a,
            from: GITHUB,
            author: "dev",
        },
    );
    assert_eq!(status, 202, "{body}");
    let first = body["preview"].as_str().expect("a preview id").to_owned();
    lab.wait_run(&a, "in_progress");
    lab.g.wait_until(LIMIT, "head A's plan reads the gate", || {
        (gate.hits.load(Ordering::SeqCst) > 0).then_some(())
    });

    let b = lab.push_pr(
        2,
        &Change {
            size: Some("size-4"),
            ..Change::default()
        },
    );
    let (status, body) = lab.deliver(
        "pr-2-b",
        &PullRequest {
            action: "synchronize",
            number: 2,
            head: &b,
            from: GITHUB,
            author: "dev",
        },
    );
    assert_eq!(status, 202, "{body}");
    let second = body["preview"].as_str().expect("a preview id").to_owned();
    assert_ne!(first, second);

    let cancelled = lab.wait_run(&a, "completed");
    gate.release();
    assert_eq!(cancelled["conclusion"], "cancelled", "{cancelled}");
    assert!(
        output(&cancelled, "summary").contains(&b[..7])
            || output(&cancelled, "text").contains(&b[..7]),
        "the cancelled run names the newer head: {cancelled}"
    );
    let done = lab.wait_run(&b, "completed");
    assert_eq!(done["conclusion"], "success", "{done}");
    assert!(output(&done, "text").contains("size-4"), "{done}");
    assert_eq!(lab.runs_on(&a).len(), 1, "one run for head A");
    assert_eq!(lab.runs_on(&b).len(), 1, "one run for head B");
    assert_eq!(lab.preview(&first)["status"], "SUPERSEDED");
    assert_eq!(lab.preview(&second)["status"], "DONE");
    // The superseded head's plan was stopped, not left to run out its timeout.
    let jobs_dir = lab.g.state_dir.join("state/jobs");
    let stopped: Vec<String> = lab
        .jobs()
        .into_iter()
        .filter(|name| name.starts_with("preview") && name.contains(&a[..8]))
        .map(|name| {
            std::fs::read_to_string(jobs_dir.join(&name).join("stopped")).unwrap_or_default()
        })
        .collect();
    assert_eq!(stopped, ["cancelled"], "head A's preview job");

    // A fork's pull request by an author no setting lists: nothing read with credentials.
    let fork = lab.push_pr(
        3,
        &Change {
            size: Some("size-5"),
            greeting: Some("hola"),
            memory: Some(512),
            ..Change::default()
        },
    );
    let jobs_before = lab.jobs();
    let (status, body) = lab.deliver(
        "pr-3-fork",
        &PullRequest {
            action: "opened",
            number: 3,
            head: &fork,
            from: "stranger/shop",
            author: "stranger",
        },
    );
    assert_eq!(status, 202, "{body}");
    let id = body["preview"].as_str().expect("a preview id").to_owned();
    let run = lab.wait_run(&fork, "completed");
    assert_eq!(lab.runs_on(&fork).len(), 1);
    assert_eq!(run["name"], CHECK_NAME);
    let text = output(&run, "text");
    let reason = "its author stranger is not in planPreview.forks.authors";
    for (app, file, line) in [
        ("infra", "apps/infra/main.tf", "+  input = \"size-5\""),
        ("web", "apps/web/configmap.yaml", "+  greeting: hola"),
        ("fn", "apps/fn/function.yaml", "+  memory: 512"),
    ] {
        let part = section(&text, app);
        for want in ["not read from the platform", reason, file, line] {
            assert_has(part, want);
        }
    }
    let preview = lab.preview(&id);
    assert_eq!(
        (&preview["fork"], &preview["credentials"]),
        (&json!(true), &json!(false)),
        "{preview}"
    );
    // No job was started for it: no plan ran with the preview's (or any) credentials.
    lab.g.wait_idle(LIMIT);
    // (A drift check may start a job of its own meanwhile: only previews' jobs count.)
    let new_jobs: Vec<String> = lab
        .jobs()
        .into_iter()
        .filter(|j| !jobs_before.contains(j) && j.starts_with("preview-"))
        .collect();
    assert!(
        new_jobs.is_empty(),
        "jobs started for the fork: {new_jobs:?}"
    );
    assert!(
        !lab.jobs().iter().any(|j| j.contains(&fork[..8])),
        "{:?}",
        lab.jobs()
    );
    lab.wait_jobs_ended();
}
