//! End to end: the lifecycle phases of `app.gannet.yaml` around a Lambda deployment, run by a
//! real `gannet up`.
//!
//! Nothing is faked: the tasks are real scripts run as jobs, the evaluation is a real ANALYSIS
//! HTTP check against an endpoint on loopback whose status the test sets, the function is on
//! Lambda on moto, and the phases' CloudEvents reach a receiver on loopback. The
//! pre-deployment phase's two tasks and one evaluation run at the same time (their recorded
//! spans overlap); a failing evaluation ends the deployment before the Lambda stage runs, and
//! without a rollback; a failing post-deployment task rolls the alias back. A SIGKILL in the
//! middle of a phase loses nothing and runs no task twice.
//!
//! These tests need moto (`make test` starts it and sets GANNET_MOTO_ENDPOINT). Every server is
//! on loopback and every wait is bounded.

mod lambda_moto;
mod support;

use std::path::Path;
use std::time::Duration;

use lambda_moto as moto;
use lambda_moto::Routing;
use serde_json::{json, Value};
use support::receiver::{Endpoint, Receiver};
use support::{app_config, marker_lines, stage_named, token_of, Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(45);
const ALIAS: &str = "Service";
/// The evaluations check an endpoint on loopback, which ANALYSIS reaches only when told to.
const LOOPBACK_CHECKS: &str = "  analysis:\n    http: {allowPrivateNetworks: [127.0.0.0/8]}\n";

/// A task that marks its start and its end in `marks`, taking `secs` between them.
fn task(name: &str, marks: &Path, secs: u32) -> String {
    let m = marks.display();
    format!(
        "      - name: {name}\n        run: echo {name} start >> {m}; sleep {secs}; echo {name} end >> {m}\n"
    )
}

/// A lifecycle file: the pre-deployment phase's `pre` items and the post-deployment phase's
/// `post` items (YAML, each list under `tasks:` or `evaluations:`).
fn lifecycle(pre: &str, post: &str) -> String {
    let mut out = "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n".to_owned();
    if !pre.is_empty() {
        out.push_str(&format!("  preDeployment:\n{pre}"));
    }
    if !post.is_empty() {
        out.push_str(&format!("  postDeployment:\n{post}"));
    }
    out
}

/// An evaluation checking `url` every second for `duration`; no failure allowed.
fn evaluation(name: &str, url: &str, duration: &str) -> String {
    format!(
        "    evaluations:\n      - name: {name}\n        duration: {duration}\n        https:\n          - url: {url}\n            expectedCode: 200\n            interval: 1s\n            failureLimit: 0\n"
    )
}

/// One Lambda function on moto, deployed by a quick-sync app.
struct Lambda {
    repo: Repo,
    function: moto::Function,
}

impl Lambda {
    fn new() -> Self {
        Self {
            repo: Repo::new(),
            function: moto::Function::new("lifecycle"),
        }
    }

    /// Uploads code `version` and commits the app with `lifecycle` beside it.
    fn commit(&self, version: &str, lifecycle: &str) -> String {
        let app = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n".to_owned();
        let manifest = self.function.upload(version);
        let files = [
            ("apps/fn/app.pipecd.yaml", app),
            ("apps/fn/function.yaml", manifest),
            ("apps/fn/app.gannet.yaml", lifecycle.to_owned()),
        ];
        let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
        self.repo.commit(&files, &format!("deploy {version}"))
    }

    fn alias(&self) -> Option<Routing> {
        self.function.alias(ALIAS)
    }
}

/// The item records of a phase stage, by name.
fn items(stage: &Value) -> Vec<(String, Value)> {
    let metadata = stage["metadata"].as_object().cloned().unwrap_or_default();
    metadata
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("item.").filter(|n| !n.contains('.'))?;
            Some((name.to_owned(), serde_json::from_str(v.as_str()?).ok()?))
        })
        .collect()
}

