//! Plan previews on the AWS runtime, on moto: a signed `pull_request` delivery through the
//! webhook function writes the PREVIEW# item and queues the preview on the drift queue; the
//! drift function's handler reads the pull request through GitHub's API (the GitHub fake,
//! `shared/git/tests/github_fake`, as a GitHub App installation), reads the Lambda app's live
//! state on moto with the target's `planPreview.roleArn` (assumed through moto's STS, never the
//! deploy credentials) and writes the `gannet/plan-preview` check run, linking to the console
//! at `GANNET_CONSOLE_URL`: `success` for a change to the function, `neutral` for a pull
//! request touching no app. The table is read by key and index only (no Scan).
//!
//! These tests need moto: `make test` starts it and sets GANNET_MOTO_ENDPOINT; without it they
//! fail saying how to start it.

#[path = "../../shared/git/tests/github_fake/mod.rs"]
mod github_fake;
#[path = "../../tests/lambda_moto/mod.rs"]
mod lambda_moto;
mod support;

use std::time::Duration;

use gannet_domain::ports::{QueueName, Store};
use gannet_domain::preview::{PreviewResult, PreviewStatus};
use gannet_domain::PreviewId;
use github_fake::test_key::{APP_PRIVATE_KEY, APP_PUBLIC_KEY};
use github_fake::{Credentials, FakeGithub, Mode};
use serde_json::{json, Value};
use support::stack::Template;
use support::{unique, GithubApi, Lab, LabOptions, SECRET};

const CHECK_NAME: &str = "gannet/plan-preview";
const CONSOLE: &str = "https://gannet.example.com";
/// Any role: moto's STS lets anyone assume it, and the proxy counts the AssumeRole.
const PREVIEW_ROLE: &str = "arn:aws:iam::123456789012:role/gannet-preview-reader";
const LIMIT: Duration = Duration::from_secs(60);

/// A lab whose one GitHub repository holds a Lambda app at `main`, on the GitHub fake.
struct Previews {
    lab: Lab,
    github: FakeGithub,
    /// `owner/name` on the fake.
    full_name: String,
    main: String,
    function: String,
    bucket: String,
    /// Last, so the fake's server tasks are aborted before their runtime goes.
    _github_rt: tokio::runtime::Runtime,
}

impl Previews {
    fn new() -> Self {
        Self::on(None)
    }

    /// On moto (`None`), or on gannet's stack from `template` with each function as its role.
    fn on(stack: Option<Template>) -> Self {
        lambda_moto::ensure_role();
        let github_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the GitHub fake");
        let github = github_rt.block_on(FakeGithub::start(Credentials::App {
            app_id: 42,
            installation_id: 7,
            public_pem: APP_PUBLIC_KEY.into(),
            expires_at: "2099-01-01T00:00:00Z".into(),
        }));
        let full_name = format!("acme/{}", unique("shop"));
        let function = lambda_moto::unique("preview");
        let bucket = lambda_moto::unique("code").to_lowercase();
        lambda_moto::create_bucket(&bucket);
        let manifest = lambda_moto::upload_code(&function, &bucket, "v1");
        let app = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n";
        let main = github.commit(
            &full_name,
            &[],
            "add fn",
            &[
                ("apps/fn/app.pipecd.yaml", Mode::File, app.as_bytes()),
                ("apps/fn/function.yaml", Mode::File, manifest.as_bytes()),
                ("README.md", Mode::File, b"shop\n"),
            ],
        );
        github.set_branch(&full_name, "main", &main);
        let secret_json = json!({
            "appId": 42,
            "installationId": 7,
            "privateKey": APP_PRIVATE_KEY,
        })
        .to_string();
        let lab = Lab::new(LabOptions {
            extra_repos: vec![json!({"id": unique("gh"), "github": full_name})],
            github: Some(GithubApi {
                api_url: github.base.clone(),
                secret_json,
            }),
            lambda_preview_role: Some(PREVIEW_ROLE.to_owned()),
            extra_env: vec![("GANNET_CONSOLE_URL", format!("{CONSOLE}/"))],
            stack,
            ..LabOptions::default()
        });
        Self {
            lab,
            github,
            full_name,
            main,
            function,
            bucket,
            _github_rt: github_rt,
        }
    }

