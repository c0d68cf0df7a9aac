//! End to end: the API's commands (approve, cancel, sync), stage and deployment timeouts,
//! invalid configs and CloudEvents notifications, against a real `gannet up` over HTTP.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::receiver::Receiver;
use support::{app_config, stage_named, token_of, Gannet, Repo, UpOptions};

const LIMIT: Duration = Duration::from_secs(20);

/// A pipeline that succeeds at once.
const QUICK: &str = "      - name: WAIT\n        with: {duration: 0s}\n";

/// A repository holding `apps/<name>/app.pipecd.yaml` for each (name, config), and a
/// `gannet up` on it with `opts`. The poll at start deploys every app once; this waits until
/// those first deployments have ended and every queue is empty.
fn setup(apps: &[(&str, String)], opts: &UpOptions) -> (Repo, tempfile::TempDir, Gannet) {
    let repo = Repo::new();
    let files: Vec<(String, &str)> = apps
        .iter()
        .map(|(name, cfg)| (format!("apps/{name}/app.pipecd.yaml"), cfg.as_str()))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let head = repo.commit(&files, "add apps");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), opts);
    g.wait_until(LIMIT, "the first deployments end", || {
        let ds = g.deployments();
        (ds.len() == apps.len()
            && ds.iter().all(|d| {
                d["commit"] == head.as_str()
                    && matches!(d["status"].as_str(), Some("SUCCESS" | "FAILURE"))
            }))
        .then_some(())
    });
    g.wait_idle(LIMIT);
    (repo, state, g)
}

/// Commits a change to app `name` and pushes it; returns the new deployment's id.
fn change_and_push(repo: &Repo, g: &Gannet, name: &str, config: &str) -> String {
    let head = repo.commit(
        &[(&format!("apps/{name}/app.pipecd.yaml"), config)],
        &format!("change {name}"),
    );
    let (status, body) = g.push(&head, &format!("delivery-{head}"));
    assert_eq!(status, 202, "{body}");
    g.deployment_of(&head, LIMIT)
}

/// The lines a test script appended to `path` (none when it does not exist).
fn lines_of(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The first line of an error the CLI printed, for messages.
fn stderr_of(run: &support::CliRun) -> &str {
    run.stderr.lines().next().unwrap_or_default()
}

const APPROVAL: &str =
    "      - name: WAIT_APPROVAL\n        with: {approvers: [alice, bob], minApproverNum: 1}\n";

#[test]
fn only_a_listed_approver_can_approve_and_the_approval_is_recorded() {
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &app_config("web", APPROVAL));
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);

    let approve = format!("/deployments/{id}/approve");
    let (status, body) = g.post_as(token_of("mallory"), &approve, json!({}));
    assert_eq!(status, 403, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("mallory") && !error.contains("alice") && !error.contains("bob"),
        "the refusal names the caller, not the approvers: {error}"
    );
    let run = g.cli_env(&["approve", &id], &[("GANNET_TOKEN", token_of("mallory"))]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(stderr_of(&run).contains("HTTP 403"), "{run:?}");
    // The approver is the token's name: a body naming someone else is refused.
    let (status, body) = g.post_as(token_of("mallory"), &approve, json!({"user": "alice"}));
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot act as"),
        "{body}"
    );
    // A deployer may not approve at all.
    let (status, body) = g.post_as(token_of("dora"), &approve, json!({}));
    assert_eq!(status, 403, "{body}");
    std::thread::sleep(Duration::from_millis(300));
    let d = g.deployment(&id);
    let stage = stage_named(&d, "WAIT_APPROVAL");
    assert_eq!(
        (d["status"].as_str(), stage["status"].as_str()),
        (Some("RUNNING"), Some("RUNNING")),
        "{d}"
    );
    assert!(stage["metadata"].get("approvedBy").is_none(), "{d}");

    let run = g.cli_env(&["approve", &id], &[("GANNET_TOKEN", token_of("alice"))]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("approved deployment {id} as alice")),
        "{run:?}"
    );
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let stage = stage_named(&d, "WAIT_APPROVAL");
    assert_eq!(stage["status"], "SUCCESS", "{d}");
    assert_eq!(stage["metadata"]["approvedBy"], "alice", "{d}");

    // Nothing is waiting any more: a conflict with the deployment's state, not a missing one.
    let (status, body) = g.post_as(token_of("bob"), &approve, json!({}));
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("is not waiting for approval"),
        "{body}"
    );
}

/// A SCRIPT_RUN with a rollback, then a long WAIT to cancel during.
fn cancellable(marker: &std::path::Path) -> String {
    app_config(
        "web",
        &format!(
            "      - name: SCRIPT_RUN\n        with:\n          run: echo deploying\n          onRollback: echo rolled-back >> {}\n      - name: WAIT\n        with: {{duration: 30s}}\n",
            marker.display()
        ),
    )
}