/// The rows of a stage's `Items` table as its plugin presents it in the API (the
/// `presentation.details` the clients render), each as the values of `columns`.
fn presented_items(stage: &Value, columns: &[&str]) -> Vec<Vec<String>> {
    let details = stage["presentation"]["details"].as_array();
    let table = details
        .and_then(|d| {
            d.iter()
                .find(|t| t["type"] == "table" && t["title"] == "Items")
        })
        .unwrap_or_else(|| panic!("no Items table in the stage's presentation: {stage}"));
    let heads: Vec<&str> = table["columns"]
        .as_array()
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let at: Vec<usize> = columns
        .iter()
        .map(|c| {
            heads
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("no column {c} in {table}"))
        })
        .collect();
    table["rows"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|row| {
            at.iter()
                .map(|&i| row[i].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .collect()
}

/// The stage CloudEvents the receiver got for deployment `id`: `(type, stage name)`.
fn stage_events(receiver: &Receiver, id: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = receiver
        .events()
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| {
            e["data"]["deployment"] == id
                && e["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("dev.gannet.stage."))
        })
        .map(|e| {
            let kind = e["type"].as_str().unwrap_or_default().to_owned();
            (
                kind,
                e["data"]["stage_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn phases_run_their_items_at_once_a_failing_evaluation_stops_before_lambda_and_a_failing_post_task_rolls_back(
) {
    let lambda = Lambda::new();
    let upstream = Endpoint::start(200);
    let receiver = Receiver::start(0);
    let marks_dir = tempfile::tempdir().expect("tempdir");
    let marks = marks_dir.path().join("marks");
    let pre = format!(
        "    tasks:\n{}{}{}",
        task("migrate", &marks, 2),
        task("warm-cache", &marks, 2),
        evaluation("upstream", &upstream.url, "3s")
    );
    let post = "    tasks:\n      - name: smoke\n        run: echo smoke test passed\n";
    let v1 = lambda.commit("v1", &lifecycle(&pre, post));
    let state = tempfile::tempdir().expect("tempdir");
    let extra_config = format!(
        "intervals: {{poll: 1m, resume: 1s}}\nqueue: {{visibility: 3s}}\nnotifications:\n  receivers:\n    - name: audit\n      webhook: {{url: \"{}\"}}\nplugins:\n  lambda:\n    deployTargets:\n      - {{name: local, region: {}, endpoint: '{}'}}\n{LOOPBACK_CHECKS}",
        receiver.url,
        moto::REGION,
        moto::endpoint()
    );
    let mut opts = UpOptions::default();
    (opts.extra_config, opts.env) = (extra_config, moto::gannet_env());
    let g = Gannet::start(&lambda.repo, state.path(), &opts);

    // v1: both phases pass around the Lambda stage.
    let id = g.deploy(LIMIT, &v1);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    assert_eq!(
        support::stage_statuses(&d),
        "PRE_DEPLOYMENT SUCCESS, LAMBDA_SYNC SUCCESS, POST_DEPLOYMENT SUCCESS, LAMBDA_ROLLBACK NOT_STARTED_YET",
        "{d}"
    );
    assert!(
        d["summary"]
            .as_str()
            .is_some_and(|s| s.ends_with("with the phases of apps/fn/app.gannet.yaml")),
        "{d}"
    );
    assert_eq!(lambda.alias(), Some(Routing::all_to("1")));
    let records = items(stage_named(&d, "PRE_DEPLOYMENT"));
    assert_eq!(records.len(), 3, "{records:?}");
    let at = |r: &Value, key: &str| r[key].as_u64().unwrap_or_else(|| panic!("{key}: {r}"));
    let last_start = records.iter().map(|(_, r)| at(r, "startedAt")).max();
    let first_end = records.iter().map(|(_, r)| at(r, "completedAt")).min();
    assert!(
        last_start < first_end,
        "the items did not run at the same time: {records:?}"
    );
    for (name, r) in &records {
        assert_eq!(r["status"], "SUCCESS", "{name}: {r}");
    }
    let mut lines = marker_lines(&marks);
    lines.sort();
    assert_eq!(
        lines,
        [
            "migrate end",
            "migrate start",
            "warm-cache end",
            "warm-cache start"
        ]
    );
    let log = g.stage_log(&id, "pre-deployment").join("\n");
    assert!(
        log.contains("[evaluation upstream] [https[0]] #3: HTTP 200 (expected HTTP 200) PASS"),
        "{log}"
    );
    assert!(log.contains("all 3 items succeeded"), "{log}");
    let log = g.stage_log(&id, "post-deployment").join("\n");
    assert!(log.contains("[task smoke] smoke test passed"), "{log}");
    // Each phase's transitions reached the receiver as stage events, once each.
    let want: Vec<(String, String)> = [
        ("dev.gannet.stage.started", "LAMBDA_SYNC"),
        ("dev.gannet.stage.started", "POST_DEPLOYMENT"),
        ("dev.gannet.stage.started", "PRE_DEPLOYMENT"),
        ("dev.gannet.stage.succeeded", "LAMBDA_SYNC"),
        ("dev.gannet.stage.succeeded", "POST_DEPLOYMENT"),
        ("dev.gannet.stage.succeeded", "PRE_DEPLOYMENT"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    g.wait_until(LIMIT, "every stage event of v1 arrived", || {
        (stage_events(&receiver, &id) == want).then_some(())
    });

    // v2: the upstream fails its check, so the deployment stops before the Lambda stage.
    upstream.set(503);
    let v2 = lambda.commit("v2", &lifecycle(&pre, post));
    let id = g.deploy(LIMIT, &v2);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}\n{}", g.log());
    assert_eq!(
        support::stage_statuses(&d),
        "PRE_DEPLOYMENT FAILURE, LAMBDA_SYNC NOT_STARTED_YET, POST_DEPLOYMENT NOT_STARTED_YET, LAMBDA_ROLLBACK NOT_STARTED_YET",
        "nothing ran after the failed phase, not even a rollback: {d}"
    );
    let pre_stage = stage_named(&d, "PRE_DEPLOYMENT");
    let reason = pre_stage["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("evaluation upstream failed: https[0]: 1 of 1 measurements failed"),
        "{reason}"
    );
    assert_eq!(
        moto::versions(&lambda.function.name),
        ["1"],
        "v2 was never published"
    );
    assert_eq!(lambda.alias(), Some(Routing::all_to("1")));
    let stopped: Vec<String> = items(pre_stage)
        .into_iter()
        .filter(|(_, r)| r["status"] == "STOPPED")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(stopped, ["migrate", "warm-cache"], "{pre_stage}");
    g.wait_until(LIMIT, "the phase's failure event arrived", || {
        stage_events(&receiver, &id)
            .contains(&(
                "dev.gannet.stage.failed".to_owned(),
                "PRE_DEPLOYMENT".to_owned(),
            ))
            .then_some(())
    });
    let (code, out) = g.cli(&["deployments", "show", &id]);
    assert_eq!(code, 0, "{out}");
    let table: Vec<String> = out
        .lines()
        .skip_while(|l| *l != "Items of stage pre-deployment:")
        .skip(1)
        .take(4)
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        table.join("\n"),
        "ITEM KIND STATUS\nmigrate task STOPPED\nwarm-cache task STOPPED\nupstream evaluation FAILURE",
        "{out}"
    );
    // The evaluation's own details, as the analysis plugin presents them, under its name.
    let measured = out
        .lines()
        .skip_while(|l| *l != "Measurements of evaluation upstream of stage pre-deployment:")
        .find(|l| l.starts_with("https[0]"));
    assert!(
        measured.is_some_and(|l| l.contains("#1") && l.contains("HTTP 503") && l.contains("FAIL")),
        "the evaluation's measurements: {out}"
    );

    // v3: the upstream is back, but the post-deployment smoke test fails: the alias goes back.
    upstream.set(200);
    let failing_post =
        "    tasks:\n      - name: smoke\n        run: echo smoke test failed >&2; exit 4\n";
    let v3 = lambda.commit("v3", &lifecycle(&pre, failing_post));
    let id = g.deploy(LIMIT, &v3);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}\n{}", g.log());
    assert_eq!(
        support::stage_statuses(&d),
        "PRE_DEPLOYMENT SUCCESS, LAMBDA_SYNC SUCCESS, POST_DEPLOYMENT FAILURE, LAMBDA_ROLLBACK SUCCESS",
        "{d}"
    );
    assert_eq!(
        stage_named(&d, "POST_DEPLOYMENT")["status_reason"],
        "stage post-deployment failed: task smoke failed: script exited with code 4",
        "{d}"
    );
    assert_eq!(
        lambda.alias(),
        Some(Routing::all_to("1")),
        "rolled back to the version before v3"
    );

    // The web console shows each phase's items, with their kind, status and reason, as the
    // plugin presents them: the API's view of the stages first, then the page in Chromium.
    const COLUMNS: [&str; 4] = ["ITEM", "KIND", "STATUS", "REASON"];
    let phases = [
        (
            "PRE_DEPLOYMENT",
            vec![
                ["migrate", "task", "SUCCESS", ""],
                ["warm-cache", "task", "SUCCESS", ""],
                ["upstream", "evaluation", "SUCCESS", ""],
            ],
        ),
        (
            "POST_DEPLOYMENT",
            vec![["smoke", "task", "FAILURE", "script exited with code 4"]],
        ),
    ];
    let mut expect = Vec::new();
    for (name, want) in &phases {
        let stage = stage_named(&d, name);
        let shown = presented_items(stage, &COLUMNS);
        assert_eq!(
            shown, *want,
            "{name}'s items in the API, in the config's order: {stage}"
        );
        let rows: Vec<Value> = want
            .iter()
            .map(|row| {
                let cells = COLUMNS
                    .iter()
                    .zip(row)
                    .map(|(c, v)| ((*c).to_owned(), json!(v)));
                Value::Object(cells.collect())
            })
            .collect();
        expect.push(json!({"stage": stage["id"], "table": "Items", "rows": rows}));
    }
    let run = support::console_scenario(
        &g,
        "stage-tables",
        token_of("vic"),
        "fn",
        &id,
        &json!({ "stages": expect }),
    );
    assert_eq!(run.code, 0, "stage-tables: {run:?}\n{}", g.log());
}

#[test]
fn a_sigkill_mid_phase_resumes_without_running_a_task_twice() {
    let state = tempfile::tempdir().expect("tempdir");
    let marks_dir = tempfile::tempdir().expect("tempdir");
    let marks = marks_dir.path().join("marks");
    let upstream = Endpoint::start(200);
    let pre = format!(
        "    tasks:\n{}{}{}",
        task("one", &marks, 4),
        task("two", &marks, 4),
        evaluation("upstream", &upstream.url, "5s")
    );
    let repo = Repo::new();
    let head = repo.commit(
        &[
            (
                "apps/web/app.pipecd.yaml",
                &app_config("web", "      - name: WAIT\n        with: {duration: 0s}\n"),
            ),
            ("apps/web/app.gannet.yaml", &lifecycle(&pre, "")),
        ],
        "add web",
    );
    let mut opts = UpOptions::default();
    opts.extra_config
        .push_str(&format!("plugins:\n{LOOPBACK_CHECKS}"));
    let mut g = Gannet::start(&repo, state.path(), &opts);
    let id = g.deploy(LIMIT, &head);
    g.wait_until(LIMIT, "both tasks started", || {
        let lines = marker_lines(&marks);
        (lines.contains(&"one start".to_owned()) && lines.contains(&"two start".to_owned()))
            .then_some(())
    });
    g.kill();
    g = g.restart();

    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    assert_eq!(
        support::stage_statuses(&d),
        "PRE_DEPLOYMENT SUCCESS, WAIT SUCCESS",
        "{d}"
    );
    let mut lines = marker_lines(&marks);
    lines.sort();
    assert_eq!(
        lines,
        ["one end", "one start", "two end", "two start"],
        "each task ran once, across the kill"
    );
    let log = g.stage_log(&id, "pre-deployment");
    let count = |text: &str| log.iter().filter(|l| l.contains(text)).count();
    assert_eq!(count("starting 3 at once"), 1, "{log:?}");
    assert_eq!(count("[task one] succeeded"), 1, "{log:?}");
    // The evaluation's slots were each measured once, before and after the kill.
    for slot in 1..=5 {
        let n = count(&format!("[evaluation upstream] [https[0]] #{slot}:"));
        assert!(n <= 1, "slot {slot} measured {n} times: {log:?}");
    }
}

#[test]
fn a_broken_lifecycle_file_fails_planning_naming_its_line_and_changes_nothing() {
    let state = tempfile::tempdir().expect("tempdir");
    let repo = Repo::new();
    let broken = "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeployment:\n    tasks:\n      - name: migrate\n        run: ./migrate.sh\n        timeout: soon\n";
    let head = repo.commit(
        &[
            (
                "apps/web/app.pipecd.yaml",
                &app_config("web", "      - name: WAIT\n        with: {duration: 0s}\n"),
            ),
            ("apps/web/app.gannet.yaml", broken),
        ],
        "add web",
    );
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deploy(LIMIT, &head);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let reason = d["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("apps/web/app.gannet.yaml:8: spec.preDeployment.tasks[0].timeout:"),
        "{reason}"
    );
    assert!(d["stages"].as_array().is_none_or(|s| s.is_empty()), "{d}");
    // config check says the same, naming the file.
    let run = support::run_gannet(
        &[
            "config",
            "check",
            &repo.path().join("apps").to_string_lossy(),
        ],
        &[],
    );
    assert!(
        run.stdout
            .contains("app.gannet.yaml:8: spec.preDeployment.tasks[0].timeout:"),
        "{}",
        run.stdout
    );
}