    /// A head on top of `main` with `files` changed (the pull request's), on the fake.
    fn head(&self, message: &str, files: &[(&str, &str)]) -> String {
        let manifest = lambda_moto::upload_code(&self.function, &self.bucket, "v1");
        let app = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n";
        let mut all: Vec<(&str, String)> = vec![
            ("apps/fn/app.pipecd.yaml", app.to_owned()),
            ("apps/fn/function.yaml", manifest),
            ("README.md", "shop\n".to_owned()),
        ];
        for (path, content) in files {
            match all.iter_mut().find(|(p, _)| p == path) {
                Some(entry) => entry.1 = (*content).to_owned(),
                None => all.push((path, (*content).to_owned())),
            }
        }
        let files: Vec<(&str, Mode, &[u8])> = all
            .iter()
            .map(|(p, c)| (*p, Mode::File, c.as_bytes()))
            .collect();
        self.github
            .commit(&self.full_name, &[&self.main], message, &files)
    }

    /// A signed `pull_request` delivery (opened) of `head` as pull request `number`, through
    /// the webhook function; (status, body).
    fn open(&mut self, number: u64, head: &str) -> (u16, Value) {
        let body = json!({
            "action": "opened",
            "number": number,
            "pull_request": {
                "number": number,
                "head": {"sha": head, "ref": format!("change-{number}"), "repo": {"full_name": self.full_name}},
                "base": {"ref": "main", "sha": self.main, "repo": {"full_name": self.full_name}},
                "user": {"login": "mona"},
                "author_association": "MEMBER",
                "draft": false
            },
            "repository": {
                "full_name": self.full_name,
                "clone_url": format!("https://github.com/{}.git", self.full_name),
                "html_url": format!("https://github.com/{}", self.full_name),
            },
            "sender": {"login": "mona"},
        })
        .to_string();
        let signature = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
        let delivery = unique("delivery");
        self.lab.webhook(
            &[
                ("x-github-event", "pull_request"),
                ("x-github-delivery", &delivery),
                ("x-hub-signature-256", &signature),
            ],
            "POST",
            &body,
        )
    }

    /// The check runs on `head`, as the fake keeps them.
    fn runs_on(&self, head: &str) -> Vec<Value> {
        self.github
            .check_runs()
            .into_iter()
            .map(|(_, run)| run)
            .filter(|run| run["head_sha"] == head)
            .collect()
    }

    /// Delivers messages until `head`'s check run is completed; returns it.
    fn completed_run(&mut self, head: &str) -> Value {
        let github = &self.github;
        self.lab
            .drive_until(&format!("the check run on {head} completed"), LIMIT, |_| {
                github
                    .check_runs()
                    .iter()
                    .any(|(_, r)| r["head_sha"] == head && r["status"] == "completed")
            });
        let runs = self.runs_on(head);
        assert_eq!(runs.len(), 1, "one check run per head: {runs:#?}");
        runs.into_iter().next().expect("a run")
    }

    fn stored(&self, id: &PreviewId) -> gannet_domain::preview::Preview {
        self.lab
            .rt
            .block_on(self.lab.store.preview(id))
            .expect("read the preview")
            .unwrap_or_else(|| panic!("plan preview {id} is stored"))
    }
}

/// The preview id a queued delivery answered with.
fn queued(status: u16, body: &Value) -> PreviewId {
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "queued", "{body}");
    PreviewId::parse(body["preview"].as_str().expect("the preview's id")).expect("a preview id")
}

