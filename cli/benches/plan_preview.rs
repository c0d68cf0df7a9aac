//! The plan preview benchmark: signed `pull_request` webhooks into a real release `gannet up`,
//! timed from the webhook's POST to the pull request's check run on a FAKE GitHub API (the
//! test fake in `shared/git/tests/github_fake`, replaying GitHub's check-run shapes, in this
//! process on 127.0.0.1): (a) the run created `in_progress`, (b) the run completed. Prints a
//! markdown table (BENCHMARKS.md, "Plan preview").
//!
//! Two kinds of app, each previewed BENCH_PREVIEWS times (one pull request each, one after
//! the other):
//! - `files`: an app whose target has no preview credentials, so its preview reads no
//!   platform and shows the diff of its files: gannet's own path, webhook to check run;
//! - `terraform`: a TerraformApp (the built-in `terraform_data`, local state) whose target has
//!   `planPreview: {allowEnv: [TF_VAR_who]}`: `terraform init` and `plan` run as a job, and
//!   gannet looks at the job every poll interval of the job runner.
//!
//! PipeCD's plan preview is not run here (no PipeCD on this machine); its floor is computed
//! from its source: three chained tickers, 5 s, 5 s and 10 s (see BENCHMARKS.md).
//!
//! Settings (environment): BENCH_PREVIEWS (10 per kind), BENCH_KEEP (keep the work
//! directory). `terraform` must be on PATH (`scripts/terraform.sh path`); without it the
//! terraform rows are left out, saying so.

#[path = "../../shared/git/tests/github_fake/mod.rs"]
mod github_fake;
#[path = "common/stats.rs"]
mod stats;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use github_fake::test_key::{APP_PRIVATE_KEY, APP_PUBLIC_KEY};
use github_fake::{Credentials, FakeGithub};
use serde_json::{json, Value};
use stats::{env_number, median};

const REPO: &str = "acme/shop";
const LAMBDA_APP: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: files\n";
const TERRAFORM_APP: &str =
    "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: tf\n";

fn main_tf(n: usize) -> String {
    format!(
        "variable \"who\" {{\n  type = string\n}}\nresource \"terraform_data\" \"web\" {{\n  input = \"${{var.who}}-{n}\"\n}}\n"
    )
}

struct Up {
    child: Child,
    log: PathBuf,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One kind's timings, in milliseconds.
#[derive(Default)]
struct Timings {
    created: Vec<f64>,
    completed: Vec<f64>,
    conclusions: Vec<String>,
}

fn main() {
    let previews = env_number("BENCH_PREVIEWS", 10).max(1);
    let terraform = Command::new("terraform")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    let fake = runtime.block_on(FakeGithub::start(Credentials::App {
        app_id: 42,
        installation_id: 7,
        public_pem: APP_PUBLIC_KEY.into(),
        expires_at: "2099-01-01T00:00:00Z".into(),
    }));
    fake.create_repo(REPO);

    let root = tempfile::tempdir().expect("tempdir");
    let repo = root.path().join("shop");
    std::fs::create_dir_all(repo.join("apps/files")).expect("dir");
    std::fs::create_dir_all(repo.join("apps/tf")).expect("dir");
    support::git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("apps/files/app.pipecd.yaml"), LAMBDA_APP).expect("write");
    std::fs::write(repo.join("apps/files/function.yaml"), "memory: 0\n").expect("write");
    std::fs::write(repo.join("apps/tf/app.pipecd.yaml"), TERRAFORM_APP).expect("write");
    std::fs::write(repo.join("apps/tf/main.tf"), main_tf(0)).expect("write");
    support::git(&repo, &["add", "-A"]);
    support::git(&repo, &["commit", "-q", "-m", "base"]);

