//! End to end: the `gannet` client commands' human and `--json` output against a real
//! `gannet up`, `deployments watch` exit codes, and `gannet config check`. Waiting and its exit
//! codes, rollback, pause and completions are in `e2e_cli_wait.rs`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{app_config, deployed_web, run_gannet, CliRun, Gannet};

const LIMIT: Duration = Duration::from_secs(20);

const SCRIPT: &str = "      - name: SCRIPT_RUN\n        with: {run: echo hello-from-cli-test}\n";

/// Runs a client command that must succeed; returns its stdout.
fn ok(g: &Gannet, args: &[&str]) -> String {
    let run = g.cli_env(args, &[]);
    assert_eq!(run.code, 0, "gannet {args:?}: {run:?}");
    run.stdout
}

/// Runs a client command with `--json`; returns what it printed, parsed.
fn json(g: &Gannet, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ok(g, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("gannet {all:?}: not JSON ({e}): {out}"))
}

/// Asserts that every field is present in `v` and is a string.
fn has_strings(v: &Value, fields: &[&str]) {
    for f in fields {
        assert!(v[f].is_string(), "no string field {f} in {v}");
    }
}

/// Asserts the deployment view's required fields, including each stage's.
fn check_deployment_json(d: &Value, id: &str) {
    has_strings(d, &["id", "app", "commit", "status"]);
    assert_eq!(d["id"], id, "{d}");
    assert_eq!(d["app"], "web", "{d}");
    let stages = d["stages"].as_array().expect("stages");
    assert!(!stages.is_empty(), "{d}");
    for s in stages {
        has_strings(s, &["id", "name", "status"]);
    }
}

/// The line of `out` that contains every fragment.
fn line_with<'a>(out: &'a str, fragments: &[&str]) -> &'a str {
    out.lines()
        .find(|l| fragments.iter().all(|f| l.contains(f)))
        .unwrap_or_else(|| panic!("no line with {fragments:?} in:\n{out}"))
}