#[test]
fn cancel_with_rollback_runs_the_rollback_and_names_who_cancelled() {
    let marker = tempfile::tempdir().expect("tempdir");
    let marker = marker.path().join("rollback");
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &cancellable(&marker));
    g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);

    let started = Instant::now();
    let run = g.cli_env(&["cancel", &id], &[("GANNET_TOKEN", token_of("dora"))]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("with rollback"), "{run:?}");
    let d = g.wait_terminal(&id, Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the WAIT did not hold the cancel"
    );
    assert_eq!(d["status"], "CANCELLED", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("dora"),
        "{d}"
    );
    let rollback = stage_named(&d, "SCRIPT_RUN_ROLLBACK");
    assert_eq!(rollback["status"], "SUCCESS", "{d}");
    assert_eq!(lines_of(&marker), vec!["rolled-back".to_owned()]);

    // A finished deployment cannot be cancelled.
    let (status, body) = g.post(&format!("/deployments/{id}/cancel"), json!({}));
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("already ended"),
        "{body}"
    );
    let run = g.cli_env(&["cancel", &id], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(stderr_of(&run).contains("HTTP 409"), "{run:?}");
}

/// A script that starts a background `sleep`, records both pids in `pids`, and waits.
fn holding_script(pids: &std::path::Path, stage_timeout: Option<&str>) -> String {
    let timeout = stage_timeout.map_or(String::new(), |t| format!("        timeout: {t}\n"));
    app_config(
        "web",
        &format!(
            "      - name: SCRIPT_RUN\n{timeout}        with:\n          run: |\n            sleep 60 &\n            echo $! >> {p}\n            echo $$ >> {p}\n            wait\n",
            p = pids.display()
        ),
    )
}