    let port = support::free_port();
    let config = root.path().join("gannet.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook: {{secretEnv: GANNET_BENCH_SECRET}}\ngithub: {{apiUrl: '{}', secretEnv: GANNET_BENCH_GITHUB}}\nintervals: {{poll: 10m}}\nrepos:\n  - id: shop\n    path: {}\n    github: {REPO}\nplugins:\n  terraform:\n    deployTargets:\n      - name: local\n        planPreview: {{allowEnv: [TF_VAR_who]}}\n",
            fake.base,
            repo.display()
        ),
    )
    .expect("config");
    let log = root.path().join("gannet.log");
    let secret = json!({"appId": 42, "installationId": 7, "privateKey": APP_PRIVATE_KEY});
    let mut up = Up {
        child: Command::new(env!("CARGO_BIN_EXE_gannet"))
            .args(["up", "--config"])
            .arg(&config)
            .env("GANNET_BENCH_SECRET", support::SECRET)
            .env("GANNET_BENCH_GITHUB", secret.to_string())
            .env("TF_VAR_who", "preview")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("gannet up starts"),
        log: log.clone(),
    };
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::new();
    let ready = Instant::now();
    while !http
        .get(format!("{url}/healthz"))
        .send()
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            ready.elapsed() < Duration::from_secs(60),
            "gannet up did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut kinds = vec![("files", Timings::default())];
    if terraform {
        kinds.push(("terraform", Timings::default()));
    }
    let mut pr = 0;
    for (kind, timings) in &mut kinds {
        for i in 0..previews {
            pr += 1;
            let head = pull_request(&repo, pr, kind, i + 1);
            let body = payload(pr, &head).to_string();
            let sig = gannet_events::github::sign(support::SECRET.as_bytes(), body.as_bytes());
            let sent = Instant::now();
            let res = http
                .post(format!("{url}/hooks/github"))
                .header("x-github-event", "pull_request")
                .header("x-github-delivery", format!("bench-{pr}"))
                .header("x-hub-signature-256", sig)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .expect("webhook");
            assert_eq!(res.status().as_u16(), 202, "{:?}", res.text());
            let (created, completed, conclusion) = wait_for_run(&fake, &head, sent, &mut up);
            timings.created.push(created);
            timings.completed.push(completed);
            timings.conclusions.push(conclusion);
        }
    }
    println!("| App | Previews | Webhook → check run `in_progress`, median (max) | Webhook → check run completed, median (max) | Conclusions |");
    println!("|---|---|---|---|---|");
    for (kind, t) in &kinds {
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let mut conclusions = t.conclusions.clone();
        conclusions.sort();
        conclusions.dedup();
        println!(
            "| {kind} | {} | {:.0} ms ({:.0} ms) | {:.0} ms ({:.0} ms) | {} |",
            t.created.len(),
            median(t.created.clone()),
            max(&t.created),
            median(t.completed.clone()),
            max(&t.completed),
            conclusions.join(", ")
        );
    }
    if !terraform {
        println!("\n(terraform is not on PATH: its rows are left out)");
    }
    println!("\nTerraform's reads are jobs, looked at every 100 ms for their first 5 s (the embedded job runner's poll interval); PipeCD's plan preview polls on three chained tickers (5 s, 5 s, 10 s): 10 to 20 s before any work.");
    if std::env::var_os("BENCH_KEEP").is_some() {
        let kept = root.keep();
        eprintln!("kept {}", kept.display());
    }
    drop(up);
}

/// Commits a change to `kind`'s app on a side branch, points `refs/pull/<pr>/head` at it, and
/// returns its sha; `main` is untouched.
fn pull_request(repo: &Path, pr: usize, kind: &str, n: usize) -> String {
    let branch = format!("pr-{pr}");
    support::git(repo, &["checkout", "-q", "-b", &branch, "main"]);
    match kind {
        "files" => std::fs::write(
            repo.join("apps/files/function.yaml"),
            format!("memory: {n}\n"),
        ),
        _ => std::fs::write(repo.join("apps/tf/main.tf"), main_tf(n)),
    }
    .expect("write");
    support::git(repo, &["commit", "-q", "-am", &format!("pr {pr}")]);
    let head = support::git(repo, &["rev-parse", "HEAD"]).trim().to_owned();
    support::git(
        repo,
        &["update-ref", &format!("refs/pull/{pr}/head"), &head],
    );
    support::git(repo, &["checkout", "-q", "main"]);
    head
}

fn payload(pr: usize, head: &str) -> Value {
    json!({
        "action": "opened",
        "number": pr,
        "pull_request": {
            "head": {"sha": head, "repo": {"full_name": REPO}},
            "base": {"ref": "main"},
            "user": {"login": "bench"},
            "author_association": "MEMBER",
            "draft": false
        },
        "repository": {"full_name": REPO, "clone_url": format!("https://github.com/{REPO}.git"), "html_url": format!("https://github.com/{REPO}")}
    })
}

/// Watches the fake for the check run of `head`: when it first appears, when it completes, and
/// its conclusion. Bounded: two minutes.
fn wait_for_run(fake: &FakeGithub, head: &str, sent: Instant, up: &mut Up) -> (f64, f64, String) {
    let mut created = None;
    loop {
        let elapsed = sent.elapsed();
        if let Some(run) = fake
            .check_runs()
            .into_iter()
            .map(|(_, run)| run)
            .find(|run| run["head_sha"] == head)
        {
            let at = elapsed.as_secs_f64() * 1000.0;
            let created = *created.get_or_insert(at);
            if run["status"] == "completed" {
                let conclusion = run["conclusion"].as_str().unwrap_or("?").to_owned();
                return (created, at, conclusion);
            }
        }
        if elapsed > Duration::from_secs(120) || up.child.try_wait().ok().flatten().is_some() {
            let log = std::fs::read_to_string(&up.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "no completed check run for {head}; gannet's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