#[test]
fn a_pull_request_through_the_webhook_gets_its_check_run_from_the_drift_function() {
    let mut p = Previews::new();
    let head = p.head(
        "bigger fn",
        &[(
            "apps/fn/function.yaml",
            &lambda_moto::upload_code(&p.function, &p.bucket, "v1")
                .replace("memory: 128", "memory: 256"),
        )],
    );
    p.lab.proxy.take();
    let (status, body) = p.open(7, &head);
    let id = queued(status, &body);

    // The webhook wrote the PREVIEW# item and queued the preview on the drift queue.
    let stored = p.stored(&id);
    assert_eq!(stored.status, PreviewStatus::Queued, "{stored:?}");
    assert_eq!((stored.pr, stored.head.as_str()), (Some(7), head.as_str()));
    let waiting = p.lab.receive(QueueName::Drift, 0);
    assert!(
        waiting
            .iter()
            .any(|m| m.body().is_some_and(|b| b.contains(id.as_str()))),
        "the preview's message is on the drift queue: {waiting:?}"
    );
    assert!(
        p.lab.receive(QueueName::Trigger, 0).is_empty(),
        "a pull request queues no trigger"
    );

    let run = p.completed_run(&head);
    assert_eq!(run["name"], CHECK_NAME, "{run:#}");
    assert_eq!(
        run["conclusion"], "success",
        "a change to the function: {run:#}"
    );
    assert_eq!(
        run["details_url"],
        format!("{CONSOLE}/previews/{id}"),
        "the run links to the preview in the console"
    );
    let text = format!("{}\n{}", run["output"]["summary"], run["output"]["text"]);
    assert!(text.contains("fn"), "the run names the app: {text}");

    let done = p.stored(&id);
    assert_eq!(done.status, PreviewStatus::Done, "{done:?}");
    assert_eq!(done.result, PreviewResult::Changes, "{done:?}");
    assert_eq!(done.apps.len(), 1, "{done:?}");
    assert!(
        done.apps[0].credentials,
        "read with the preview credentials: {done:?}"
    );
    assert_eq!(
        done.check_run,
        Some(run["id"].as_u64().expect("the run's id"))
    );

    let counts = p.lab.proxy.take();
    let count = |service: &str, operation: &str| {
        counts
            .get(&(service.to_owned(), operation.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert!(
        count("sts", "AssumeRole") >= 1,
        "the Lambda read assumed planPreview.roleArn: {counts:?}"
    );
    assert_eq!(
        count("dynamodb", "Scan"),
        0,
        "previews are read by key and index only: {counts:?}"
    );
    assert!(count("dynamodb", "Query") >= 1, "{counts:?}");
}

#[test]
fn a_pull_request_touching_no_app_completes_its_check_run_neutral() {
    let mut p = Previews::new();
    let head = p.head("docs", &[("README.md", "shop, documented\n")]);
    let (status, body) = p.open(8, &head);
    let id = queued(status, &body);

    let run = p.completed_run(&head);
    assert_eq!(run["name"], CHECK_NAME, "{run:#}");
    assert_eq!(
        run["conclusion"], "neutral",
        "nothing would change: {run:#}"
    );
    let done = p.stored(&id);
    assert_eq!(
        (done.status, done.result, done.apps.len()),
        (PreviewStatus::Done, PreviewResult::NoChanges, 0),
        "{done:?}"
    );

    // The same delivery again changes nothing: no second run.
    let (again, body) = p.open(8, &head);
    assert_eq!(again, 200, "{body}");
    p.lab.drive_until("the queues quiet", LIMIT, |_| true);
    assert_eq!(p.runs_on(&head).len(), 1);
}

/// On the SAM stack on the IAM-enforcing moto, each function as its role: the webhook role puts
/// the PREVIEW# item and sends to the drift queue; the drift role receives it, reads the
/// preview and its pull request's others through the table and its indexes, reads the GitHub
/// secret and completes the preview. (The deploy target is another account's: moto without
/// IAM, so the drift role's AssumeRole of PreviewRoleArns is not exercised here.)
#[test]
fn on_the_sam_stack_the_webhook_role_queues_a_preview_and_the_drift_role_completes_it() {
    let mut p = Previews::on(Some(Template::Sam));
    let head = p.head(
        "bigger fn",
        &[(
            "apps/fn/function.yaml",
            &lambda_moto::upload_code(&p.function, &p.bucket, "v1")
                .replace("memory: 128", "memory: 256"),
        )],
    );
    let (status, body) = p.open(9, &head);
    let id = queued(status, &body);
    let run = p.completed_run(&head);
    assert_eq!(
        (run["name"].as_str(), run["conclusion"].as_str()),
        (Some(CHECK_NAME), Some("success")),
        "{run:#}"
    );
    let done = p.stored(&id);
    assert_eq!(
        (done.status, done.result),
        (PreviewStatus::Done, PreviewResult::Changes),
        "{done:?}"
    );
    // Listed through the api function, as its role, by repository and pull request.
    let (status, listed) = p.lab.api(
        "GET",
        &format!("/api/v1/plan-previews?repo={}&pr=9", done.repo),
    );
    assert_eq!(status, 200, "{listed}");
    assert!(listed.to_string().contains(id.as_str()), "{listed}");
}