#[test]
fn apps_and_deployments_print_their_fields_as_tables_and_json() {
    let (repo, _state, g, id) = deployed_web(SCRIPT);
    let commit = repo.head();

    let out = ok(&g, &["apps", "list"]);
    line_with(&out, &["NAME", "KIND", "SYNC", "PATH", "REASON"]);
    line_with(
        &out,
        &[
            "web",
            "Application",
            "SYNCED",
            "apps/web/app.pipecd.yaml",
            &id,
        ],
    );
    let list = json(&g, &["apps", "list"]);
    let apps = list["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), 1, "{list}");
    has_strings(
        &apps[0],
        &["name", "path", "kind", "sync_status", "sync_reason"],
    );
    assert_eq!(
        (&apps[0]["name"], &apps[0]["path"], &apps[0]["sync_status"]),
        (
            &Value::from("web"),
            &Value::from("apps/web/app.pipecd.yaml"),
            &Value::from("SYNCED")
        ),
        "{list}"
    );

    let out = ok(&g, &["apps", "show", "web"]);
    line_with(&out, &["Application web", "apps/web/app.pipecd.yaml"]);
    line_with(&out, &["kind:", "Application"]);
    line_with(&out, &["sync:", "SYNCED", &id]);
    line_with(&out, &["running:", &commit]);
    let app = json(&g, &["apps", "show", "web"]);
    has_strings(
        &app,
        &["name", "path", "kind", "sync_status", "sync_reason"],
    );
    assert_eq!(app["running_commit"], commit.as_str(), "{app}");

    let out = ok(&g, &["deployments", "list"]);
    line_with(&out, &["ID", "APP", "COMMIT", "STATUS"]);
    line_with(&out, &[&id, "web", &commit[..7], "SUCCESS", "ON_COMMIT"]);
    let list = json(&g, &["deployments", "list"]);
    let ds = list["deployments"].as_array().expect("deployments");
    assert_eq!(ds.len(), 1, "{list}");
    check_deployment_json(&ds[0], &id);
    let filtered = json(
        &g,
        &[
            "deployments",
            "list",
            "--app",
            "web",
            "--status",
            "running,pending",
        ],
    );
    assert_eq!(
        filtered["deployments"],
        Value::Array(Vec::new()),
        "{filtered}"
    );

    let out = ok(&g, &["deployments", "show", &id]);
    line_with(&out, &["Deployment", &id, "of web at", &commit[..12]]);
    line_with(&out, &["status:", "SUCCESS"]);
    line_with(&out, &["STAGE", "NAME", "STATUS"]);
    line_with(&out, &["stage-0", "SCRIPT_RUN", "SUCCESS"]);
    let d = json(&g, &["deployments", "show", &id]);
    check_deployment_json(&d, &id);
    assert_eq!(d["commit"], commit.as_str(), "{d}");

    let out = ok(&g, &["deployments", "logs", &id]);
    line_with(&out, &["== stage-0 (SCRIPT_RUN) SUCCESS"]);
    line_with(&out, &["hello-from-cli-test"]);
    let out = ok(&g, &["deployments", "logs", &id, "--stage", "stage-0"]);
    line_with(&out, &["hello-from-cli-test"]);

    // Mistakes exit 1 (2 for a flag that does not parse) and say what is wrong, naming the
    // closest names that exist.
    let cases: [(&[&str], i32, &str); 11] = [
        (
            &["deployments", "show", "d-00000000000000000000"],
            1,
            "HTTP 404",
        ),
        (
            &["deployments", "show", "nonsense"],
            1,
            "no deployment nonsense",
        ),
        (
            &["apps", "show", "nosuch"],
            1,
            "no application named nosuch (HTTP 404)\n",
        ),
        (
            &["apps", "show", "wbe"],
            1,
            "no application named wbe (HTTP 404); did you mean web?",
        ),
        (
            &["sync", "Web"],
            1,
            "no application named Web (HTTP 404); did you mean web?",
        ),
        (
            &["deployments", "list", "--app", "we"],
            1,
            "did you mean web?",
        ),
        (
            &["deployments", "list", "--status", "BOGUS"],
            2,
            "unknown status BOGUS; one of PENDING, PLANNED, RUNNING, ROLLING_BACK, SUCCESS, FAILURE, CANCELLED",
        ),
        (
            &["deployments", "list", "--status", "running,sucess"],
            2,
            "unknown status sucess; did you mean SUCCESS?",
        ),
        (
            &["deployments", "logs", &id, "--stage", "stage-9"],
            1,
            "no stage stage-9; did you mean stage-0?",
        ),
        (
            &["deployments", "logs", &id, "script_run"],
            1,
            "no stage script_run; did you mean stage-0?",
        ),
        (&["apps", "list", "--json", "-o", "name"], 2, "cannot be used with"),
    ];
    for (args, code, message) in cases {
        let run = g.cli_env(args, &[]);
        assert_eq!(run.code, code, "gannet {args:?}: {run:?}");
        assert!(run.stderr.contains(message), "gannet {args:?}: {run:?}");
    }
}

/// `-o name` prints the names (or ids) alone, a line each; `-o wide` adds columns; `-o json`
/// is `--json`.
#[test]
fn lists_and_views_print_as_o_says() {
    let (repo, _state, g, id) = deployed_web(SCRIPT);
    let commit = repo.head();
    let short_id = &id[..10];
    for (args, names) in [
        (vec!["apps", "list"], "web\n".to_owned()),
        (vec!["apps", "show", "web"], "web\n".to_owned()),
        (vec!["apps", "history", "web"], format!("{id}\n")),
        (vec!["deployments", "list"], format!("{id}\n")),
        (vec!["deployments", "show", short_id], format!("{id}\n")),
    ] {
        let mut all = args.clone();
        all.extend(["-o", "name"]);
        assert_eq!(ok(&g, &all), names, "gannet {all:?}");
        let mut all = args.clone();
        all.extend(["-o", "json"]);
        let as_o: Value = serde_json::from_str(&ok(&g, &all)).expect("-o json is JSON");
        assert!(as_o.is_object(), "{as_o}");
        assert_eq!(as_o, json(&g, &args), "gannet {args:?}: -o json is --json");
    }

    let table = ok(&g, &["apps", "list"]);
    let wide = ok(&g, &["apps", "list", "-o", "wide"]);
    line_with(
        &wide,
        &[
            "NAME", "PATH", "RUNNING", "ACTIVE", "REPO", "LABELS", "REASON",
        ],
    );
    line_with(
        &wide,
        &["web", "apps/web/app.pipecd.yaml", &commit[..7], "shop"],
    );
    assert!(!table.contains("LABELS"), "{table}");

    let table = ok(&g, &["deployments", "list"]);
    let wide = ok(&g, &["deployments", "list", "-o", "wide"]);
    line_with(
        &wide,
        &[
            "ID", "TRIGGER", "BY", "STRATEGY", "CREATED", "TOOK", "AUTHOR", "MESSAGE",
        ],
    );
    // The author is the commit's (the harness commits as e2e), the message its first line.
    line_with(&wide, &[&id, "ON_COMMIT", "e2e", "add web"]);
    assert!(!table.contains("AUTHOR"), "{table}");

    let wide = ok(&g, &["apps", "history", "web", "-o", "wide"]);
    line_with(&wide, &["STRATEGY", "AUTHOR", "MESSAGE", "REASON"]);
    let wide = ok(&g, &["deployments", "show", &id, "-o", "wide"]);
    line_with(
        &wide,
        &["STAGE", "NAME", "DESC", "STATUS", "STARTED", "TOOK"],
    );
}

/// `deployments show` says what `watch` does: the commit (author, message, link), who
/// triggered it, each stage's start, duration and key option, the approvers and how to
/// approve a stage that waits, then who approved it.
#[test]
fn deployments_show_tells_who_when_and_how_to_approve() {
    let (repo, _state, g, _) = deployed_web(SCRIPT);
    let stages = "      - name: SCRIPT_RUN\n        with: {run: echo before-approval}\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice, bob]}\n";
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "needs an approval\n\nThe body is not shown.",
    );
    assert_eq!(g.push(&head, "show-approval").0, 202);
    let id = g.deployment_of(&head, LIMIT);
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);

    let out = ok(&g, &["deployments", "show", &id]);
    line_with(
        &out,
        &["commit:", &head[..12], "by e2e", ": needs an approval"],
    );
    assert!(!out.contains("The body"), "{out}");
    line_with(
        &out,
        &[
            "link:",
            &format!("https://github.com/acme/shop/commit/{head}"),
        ],
    );
    // The harness's pushes say e2e pushed them.
    line_with(&out, &["trigger:", "ON_COMMIT, pushed by e2e"]);
    line_with(&out, &["running:  for "]);
    line_with(
        &out,
        &[
            "STAGE", "NAME", "STATUS", "STARTED", "TOOK", "SUMMARY", "REASON",
        ],
    );
    let d = g.deployment(&id);
    let started = support::stage_named(&d, "SCRIPT_RUN")["started_at"]
        .as_str()
        .expect("started")
        .to_owned();
    let row = line_with(&out, &["stage-0", "SCRIPT_RUN", "SUCCESS", &started]);
    let took = row[row.find(&started).expect("started") + started.len()..]
        .split_whitespace()
        .next()
        .unwrap_or_default();
    assert!(
        took.ends_with('s') && took.starts_with(|c: char| c.is_ascii_digit()),
        "a duration after the start: {row}"
    );
    line_with(
        &out,
        &[
            "stage-1",
            "WAIT_APPROVAL",
            "RUNNING",
            "approvers: alice, bob",
        ],
    );
    line_with(
        &out,
        &[&format!(
            "waiting for approval: gannet approve {id} --stage stage-1 (approvers: alice, bob)"
        )],
    );

    let run = g.cli_env(
        &["approve", &id],
        &[("GANNET_TOKEN", support::token_of("alice"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    let out = ok(&g, &["deployments", "show", &id]);
    line_with(
        &out,
        &[
            "stage-1",
            "WAIT_APPROVAL",
            "SUCCESS",
            "approvers: alice, bob; approved by alice",
        ],
    );
    line_with(&out, &["ended:", ", took "]);
    assert!(!out.contains("waiting for approval"), "{out}");
    // A sync names who asked for it.
    let run = g.cli_env(&["sync", "web", "--force"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let synced = run
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("an id")
        .to_owned();
    line_with(
        &ok(&g, &["deployments", "show", &synced]),
        &["trigger:", "ON_COMMAND by admin"],
    );
    let run = g.cli_env(&["cancel", &synced, "--no-rollback"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// `deployments logs -f` prints a stage's lines as they are written and ends with the stage
/// (not the deployment); `--timestamps` puts each line's time first; lines from standard
/// error are marked. Without a stage it follows every stage until the deployment ends.
#[test]
fn logs_follow_a_stage_until_it_ends_with_times_and_stderr_marked() {
    let (repo, _state, g, _) = deployed_web(SCRIPT);
    let stages = "      - name: SCRIPT_RUN\n        with: {run: 'for i in 1 2 3; do echo out-$i; echo err-$i >&2; sleep 1; done'}\n      - name: WAIT\n        with: {duration: 5s}\n";
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "logs",
    );
    assert_eq!(g.push(&head, "logs-follow").0, 202);
    let id = g.deployment_of(&head, LIMIT);
    let follower = g.cli_spawn(&[
        "deployments",
        "logs",
        &id,
        "stage-0",
        "-f",
        "--timestamps",
        "--timeout",
        "30s",
    ]);
    let run = support::finish(follower, LIMIT);
    assert_eq!(run.code, 0, "{run:?}");
    // It ended with the stage, while the deployment goes on (WAIT 5s).
    let d = g.deployment(&id);
    assert_eq!(support::stage_of(&d, "stage-0")["status"], "SUCCESS", "{d}");
    assert_eq!(d["status"], "RUNNING", "{d}");
    assert!(
        run.stderr
            .contains(&format!("stage stage-0 of deployment {id} ended SUCCESS")),
        "{run:?}"
    );

    let mut lines = run.stdout.lines();
    assert_eq!(lines.next(), Some("== stage-0 (SCRIPT_RUN)"), "{run:?}");
    let stage = support::stage_of(&d, "stage-0");
    let (from, to) = (
        stage["started_at"].as_str().expect("started"),
        stage["completed_at"].as_str().expect("completed"),
    );
    let (from, to) = (
        humantime::parse_rfc3339(from).expect("rfc 3339"),
        humantime::parse_rfc3339(to).expect("rfc 3339"),
    );
    let mut texts = Vec::new();
    let mut last = from;
    for line in lines {
        let (at, text) = line.split_once(' ').expect("a time, then the text");
        let at = humantime::parse_rfc3339(at).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(
            last <= at && at <= to,
            "{line}: out of order or outside the stage"
        );
        last = at;
        texts.push(text);
    }
    // Each stream in order (the two pipes are read apart, so they may interleave).
    let out: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| t.starts_with("out-"))
        .collect();
    let err: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| t.trim_start_matches("stderr| ").starts_with("err-"))
        .collect();
    assert_eq!(out, ["out-1", "out-2", "out-3"], "{run:?}");
    assert_eq!(
        err,
        ["stderr| err-1", "stderr| err-2", "stderr| err-3"],
        "{run:?}"
    );

    // A stage still running when --timeout passes: 5.
    let run = g.cli_env(
        &[
            "deployments",
            "logs",
            &id,
            "stage-1",
            "-f",
            "--timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "gave up after 1.0s: stage stage-1 of deployment {id} is still RUNNING"
        )),
        "{run:?}"
    );

    // Every stage, until the deployment ends; then the same lines without -f.
    let run = g.cli_env(&["deployments", "logs", &id, "-f", "--timeout", "30s"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(g.deployment(&id)["status"], "SUCCESS");
    assert!(
        run.stderr
            .contains(&format!("deployment {id} ended SUCCESS")),
        "{run:?}"
    );
    line_with(&run.stdout, &["== stage-0 (SCRIPT_RUN)"]);
    line_with(&run.stdout, &["== stage-1 (WAIT)"]);
    let followed: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.starts_with("=="))
        .collect();
    let printed = ok(&g, &["deployments", "logs", &id]);
    let once: Vec<&str> = printed.lines().filter(|l| !l.starts_with("==")).collect();
    assert_eq!(followed, once);
    line_with(&printed, &["== stage-0 (SCRIPT_RUN) SUCCESS"]);
    line_with(&printed, &["stderr| err-2"]);
}

/// `apps list --watch` prints the list, then again only when it changes (read every 2 s),
/// until --timeout.
#[test]
fn apps_list_watch_prints_again_only_what_changed() {
    let (_repo, _state, g, _) = deployed_web(SCRIPT);
    let watcher = g.cli_spawn(&["apps", "list", "--watch", "--timeout", "7s"]);
    // Two reads of the same list first (0 s and 2 s), then a change.
    std::thread::sleep(Duration::from_secs(3));
    let run = g.cli_env(&["apps", "pause", "web", "--reason", "watched"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = support::finish(watcher, LIMIT);
    assert_eq!(run.code, 0, "{run:?}");
    let tables: Vec<&str> = run.stdout.split("\n\n").collect();
    assert_eq!(tables.len(), 2, "printed once per change: {run:?}");
    line_with(tables[0], &["NAME", "SYNC", "DEPLOYS"]);
    line_with(tables[0], &["web", "SYNCED", "auto"]);
    line_with(tables[1], &["NAME", "SYNC", "DEPLOYS"]);
    line_with(tables[1], &["web", "paused"]);
    let run = g.cli_env(&["apps", "list", "--timeout", "1s"], &[]);
    assert_eq!(run.code, 2, "--timeout needs --watch: {run:?}");
}

#[test]
fn commands_without_a_server_say_how_to_reach_one() {
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let run = run_gannet(&["apps", "list", "--server", &url], &[]);
    // 6: unreachable, told apart from a refused request (1).
    assert_eq!(run.code, 6, "{run:?}");
    assert!(run.stderr.contains("cannot reach gannet"), "{run:?}");
    let run = run_gannet(&["apps", "list", "--server", "ftp://127.0.0.1"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("use an http:// or https:// URL"),
        "{run:?}"
    );
}

#[test]
fn watch_follows_a_deployment_and_exits_by_its_outcome() {
    let (repo, _state, g, _) = deployed_web(SCRIPT);
    // (stages, expected status, expected exit code, a line the log stream must show)
    let cases = [
        (
            "      - name: WAIT\n        with: {duration: 1s}\n      - name: SCRIPT_RUN\n        with: {run: echo watched-ok}\n",
            "SUCCESS",
            0,
            "stage-1 | watched-ok",
        ),
        (
            "      - name: WAIT\n        with: {duration: 1s}\n      - name: SCRIPT_RUN\n        with: {run: 'echo watched-bad; exit 3'}\n",
            "FAILURE",
            3,
            "stage-1 | watched-bad",
        ),
    ];
    for (stages, status, code, log_line) in cases {
        let head = repo.commit(
            &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
            status,
        );
        assert_eq!(g.push(&head, &format!("watch-{status}")).0, 202);
        let id = g.deployment_of(&head, LIMIT);
        let run = g.cli_env(
            &["deployments", "watch", &id, "--logs", "--timeout", "20"],
            &[],
        );
        assert_eq!(run.code, code, "{status}: {run:?}");
        line_with(&run.stdout, &["deployment", &id, status]);
        line_with(&run.stdout, &["stage stage-1", "SCRIPT_RUN", status]);
        line_with(&run.stdout, &[log_line]);
        // Watching an ended deployment answers at once, the same way; with --json, stdout is
        // the JSON alone (so `| jq` works) and the progress goes to stderr.
        let again = g.cli_env(&["deployments", "watch", &id, "--logs", "--json"], &[]);
        assert_eq!(again.code, code, "{again:?}");
        let d: Value = serde_json::from_str(&again.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON alone ({e}): {}", again.stdout));
        check_deployment_json(&d, &id);
        assert_eq!(d["status"], status, "{d}");
        line_with(&again.stderr, &["deployment", &id, status]);
    }

    // A watch that runs out of time says so and exits 5 (the deployment goes on).
    let head = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config("web", "      - name: WAIT\n        with: {duration: 30s}\n"),
        )],
        "slow",
    );
    assert_eq!(g.push(&head, "watch-slow").0, 202);
    let id = g.deployment_of(&head, LIMIT);
    let run = g.cli_env(&["deployments", "watch", &id, "--timeout", "1"], &[]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "gave up after 1.0s: deployment {id} is still RUNNING"
        )),
        "{run:?}"
    );
}

/// Every `*.pipecd.yaml` under `dir`.
fn app_configs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.to_string_lossy().ends_with(".pipecd.yaml") {
                out.push(p);
            }
        }
    }
    out
}

/// Splits a `file:line: field: message` line; None when it has another shape.
fn located(line: &str) -> Option<(&str, u32, &str, &str)> {
    let (file, rest) = line.split_once(".pipecd.yaml:")?;
    let (number, rest) = rest.split_once(": ")?;
    let (field, message) = rest.split_once(": ")?;
    let ok = !field.is_empty() && !field.contains(' ') && !message.is_empty();
    ok.then_some((file, number.parse().ok()?, field, message))
}

#[test]
fn config_check_accepts_every_pipecd_example_but_those_pipecd_could_not_deploy_either() {
    // Skipped on a fresh clone without the corpus; `make test` says so in one line.
    let Some(dir) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let configs = app_configs(&dir);
    assert!(configs.len() > 10, "no examples under {}", dir.display());
    let dir_arg = dir.to_string_lossy().into_owned();

    let run = run_gannet(&["config", "check", &dir_arg], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    let summary = lines.pop().expect("a summary line");
    assert!(
        summary.starts_with(&format!("{} app configs checked: ", configs.len())),
        "{summary}"
    );
    assert!(
        summary.contains(", 0 features not supported yet)"),
        "{summary}"
    );
    assert!(!lines.is_empty(), "no problems printed");
    // Warnings are printed too (a pipeline under spec.plugins), marked as such.
    let warnings = lines.iter().filter(|l| l.contains(": warning: ")).count();
    for line in &lines {
        assert!(
            located(line).is_some(),
            "not file:line: field: message: {line}"
        );
    }

    let run = run_gannet(&["config", "check", "--json", &dir_arg], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).expect("json");
    let apps = report["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), configs.len());
    let mut errors = 0;
    for app in apps {
        has_strings(app, &["path", "kind"]);
        let list = app["errors"].as_array().expect("errors");
        assert_eq!(app["ok"], list.is_empty(), "{app}");
        for e in list {
            errors += 1;
            has_strings(e, &["field", "message"]);
            // Every PipeCD feature the examples use is supported: only an example PipeCD
            // could not deploy either is refused.
            assert!(broken_example(app, e), "an example is not accepted: {app}");
        }
    }
    let warned: usize = apps
        .iter()
        .map(|a| a["warnings"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(
        (errors, warned),
        (lines.len() - warnings, warnings),
        "the human and JSON reports differ"
    );
    assert!(apps.iter().any(|a| a["ok"] == false));
}

/// Examples that PipeCD could not deploy either: `ecs-simple` keeps its manifests only under
/// `running/` and `target/`, so the files its config names do not exist; the SMI ones
/// (`mesh-smi-*`) are a config alone, with no manifests; `ecs/attachment`'s container
/// `command` is a string where a task definition takes a list.
fn broken_example(app: &Value, error: &Value) -> bool {
    let path = app["path"].as_str().unwrap_or_default();
    let message = error["message"].as_str().unwrap_or_default();
    (path.contains("ecs-simple") && message.contains("does not exist in the app directory"))
        || (path.contains("/mesh-smi-")
            && message.starts_with("the app has no Kubernetes manifests"))
        || (path.contains("/ecs/attachment/")
            && message
                .starts_with("taskdef.yaml:4: containerDefinitions[0].command: expected a list"))
}

/// A written app config in its own directory under `root`.
fn write_app(root: &Path, name: &str, text: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("app.pipecd.yaml");
    std::fs::write(&file, text).expect("write");
    file
}

/// Runs `config check` on one config; returns the run and its one located problem.
fn check(text: &str) -> (CliRun, (u32, String, String)) {
    let root = tempfile::tempdir().expect("tempdir");
    let file = write_app(root.path(), "app", text);
    let file = file.to_string_lossy().into_owned();
    let run = run_gannet(&["config", "check", &file], &[]);
    let problem = run
        .stdout
        .lines()
        .find_map(located)
        .map(|(f, line, field, message)| {
            assert_eq!(format!("{f}.pipecd.yaml"), file, "{}", run.stdout);
            (line, field.to_owned(), message.to_owned())
        })
        .unwrap_or_else(|| panic!("no located problem in {run:?}"));
    (run, problem)
}

const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: x\n";

/// `config check` reads what a deployment would: a Kubernetes app that lists no manifests
/// deploys every YAML file in its directory, so each of those is checked too (a bomb, a
/// manifest without a name), not only the files the config names.
#[test]
fn config_check_checks_the_manifests_a_kubernetes_app_finds_by_default() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers: [{name: web, image: web:1}]\n";
    let cases = [
        ("valid.yaml", deployment.to_owned(), None),
        (
            "nameless.yaml",
            deployment.replace("  name: web\n", "  labels: {app: web}\n"),
            Some("metadata.name"),
        ),
        (
            "bomb.yaml",
            gannet_config::fixture::yaml_bomb(12),
            Some("bomb.yaml"),
        ),
    ];
    for (name, manifest, fault) in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let file = write_app(
            root.path(),
            "web",
            "apiVersion: pipecd.dev/v1beta1\nkind: KubernetesApp\nspec:\n  name: web\n",
        );
        let dir = file.parent().expect("app dir");
        std::fs::write(dir.join(name), manifest).expect("write manifest");
        let run = run_gannet(&["config", "check", &file.to_string_lossy()], &[]);
        match fault {
            None => assert_eq!(run.code, 0, "{name}: {run:?}"),
            Some(fault) => {
                assert_eq!(run.code, 1, "{name} is checked: {run:?}");
                assert!(
                    run.stdout.contains(name) && run.stdout.contains(fault),
                    "{name}: names the file and {fault}: {run:?}"
                );
            }
        }
    }
}

#[test]
fn config_check_passes_a_valid_app_and_locates_each_mistake() {
    let root = tempfile::tempdir().expect("tempdir");
    write_app(
        root.path(),
        "good",
        &app_config(
            "good",
            "      - name: WAIT\n        with: {duration: 1s}\n      - name: SCRIPT_RUN\n        with: {run: make deploy, onRollback: make rollback}\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice]}\n",
        ),
    );
    let dir = root.path().to_string_lossy().into_owned();
    let run = run_gannet(&["config", "check", &dir], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with("1 app configs checked: 1 ok"),
        "{run:?}"
    );
    let run = run_gannet(&["config", "check", "--json", &dir], &[]);
    let report: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(report["apps"][0]["ok"], true, "{report}");
    assert_eq!(report["apps"][0]["errors"], Value::Array(Vec::new()));

    // (config, line, field, a fragment of the message)
    let cases = [
        (
            format!("{HEAD}  timeout: nope\n"),
            5,
            "spec.timeout",
            "invalid duration",
        ),
        (
            format!("{HEAD}  pipeline:\n    stages:\n      - name: WAIT\n        with: {{duration: banana}}\n"),
            8,
            "spec.pipeline.stages[0].with.duration",
            "banana",
        ),
        (
            format!("{HEAD}  pipeline:\n    stages:\n      - name: WIAT\n"),
            7,
            "spec.pipeline.stages[0].name",
            "unknown stage",
        ),
        (
            format!("{HEAD}  pipeline:\n    stages:\n      - name: SCRIPT_RUN\n        with: {{}}\n"),
            8,
            "spec.pipeline.stages[0].with.run",
            "required",
        ),
        (
            format!("{HEAD}  trigger:\n    onCommit:\n      paths: 3\n"),
            7,
            "spec.trigger.onCommit.paths",
            "expected a sequence",
        ),
        (
            "apiVersion: pipecd.dev/v1beta1\nkind: Nope\nspec:\n  name: x\n".to_owned(),
            2,
            "kind",
            "not an application kind",
        ),
        // An unclosed flow sequence: the line of its bracket (libyaml named the end, line 6).
        (
            format!("{HEAD}  pipeline: [\n"),
            5,
            "(syntax)",
            "unclosed bracket '['",
        ),
    ];
    for (text, line, field, fragment) in cases {
        let (run, (got_line, got_field, message)) = check(&text);
        assert_eq!(run.code, 1, "{run:?}");
        assert_eq!(
            (got_line, got_field.as_str()),
            (line, field),
            "{}",
            run.stdout
        );
        assert!(message.contains(fragment), "{message}");
        assert!(
            run.stdout
                .contains("1 app configs checked: 0 ok, 1 with problems (1 errors"),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn who_you_are_is_your_token_and_a_missing_one_is_named() {
    let (_repo, _state, g, id) = deployed_web(SCRIPT);
    let home = tempfile::tempdir().expect("tempdir");
    // As in a container or CI: no $USER, no token, no ~/.config/gannet/token.
    let bare = |args: &[&str], env: &[(&str, &str)]| {
        let out = std::process::Command::new(support::gannet_bin())
            .args(args)
            .env_remove("USER")
            .env_remove("GANNET_USER")
            .env_remove("GANNET_TOKEN")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", home.path())
            .env("GANNET_SERVER", &g.url)
            .envs(env.iter().copied())
            .output()
            .expect("gannet runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in [
        vec!["approve", id.as_str()],
        vec!["cancel", id.as_str()],
        vec!["sync", "web"],
    ] {
        let (code, stderr) = bare(&args, &[]);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("GANNET_TOKEN") && stderr.contains("HTTP 401"),
            "{args:?}: the refusal says how to say who you are: {stderr}"
        );
        // A claim that is not the token's name is refused, on every such command.
        let (code, stderr) = bare(
            &args,
            &[
                ("GANNET_TOKEN", support::ADMIN_TOKEN),
                ("GANNET_USER", "bob"),
            ],
        );
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("you are admin") && stderr.contains("cannot act as \"bob\""),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_log_written_to_a_file_has_no_colour_codes() {
    // The server's stderr is a file here (tests/support), as under systemd or `> gannet.log`.
    let (_repo, _state, g, _) = deployed_web(SCRIPT);
    let log = g.log();
    assert!(log.contains("deployment finished"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape codes in the log file:\n{log}"
    );
}

/// A commit on its own branch, made from `main`'s head, writing `files`; `main` stays checked
/// out. Returns its sha.
fn on_branch(repo: &support::Repo, branch: &str, files: &[(&str, &str)]) -> String {
    support::git(repo.path(), &["checkout", "-q", "-b", branch, "main"]);
    let sha = repo.commit(files, &format!("on {branch}"));
    support::git(repo.path(), &["checkout", "-q", "main"]);
    sha
}

#[test]
fn plan_preview_asks_waits_and_exits_by_what_merging_would_change() {
    let (repo, _state, g, _) = deployed_web(SCRIPT);
    let docs = on_branch(&repo, "docs", &[("README.md", "only words\n")]);
    let web = on_branch(
        &repo,
        "web",
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config("web", &SCRIPT.replace("hello-from", "changed-from")),
        )],
    );
    let wait = |head: &str, extra: &[&str]| {
        let mut args = vec!["plan-preview", "--head", head, "--wait", "--timeout", "30s"];
        args.extend_from_slice(extra);
        g.cli_env(&args, &[])
    };

    // Nothing an app reads changes: 0, and the JSON says so.
    let run = wait(&docs, &["-o", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let p: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        (p["status"].as_str(), p["result"].as_str()),
        (Some("DONE"), Some("NO_CHANGES")),
        "{p}"
    );
    assert_eq!(p["apps"], serde_json::json!([]), "{p}");

    // web's config changes: 1; the table names it, each app's details follow, and --out
    // holds the JSON.
    let out = tempfile::tempdir().expect("tempdir");
    let file = out.path().join("preview.json");
    let run = wait(&web, &["--out", file.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1, "{run:?}");
    let row = line_with(&run.stdout, &["web", "CHANGES"]);
    assert!(row.contains("1 files of the app change"), "{row}");
    assert!(run.stdout.contains("== web"), "{}", run.stdout);
    assert!(
        run.stdout.contains("changed-from-cli-test"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("ended DONE: merging changes 1 of 1 apps"),
        "{run:?}"
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("--out")).expect("JSON");
    assert_eq!(saved["result"], "CHANGES", "{saved}");
    assert_eq!(saved["head"], web.as_str(), "{saved}");

    // A commit gannet cannot fetch: the preview FAILS, 2.
    let run = wait(&"e".repeat(40), &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("ended FAILED"), "{run:?}");

    // Another base is refused before anything is queued: 1, or 2 with --wait.
    let run = g.cli_env(&["plan-preview", "--head", &web, "--base", "develop"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("watches branch main"), "{run:?}");
    let run = wait(&web, &["--base", "develop"]);
    assert_eq!(run.code, 2, "{run:?}");
    // A viewer may not ask for one.
    let run = g.cli_env(
        &["plan-preview", "--head", &docs, "--wait"],
        &[("GANNET_TOKEN", support::token_of("vic"))],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("needs the role deployer or admin"),
        "{run:?}"
    );

    // Without --wait: the id alone on stdout, the same for the same head; show and list
    // read it.
    let id = ok(&g, &["plan-preview", "--head", &web, "--base", "main"]);
    let id = id.trim();
    assert_eq!(
        id,
        saved["id"].as_str().expect("an id"),
        "the same head, the same preview"
    );
    let shown = ok(&g, &["plan-preview", "show", id]);
    assert!(shown.contains(&format!("Plan preview: {id}")), "{shown}");
    assert!(line_with(&shown, &["web", "CHANGES"]).contains("web"));
    let listed = ok(&g, &["plan-preview", "list", "--repo", "shop"]);
    assert_eq!(
        listed.lines().count(),
        4,
        "a header and three previews:\n{listed}"
    );
    line_with(&listed, &[id, "DONE", "CHANGES"]);
    let names = ok(&g, &["plan-preview", "list", "-o", "name"]);
    assert!(names.lines().any(|l| l == id), "{names}");
}