/// Waits until every pid in `pids` is gone (bounded), naming the first that stays.
fn assert_all_gone(pids: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for pid in pids {
        let stat = format!("/proc/{pid}/stat");
        let alive = || {
            std::fs::read_to_string(&stat)
                .map(|s| !s.contains(") Z") && !s.contains(") X"))
                .unwrap_or(false)
        };
        while alive() {
            assert!(
                Instant::now() < deadline,
                "process {pid} outlived its stage"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn cancel_mid_script_kills_the_script_and_what_it_started() {
    let work = tempfile::tempdir().expect("tempdir");
    let pids = work.path().join("pids");
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &holding_script(&pids, None));
    g.wait_until(LIMIT, "the script and its child run", || {
        (lines_of(&pids).len() == 2).then_some(())
    });
    let run = g.cli_env(
        &["cancel", &id, "--no-rollback"],
        &[("GANNET_TOKEN", token_of("dora"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "CANCELLED", "{d}");
    assert_all_gone(&lines_of(&pids));
}

#[test]
fn a_stage_timeout_kills_the_script_and_what_it_started() {
    let work = tempfile::tempdir().expect("tempdir");
    let pids = work.path().join("pids");
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &holding_script(&pids, Some("2s")));
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("timed out after 2s")),
        "{d}"
    );
    assert_eq!(lines_of(&pids).len(), 2, "the script had started");
    assert_all_gone(&lines_of(&pids));
}

#[test]
fn cancel_without_rollback_ends_at_once_and_leaves_rollback_unstarted() {
    let marker = tempfile::tempdir().expect("tempdir");
    let marker = marker.path().join("rollback");
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &cancellable(&marker));
    g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);

    let run = g.cli_env(
        &["cancel", &id, "--no-rollback"],
        &[("GANNET_TOKEN", token_of("dora"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("without rollback"), "{run:?}");
    let d = g.wait_terminal(&id, Duration::from_secs(3));
    assert_eq!(d["status"], "CANCELLED", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("dora"),
        "{d}"
    );
    assert_eq!(
        stage_named(&d, "SCRIPT_RUN_ROLLBACK")["status"],
        "NOT_STARTED_YET",
        "{d}"
    );
    assert_eq!(stage_named(&d, "SCRIPT_RUN")["status"], "SUCCESS", "{d}");
    assert_ne!(stage_named(&d, "WAIT")["status"], "SUCCESS", "{d}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(lines_of(&marker).is_empty(), "no rollback ran");

    // The lock is free again: the next push deploys.
    let next = change_and_push(
        &repo,
        &g,
        "web",
        &app_config("web", "      - name: WAIT\n        with: {duration: 1ms}\n"),
    );
    assert_eq!(g.wait_terminal(&next, LIMIT)["status"], "SUCCESS");
}

#[test]
fn sync_starts_on_command_deployments_and_says_why_it_cannot() {
    let bare =
        "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: bare\n".to_owned();
    let locked = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: locked\n  trigger:\n    onCommand:\n      disabled: true\n  pipeline:\n    stages:\n{QUICK}"
    );
    let (repo, _state, g) = setup(
        &[("web", app_config("web", QUICK)), ("locked", locked)],
        &UpOptions::default(),
    );

    let run = g.cli_env(
        &["sync", "web", "--json"],
        &[("GANNET_TOKEN", token_of("dora"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let d: Value = serde_json::from_str(&run.stdout).expect("sync --json prints the deployment");
    assert_eq!(
        (d["trigger"].as_str(), d["commander"].as_str()),
        (Some("ON_COMMAND"), Some("dora")),
        "{d}"
    );
    let id = d["id"].as_str().expect("id");
    assert_eq!(g.wait_terminal(id, LIMIT)["status"], "SUCCESS");
    let human = g.cli_env(&["sync", "web"], &[]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.starts_with("deployment d-") && human.stdout.contains(" of web at "),
        "{human:?}"
    );

    // An app with neither a platform nor a pipeline has nothing to deploy: it is listed as
    // INVALID_CONFIG, and a sync, even one forcing a pipeline, is refused with the reason.
    let head = repo.commit(&[("apps/bare/app.pipecd.yaml", &bare)], "add bare");
    assert_eq!(g.push(&head, "bare-1").0, 202);
    g.wait_until(LIMIT, "bare is INVALID_CONFIG", || {
        let app = g.get("/apps/bare").1["app"].clone();
        (app["sync_status"] == "INVALID_CONFIG").then_some(())
    });
    let run = g.cli_env(&["sync", "bare", "--strategy", "pipeline"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(stderr_of(&run).contains("nothing to deploy"), "{run:?}");
    assert!(
        g.deployments().iter().all(|d| d["app"] != "bare"),
        "an app with nothing to deploy was deployed"
    );

    let (status, body) = g.post("/apps/locked/sync", json!({}));
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("onCommand.disabled"),
        "{body}"
    );
    let run = g.cli_env(&["sync", "locked"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(stderr_of(&run).contains("HTTP 403"), "{run:?}");

    let (status, body) = g.post("/apps/nosuch/sync", json!({}));
    assert_eq!(status, 404, "{body}");
}

/// The status at a glance, in the API and the CLI: an app of scripts only has no live state
/// (said so, never "the live state matches Git"), its last deployment's result is shown
/// (FAILURE, not a grey unknown), and an app a rollback holds reads "pinned at" its commit.
#[test]
fn an_apps_health_last_result_and_pin_are_shown_as_they_are() {
    let opts = UpOptions {
        extra_config: "intervals: {poll: 1m, resume: 1s, drift: 1s}\nqueue: {visibility: 3s}\n"
            .into(),
        ..UpOptions::default()
    };
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &opts);
    let first = g.deployments()[0]["commit"]
        .as_str()
        .expect("commit")
        .to_owned();
    g.wait_until(
        LIMIT,
        "the trigger records that web has no live state",
        || {
            let app = g.app_view("web");
            app["no_live_state"].as_str().map(str::to_owned)
        },
    );
    let second = change_and_push(
        &repo,
        &g,
        "web",
        &app_config("web", &QUICK.replace("0s", "1ms")),
    );
    assert_eq!(g.wait_terminal(&second, LIMIT)["status"], "SUCCESS");
    let bad = "      - name: SCRIPT_RUN\n        with: {run: 'exit 3'}\n";
    let third = change_and_push(&repo, &g, "web", &app_config("web", bad));
    assert_eq!(g.wait_terminal(&third, LIMIT)["status"], "FAILURE");
    g.wait_unlocked("web", LIMIT);
    let app = g.app_view("web");
    assert_eq!(app["last_result"]["status"], "FAILURE", "{app}");
    assert_eq!(app["last_result"]["deployment"], third.as_str(), "{app}");
    assert_eq!(app["health"], "UNKNOWN", "{app}");
    let list = g.cli_env(&["apps", "list"], &[]);
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with("web "))
        .unwrap_or_else(|| panic!("{list:?}"));
    assert!(
        row.contains("no live state") && row.contains("FAILURE"),
        "{row}"
    );
    let show = g.cli_env(&["apps", "show", "web"], &[]);
    assert!(
        show.stdout.contains("health:   no live state ("),
        "{show:?}"
    );
    assert!(
        show.stdout.contains(&format!("last:     {third} FAILURE")),
        "{show:?}"
    );

    // A rollback holds web at the first commit: pinned.
    let run = g.cli_env(&["rollback", "web", "--wait", "--timeout", "20s"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    g.wait_unlocked("web", LIMIT);
    let list = g.cli_env(&["apps", "list"], &[]);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with("web ") && l.contains(&format!("pinned at {}", &first[..7]))),
        "{list:?}"
    );
    assert_eq!(g.app_view("web")["last_result"]["status"], "SUCCESS");
    // The branch has moved on two commits from what runs.
    assert_eq!(g.app_view("web")["ahead"], 2, "{}", g.app_view("web"));
    // The same in the console, in Chromium.
    let run = support::console_scenario(
        &g,
        "app-status",
        support::ADMIN_TOKEN,
        "web",
        "",
        &json!({"health": "NO_LIVE_STATE", "last": "SUCCESS", "pinned": first}),
    );
    assert_eq!(run.code, 0, "{run:?}");
}

/// A deployment says who pushed its commit, the commit's author and link, and each stage's
/// key option; the deployments list pages newest first by a cursor, each deployment once.
#[test]
fn a_deployment_names_its_pusher_and_stage_options_and_the_list_pages_by_cursor() {
    let stages = "      - name: WAIT\n        with: {duration: 0s}\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice, bob], minApproverNum: 2, timeout: 1s}\n";
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &app_config("web", stages));
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["pushed_by"], "e2e", "{d}");
    assert_eq!(
        d["commander"], "",
        "PipeCD's commander stays empty for a push: {d}"
    );
    assert!(
        d["commit_author"]
            .as_str()
            .is_some_and(|a| a.contains("e2e")),
        "{d}"
    );
    let commit = d["commit"].as_str().expect("commit");
    assert_eq!(
        d["commit_url"],
        format!("https://github.com/{}/commit/{commit}", support::GITHUB),
        "{d}"
    );
    let summaries: Vec<&str> = d["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter(|s| s["visible"] == true)
        .map(|s| s["presentation"]["summary"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(summaries, ["0s", "approvers: alice, bob (2 needed)"], "{d}");

    for i in 0..3 {
        let d = change_and_push(
            &repo,
            &g,
            "web",
            &app_config("web", &QUICK.replace("0s", &format!("{i}ms"))),
        );
        g.wait_terminal(&d, LIMIT);
    }
    let all: Vec<String> = g
        .deployments()
        .iter()
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(all.len(), 5, "{all:?}");
    let mut paged = Vec::new();
    let mut before: Option<String> = None;
    for _ in 0..5 {
        let path = match &before {
            Some(b) => format!("/deployments?limit=2&before={b}"),
            None => "/deployments?limit=2".to_owned(),
        };
        let (status, page) = g.get(&path);
        assert_eq!(status, 200, "{page}");
        let ids: Vec<String> = page["deployments"]
            .as_array()
            .expect("deployments")
            .iter()
            .map(|d| d["id"].as_str().expect("id").to_owned())
            .collect();
        assert!(ids.len() <= 2, "{page}");
        paged.extend(ids);
        match page["next"].as_str() {
            Some(next) => before = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, all, "the pages, in order, are the whole list");
    let (status, body) = g.get("/deployments?before=d-nosuchthing");
    assert_eq!(status, 404, "{body}");
}

/// A script's stderr lines come out of the logs API flagged `stderr`, without the mark the job
/// runner keeps them with; its stdout lines are not flagged.
#[test]
fn a_scripts_stderr_lines_are_flagged_in_the_stage_log() {
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let stages = "      - name: SCRIPT_RUN\n        with: {run: 'echo to-out; echo to-err >&2'}\n";
    let id = change_and_push(&repo, &g, "web", &app_config("web", stages));
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let stage = stage_named(&d, "SCRIPT_RUN");
    let (status, body) = g.get(&format!(
        "/deployments/{id}/stages/{}/logs",
        stage["id"].as_str().expect("stage id")
    ));
    assert_eq!(status, 200, "{body}");
    let lines = body["lines"].as_array().expect("lines");
    let flagged = |text: &str| {
        lines
            .iter()
            .find(|l| l["text"] == text)
            .map(|l| l["stderr"] == true)
            .unwrap_or_else(|| panic!("no line {text:?} in {body}"))
    };
    assert!(flagged("to-err"), "{body}");
    assert!(!flagged("to-out"), "{body}");
    assert!(
        !body.to_string().contains("\\u001e"),
        "the mark never leaves: {body}"
    );
}

/// The ids the console and the CLI print (10 characters) work wherever an id does: in the API,
/// the CLI and for a command.
#[test]
fn a_short_id_works_wherever_an_id_does() {
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let id = change_and_push(&repo, &g, "web", &app_config("web", APPROVAL));
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);
    let short = &id[..10];
    let (status, body) = g.get(&format!("/deployments/{short}"));
    assert_eq!(
        (status, body["deployment"]["id"].as_str()),
        (200, Some(id.as_str())),
        "{body}"
    );
    let run = g.cli_env(&["deployments", "show", short, "--json"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&id), "{run:?}");
    let run = g.cli_env(&["approve", short], &[("GANNET_TOKEN", token_of("alice"))]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    let (status, body) = g.get(&format!("/deployments/{}", &id[..7]));
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("at least 8 characters"),
        "{body}"
    );

    // By app: the deployment under way, or a clear error when there is none.
    let run = g.cli_env(&["cancel", "--app", "web"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        stderr_of(&run).contains("application web has no deployment under way"),
        "{run:?}"
    );
    let run = g.cli_env(&["deployments", "watch", "--app", "web"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        stderr_of(&run).contains("application web has no deployment under way"),
        "{run:?}"
    );
    let next = change_and_push(
        &repo,
        &g,
        "web",
        &app_config("web", &APPROVAL.replace("alice, bob", "alice")),
    );
    g.wait_stage(&next, "WAIT_APPROVAL", "RUNNING", LIMIT);
    // Watching by app follows that deployment (it waits, so the watch times out).
    let run = g.cli_env(
        &["deployments", "watch", "--app", "web", "--timeout", "1s"],
        &[],
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains(&next), "{run:?}");
    let run = g.cli_env(
        &["approve", "--app", "web"],
        &[("GANNET_TOKEN", token_of("alice"))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(g.wait_terminal(&next, LIMIT)["status"], "SUCCESS");
}

/// A manual sync is its commit's deployment: a second sync while it runs answers with it,
/// `--force` makes a new one, and the trigger judging that commit afterwards (a push of it here;
/// the poll judges a head the same way) does not deploy it a third time as ON_COMMIT.
#[test]
fn a_synced_commit_is_deployed_once_and_not_again_by_the_poll() {
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    // A commit gannet has not judged yet (nobody pushed it): a sync deploys the branch head.
    let slow = app_config("web", "      - name: WAIT\n        with: {duration: 30s}\n");
    let head = repo.commit(&[("apps/web/app.pipecd.yaml", &slow)], "slow web");
    let sync = |extra: &[&str]| -> String {
        let args = [&["sync", "web", "--json"], extra].concat();
        let run = g.cli_env(&args, &[("GANNET_TOKEN", token_of("dora"))]);
        assert_eq!(run.code, 0, "{run:?}");
        let d: Value = serde_json::from_str(&run.stdout).expect("sync --json prints it");
        assert_eq!(d["commit"], head.as_str(), "{d}");
        d["id"].as_str().expect("id").to_owned()
    };
    let first = sync(&[]);
    g.wait_stage(&first, "WAIT", "RUNNING", LIMIT);
    assert_eq!(
        sync(&[]),
        first,
        "a second sync of a commit that is deploying answers with that deployment"
    );
    let forced = sync(&["--force"]);
    assert_ne!(forced, first, "--force starts a new deployment");
    // Each is one audit line naming the app by name and who asked; no event lines at INFO
    // without a receiver.
    let log = g.log();
    let audited: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sync requested") && l.contains("app=web") && l.contains("by=dora"))
        .collect();
    assert_eq!(audited.len(), 3, "{log}");
    assert!(
        !log.lines()
            .any(|l| l.contains(" INFO ") && l.contains("event=dev.gannet")),
        "{log}"
    );
    for id in [&first, &forced] {
        let run = g.cli_env(&["cancel", id, "--no-rollback"], &[]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(g.wait_terminal(id, LIMIT)["status"], "CANCELLED");
    }
    let (status, body) = g.push(&head, "delivery-after-the-sync");
    assert_eq!(status, 202, "{body}");
    // The cancelled WAITs' wake-ups stay queued; the push's trigger and any plan it sent do not.
    g.wait_until(LIMIT, "the push is judged", || {
        let judging: i64 = g
            .db()
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE queue IN ('trigger', 'plan')",
                [],
                |r| r.get(0),
            )
            .expect("count");
        (judging == 0).then_some(())
    });
    let mut of_head: Vec<String> = g
        .deployments()
        .into_iter()
        .filter(|d| d["commit"] == head.as_str())
        .filter_map(|d| d["id"].as_str().map(str::to_owned))
        .collect();
    of_head.sort();
    let mut synced = vec![first, forced];
    synced.sort();
    assert_eq!(
        of_head, synced,
        "the sync marked the commit checked for web, so the trigger did not deploy it again"
    );
}

#[test]
fn a_stage_timeout_kills_the_script_fails_the_stage_and_rolls_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (finished, rolled) = (dir.path().join("finished"), dir.path().join("rolled"));
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let stages = format!(
        "      - name: SCRIPT_RUN\n        timeout: 1s\n        with:\n          run: sleep 3 && touch {}\n          onRollback: echo rolled >> {}\n",
        finished.display(),
        rolled.display()
    );
    let started = Instant::now();
    let id = change_and_push(&repo, &g, "web", &app_config("web", &stages));
    let d = g.wait_terminal(&id, Duration::from_secs(10));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the timeout ended it in {took:?}"
    );
    assert_eq!(d["status"], "FAILURE", "{d}");
    let stage = stage_named(&d, "SCRIPT_RUN");
    assert_eq!(stage["status"], "FAILURE", "{d}");
    assert!(
        stage["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out"),
        "{d}"
    );
    assert!(
        d["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out"),
        "{d}"
    );
    assert_eq!(
        stage_named(&d, "SCRIPT_RUN_ROLLBACK")["status"],
        "SUCCESS",
        "{d}"
    );
    assert_eq!(lines_of(&rolled), vec!["rolled".to_owned()]);
    // The script was killed, not left to finish behind gannet's back.
    std::thread::sleep(
        Duration::from_secs(3).saturating_sub(started.elapsed()) + Duration::from_millis(700),
    );
    assert!(!finished.exists(), "the timed-out script kept running");
}

#[test]
fn the_deployment_timeout_fails_the_deployment() {
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &UpOptions::default());
    let cfg = "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  timeout: 2s\n  pipeline:\n    stages:\n      - name: WAIT\n        with: {duration: 10s}\n";
    let started = Instant::now();
    let id = change_and_push(&repo, &g, "web", cfg);
    let d = g.wait_terminal(&id, Duration::from_secs(8));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "ended after {took:?}");
    assert_eq!(d["status"], "FAILURE", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("deployment timed out"),
        "{d}"
    );
    assert_ne!(stage_named(&d, "WAIT")["status"], "SUCCESS", "{d}");
}

#[test]
fn an_app_whose_config_breaks_keeps_its_place_as_invalid_config() {
    let (repo, _state, g) = setup(
        &[
            ("web", app_config("web", QUICK)),
            ("api", app_config("api", QUICK)),
        ],
        &UpOptions::default(),
    );
    // (broken config, the fragments the reason must hold besides the file's path)
    let cases = [
        (
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  timeout: soon\n",
            [":5:", "spec.timeout", "soon"],
        ),
        (
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  pipeline: [\n",
            [":5:", "unclosed bracket", ""],
        ),
        // A stage option only its plugin can judge is caught as early: never deployed.
        (
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  pipeline:\n    stages:\n      - name: WAIT\n        with: {duration: banana}\n",
            [":8:", "spec.pipeline.stages[0].with.duration", "banana"],
        ),
    ];
    for (n, (cfg, fragments)) in cases.iter().enumerate() {
        let head = repo.commit(&[("apps/web/app.pipecd.yaml", cfg)], "break web");
        assert_eq!(g.push(&head, &format!("break-{n}")).0, 202);
        let app = g.wait_until(LIMIT, "web is INVALID_CONFIG", || {
            let run = g.cli_env(&["apps", "list", "--json"], &[]);
            assert_eq!(run.code, 0, "{run:?}");
            let list: Value = serde_json::from_str(&run.stdout).expect("json");
            let apps = list["apps"].as_array().cloned().unwrap_or_default();
            assert_eq!(apps.len(), 2, "both apps stay listed: {list}");
            apps.into_iter().find(|a| {
                a["path"] == "apps/web/app.pipecd.yaml" && a["sync_status"] == "INVALID_CONFIG"
            })
        });
        let reason = app["sync_reason"].as_str().unwrap_or_default();
        assert_eq!(app["name"], "web", "{app}");
        assert!(
            reason.contains("apps/web/app.pipecd.yaml")
                && fragments.iter().all(|f| reason.contains(f)),
            "case {n}: {reason} lacks one of {fragments:?}"
        );
        let (status, body) = g.post("/apps/web/sync", json!({}));
        assert_eq!(status, 409, "{body}");
        assert!(
            g.deployments().iter().all(|d| d["commit"] != head.as_str()),
            "a broken config deployed"
        );
        // Fixed again, it deploys and is SYNCED.
        let id = change_and_push(
            &repo,
            &g,
            "web",
            &app_config(
                "web",
                &format!("      - name: WAIT\n        with: {{duration: {n}ms}}\n"),
            ),
        );
        assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
        g.wait_until(LIMIT, "web is SYNCED", || {
            (g.get("/apps/web").1["app"]["sync_status"] == "SYNCED").then_some(())
        });
    }
}

#[test]
fn receivers_get_cloudevents_and_a_failed_delivery_is_retried() {
    let receiver = Receiver::start(1);
    let opts = UpOptions {
        extra_config: format!(
            "{}notifications:\n  receivers:\n    - name: t\n      webhook: {{url: \"{}\"}}\n",
            UpOptions::default().extra_config,
            receiver.url
        ),
        ..UpOptions::default()
    };
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &opts);
    let id = change_and_push(
        &repo,
        &g,
        "web",
        &app_config("web", "      - name: WAIT\n        with: {duration: 1ms}\n"),
    );
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    let kinds = [
        "dev.gannet.deployment.triggered",
        "dev.gannet.deployment.planned",
        "dev.gannet.deployment.started",
        "dev.gannet.deployment.succeeded",
    ];
    let events = g.wait_until(
        LIMIT,
        "the receiver has every event of the deployment",
        || {
            let mine: Vec<(String, Value)> = receiver
                .events()
                .into_iter()
                .filter(|(_, e)| e["data"]["deployment"] == id.as_str())
                .collect();
            kinds
                .iter()
                .all(|k| mine.iter().any(|(_, e)| e["type"] == *k))
                .then_some(mine)
        },
    );
    for (content_type, e) in &events {
        assert_eq!(content_type, "application/cloudevents+json", "{e}");
        assert_eq!(e["specversion"], "1.0", "{e}");
        assert_eq!(e["data"]["app_name"], "web", "{e}");
        assert!(
            e["data"]["app"]
                .as_str()
                .unwrap_or_default()
                .ends_with("apps/web/app.pipecd.yaml"),
            "{e}"
        );
        assert_eq!(e["subject"], id.as_str(), "{e}");
        assert!(!e["id"].as_str().unwrap_or_default().is_empty(), "{e}");
    }
    let succeeded = events
        .iter()
        .find(|(_, e)| e["type"] == "dev.gannet.deployment.succeeded")
        .map(|(_, e)| e)
        .expect("succeeded");
    assert_eq!(succeeded["data"]["status"], "SUCCESS", "{succeeded}");
    assert_eq!(
        succeeded["data"]["commit"],
        repo.head().as_str(),
        "{succeeded}"
    );
    // The event refused first was delivered again, and nothing was given up on.
    let refused = receiver.refused();
    assert_eq!(refused.len(), 1, "{refused:?}");
    g.wait_until(LIMIT, "the refused event arrives on a retry", || {
        receiver
            .events()
            .iter()
            .any(|(_, e)| e["id"] == refused[0].as_str())
            .then_some(())
    });
    g.wait_idle(LIMIT);
    assert_eq!(g.count("dead_letters"), 0);
}

/// The Slack receiver is a FAKE incoming webhook on loopback (Slack cannot run here): it keeps
/// what gannet posts, which is Slack's documented `{"text": …}` payload.
#[test]
fn a_slack_receiver_gets_one_readable_line_per_event_worth_it_with_the_configured_mentions() {
    let slack = Receiver::start(0);
    let webhook = Receiver::start(0);
    let opts = UpOptions {
        extra_config: format!(
            "{}notifications:\n  receivers:\n    - name: team\n      slack: {{urlEnv: GANNET_E2E_SLACK_URL}}\n    - name: audit\n      webhook: {{url: \"{}\"}}\n",
            UpOptions::default().extra_config,
            webhook.url
        ),
        env: vec![("GANNET_E2E_SLACK_URL".into(), format!("{}services/T0/B0/secret-path", slack.url))],
        ..UpOptions::default()
    };
    let (repo, _state, g) = setup(&[("web", app_config("web", QUICK))], &opts);
    let failing = format!(
        "{}  notification:\n    mentions:\n      - event: DEPLOYMENT_FAILED\n        slackusers: [U0ONCALL]\n        slackgroups: [S0SRE]\n      - event: \"*\"\n        slack: [U0OWNER]\n",
        app_config("web", "      - name: SCRIPT_RUN\n        with: {run: \"echo broken >&2; exit 3\"}\n")
    );
    let id = change_and_push(&repo, &g, "web", &failing);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "FAILURE");
    // The stage's and the deployment's failures are two events, delivered in either order.
    let texts = g.wait_until(LIMIT, "Slack has both failures", || {
        let texts: Vec<String> = slack
            .events()
            .iter()
            .filter_map(|(_, m)| m["text"].as_str().map(str::to_owned))
            .filter(|t| t.contains(&id))
            .collect();
        let both = [":x:", ":warning:"]
            .iter()
            .all(|icon| texts.iter().any(|t| t.starts_with(icon)));
        both.then_some(texts)
    });
    let failed = texts
        .iter()
        .find(|t| t.starts_with(":x:"))
        .expect("failure message");
    assert!(
        failed.starts_with(":x: *web* deployment failed: ") && failed.contains("exit"),
        "{failed}"
    );
    assert!(
        failed.ends_with("\n<@U0ONCALL> <!subteam^S0SRE> <@U0OWNER>"),
        "{failed}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with(":warning: *web* stage SCRIPT_RUN failed")),
        "{texts:#?}"
    );
    // Only the events worth a line: never a stage starting, nor the plan.
    assert!(
        texts
            .iter()
            .all(|t| !t.contains("planned") && !t.contains("started: ")),
        "{texts:#?}"
    );
    // The CloudEvents of the same deployment carry the stage's phase, name and result.
    let stage_failed = g.wait_until(LIMIT, "the audit receiver has the stage failure", || {
        webhook.events().into_iter().map(|(_, e)| e).find(|e| {
            e["type"] == "dev.gannet.stage.failed" && e["data"]["deployment"] == id.as_str()
        })
    });
    assert_eq!(
        stage_failed["data"]["stage_name"], "SCRIPT_RUN",
        "{stage_failed}"
    );
    assert_eq!(
        stage_failed["data"]["phase"], "deployment",
        "{stage_failed}"
    );
    assert_eq!(stage_failed["data"]["result"], "FAILURE", "{stage_failed}");
    // The Slack URL is a secret: never in gannet's log.
    assert!(
        !g.log().contains("secret-path"),
        "the Slack URL reached the log"
    );
}

/// Rollback, pause and diff refuse what they cannot do with a clear error and store nothing;
/// the same rollback key never starts two deployments, and pausing twice is one pause.
#[test]
fn rollback_pause_and_diff_refuse_bad_input_and_change_nothing() {
    let failing = "      - name: SCRIPT_RUN\n        with: {run: 'exit 1'}\n";
    let (repo, _state, g) = setup(
        &[
            ("web", app_config("web", QUICK)),
            ("api", app_config("api", failing)),
        ],
        &UpOptions::default(),
    );
    let first = g
        .deployments()
        .into_iter()
        .find(|d| d["app"] == "web")
        .expect("web's first deployment");
    let first_id = first["id"].as_str().expect("id").to_owned();
    let failed_id = g
        .deployments()
        .into_iter()
        .find(|d| d["app"] == "api")
        .and_then(|d| d["id"].as_str().map(str::to_owned))
        .expect("api's failed deployment");

    let refusals: Vec<(&str, String, Value, u16, &str)> = vec![
        // (what, path, body, status, words in the error)
        (
            "nothing to go back to",
            "/apps/web/rollback".into(),
            json!({}),
            409,
            "no earlier successful deployment",
        ),
        (
            "a failed deployment",
            "/apps/api/rollback".into(),
            json!({"to": failed_id}),
            409,
            "only a successful deployment",
        ),
        (
            "another app's deployment",
            "/apps/api/rollback".into(),
            json!({"to": first_id}),
            400,
            "is of application web",
        ),
        (
            "a malformed id",
            "/apps/web/rollback".into(),
            json!({"to": "nope"}),
            404,
            "no deployment nope",
        ),
        (
            "an unknown id",
            "/apps/web/rollback".into(),
            json!({"to": "d-00000000000000000000"}),
            404,
            "no deployment",
        ),
        (
            "an unknown field",
            "/apps/web/rollback".into(),
            json!({"too": first_id}),
            422,
            "unknown field",
        ),
        (
            "a long key",
            "/apps/web/rollback".into(),
            json!({"key": "k".repeat(300)}),
            400,
            "key: too long",
        ),
        (
            "an unknown app",
            "/apps/nosuch/rollback".into(),
            json!({}),
            404,
            "no application named nosuch",
        ),
        (
            "a long reason",
            "/apps/web/pause".into(),
            json!({"reason": "r".repeat(300)}),
            400,
            "reason: too long",
        ),
        (
            "an unknown app",
            "/apps/nosuch/pause".into(),
            json!({}),
            404,
            "no application named nosuch",
        ),
    ];
    for (what, path, body, status, words) in refusals {
        let before = g.stored();
        let (got, answer) = g.post(&path, body);
        assert_eq!(got, status, "{what}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(words), "{what}: {error}");
        assert_eq!(g.stored(), before, "{what} stored something");
    }
    let diffs = [
        ("/apps/web/diff?commit=abc", 400, "commit: invalid commit"),
        (
            "/apps/web/diff?commit=0000000000000000000000000000000000000000",
            404,
            "not found",
        ),
        ("/apps/nosuch/diff", 404, "no application named nosuch"),
    ];
    for (path, status, words) in diffs {
        let before = g.stored();
        let (got, answer) = g.get(path);
        assert_eq!(got, status, "{path}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(words), "{path}: {error}");
        assert_eq!(g.stored(), before, "GET {path} stored something");
    }
    // An app of scripts only has no live state: its config is what compares, and at the
    // running commit nothing differs. Nothing is stored either.
    let before = g.stored();
    let (got, answer) = g.get("/apps/web/diff");
    assert_eq!(got, 200, "{answer}");
    assert_eq!(answer["diff"]["status"], "SYNCED", "{answer}");
    assert!(
        answer["diff"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("its config is what compares")),
        "{answer}"
    );
    assert_eq!(g.stored(), before, "the config diff stored something");

    // A second successful deployment; then a rollback with a key, twice: one deployment.
    let second = change_and_push(
        &repo,
        &g,
        "web",
        &app_config("web", "      - name: WAIT\n        with: {duration: 1s}\n"),
    );
    let d = g.wait_terminal(&second, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    g.wait_idle(LIMIT);
    // Then the head's config breaks: a sync is refused, a rollback (to a commit whose config
    // is valid) is not.
    let broken = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec: [\n",
        )],
        "break web",
    );
    let (status, body) = g.push(&broken, "break-web");
    assert_eq!(status, 202, "{body}");
    g.wait_until(LIMIT, "web is INVALID_CONFIG", || {
        (g.app_view("web")["sync_status"] == "INVALID_CONFIG").then_some(())
    });
    let (status, body) = g.post("/apps/web/sync", json!({}));
    assert_eq!(status, 409, "{body}");
    let (status, a) = g.post("/apps/web/rollback", json!({"key": "release-42"}));
    assert_eq!(status, 200, "{a}");
    let (status, b) = g.post("/apps/web/rollback", json!({"key": "release-42"}));
    assert_eq!(status, 200, "{b}");
    assert_eq!(a["deployment"]["id"], b["deployment"]["id"]);
    assert_eq!(a["deployment"]["rollback_of"], first_id.as_str(), "{a}");
    assert_eq!(a["deployment"]["commit"], first["commit"], "{a}");
    let rolled = a["deployment"]["id"].as_str().expect("id");
    assert_eq!(g.wait_terminal(rolled, LIMIT)["status"], "SUCCESS");
    // The app is released after its deployment ends, by a message of its own: until the
    // queues are empty that write may land between the snapshots compared below.
    g.wait_idle(LIMIT);
    let app = g.app_view("web");
    assert_eq!(app["paused"]["commit"], first["commit"], "{app}");
    assert_eq!(app["paused"]["by"], "admin", "{app}");

    // Pausing a paused app keeps the first pause (the rollback's) as it was.
    let (status, again) = g.post("/apps/web/pause", json!({"reason": "another"}));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["app"]["paused"], app["paused"], "{again}");
    let (status, resumed) = g.post("/apps/web/resume", json!({}));
    assert_eq!(status, 200, "{resumed}");
    assert!(resumed["app"]["paused"].is_null(), "{resumed}");
    // Resuming may send the app a message (a held deployment goes on); let it be handled
    // before the snapshot, so only the second resume is between the two.
    g.wait_idle(LIMIT);
    let before = g.stored();
    let (status, _) = g.post("/apps/web/resume", json!({}));
    assert_eq!(status, 200);
    assert_eq!(
        g.stored().apps,
        before.apps,
        "resuming twice writes nothing"
    );
}

/// A stage's log comes in pages of at most 1,000 lines; the next page starts after the last
/// line of the one before, and every line comes once, in order.
#[test]
fn stage_logs_come_in_pages_of_a_thousand_lines() {
    let long = "      - name: SCRIPT_RUN\n        with: {run: 'for i in $(seq 1 1500); do echo line $i; done'}\n";
    let (_repo, _state, g) = setup(&[("web", app_config("web", long))], &UpOptions::default());
    let d = g.deployments().into_iter().next().expect("the deployment");
    let id = d["id"].as_str().expect("id");
    let path = |after: u64| format!("/deployments/{id}/stages/stage-0/logs?after={after}");
    let (status, first) = g.get(&path(0));
    assert_eq!(status, 200, "{first}");
    let first = first["lines"].as_array().expect("lines").clone();
    assert_eq!(first.len(), 1000);
    assert_eq!(first[0]["seq"], 1);
    let (_, rest) = g.get(&path(1000));
    let rest = rest["lines"].as_array().expect("lines").clone();
    assert!(!rest.is_empty() && rest.len() < 1000, "{}", rest.len());
    assert_eq!(rest[0]["seq"], 1001);
    let texts: Vec<String> = first
        .iter()
        .chain(&rest)
        .filter_map(|l| l["text"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with("line "))
        .collect();
    let want: Vec<String> = (1..=1500).map(|i| format!("line {i}")).collect();
    assert_eq!(texts, want);
    let last = rest.last().and_then(|l| l["seq"].as_u64()).expect("seq");
    let (_, after_all) = g.get(&path(last));
    assert_eq!(after_all["lines"], serde_json::json!([]));
}
