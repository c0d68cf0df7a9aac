//! End to end: a real `gannet up` SIGKILLed in the middle of a deployment, then restarted on
//! the same state file. Finished stages never run again, a WAIT resumes where it was, an
//! interrupted script runs again to its end, a rollback resumes, and an idle restart changes
//! nothing.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::{
    app_config, find_stage, kill_process_group, marker_lines, stage_of, Gannet, Repo, UpOptions,
};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(20);

/// One pipeline stage (a YAML list item); `with` is written as JSON, which YAML reads as is.
fn stage(id: &str, name: &str, with: &Value) -> String {
    format!("      - id: {id}\n        name: {name}\n        with: {with}\n")
}

/// A repository holding app `web` with these stages, and a `gannet up` on it that has been
/// sent a push of the head; returns the deployment's id.
fn deploy(stages: &str, state: &Path) -> (Repo, Gannet, String) {
    let repo = Repo::new();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "add web",
    );
    let g = Gannet::start(&repo, state, &UpOptions::default());
    let (status, body) = g.push(&head, "crash-1");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&head, LIMIT);
    (repo, g, id)
}

/// The statuses of a deployment's stages, by stage id.
fn stage_statuses(d: &Value) -> Vec<(String, String)> {
    d["stages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_owned(),
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

/// The pid in a marker line such as `start 1234` (the script shell's `$$`, which leads its
/// process group).
fn pid_of(line: &str) -> u32 {
    line.rsplit(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in marker line {line:?}"))
}

#[test]
fn sigkill_during_wait_resumes_the_same_wait() {
    let work = tempfile::tempdir().expect("tempdir");
    let (first, second) = (work.path().join("first"), work.path().join("second"));
    let stages = [
        stage(
            "first",
            "SCRIPT_RUN",
            &json!({"run": "echo first >> \"$MARKER\"", "env": {"MARKER": first}}),
        ),
        stage("hold", "WAIT", &json!({"duration": "4s"})),
        stage(
            "second",
            "SCRIPT_RUN",
            &json!({"run": "echo second >> \"$MARKER2\"", "env": {"MARKER2": second}}),
        ),
    ]
    .concat();
    let state = tempfile::tempdir().expect("tempdir");
    let (_repo, mut g, id) = deploy(&stages, state.path());

    let started_at = g.wait_until(LIMIT, "the WAIT stage runs and records its start", || {
        let d = g.deployment(&id);
        let hold = find_stage(&d, "hold")?;
        (hold["status"] == "RUNNING")
            .then(|| hold["metadata"]["startedAt"].as_str().map(str::to_owned))
            .flatten()
    });
    std::thread::sleep(Duration::from_secs(2));
    let before = g.deployment(&id);
    assert_eq!(
        stage_of(&before, "hold")["status"],
        "RUNNING",
        "the kill must land inside the wait: {before}"
    );
    g.kill();
    let g = g.restart();

    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(
        stage_statuses(&d),
        owned(&[
            ("first", "SUCCESS"),
            ("hold", "SUCCESS"),
            ("second", "SUCCESS")
        ]),
        "{d}"
    );
    assert_eq!(marker_lines(&first), ["first"], "the first script ran once");
    assert_eq!(marker_lines(&second), ["second"]);
    assert_eq!(
        stage_of(&d, "hold")["metadata"]["startedAt"].as_str(),
        Some(started_at.as_str()),
        "the restart kept the wait's start: {d}"
    );
    let stored = g.stored_deployment(&id).expect("stored deployment");
    let hold = stage_of(&stored, "hold");
    let begun: u64 = started_at.parse().expect("startedAt is epoch ms");
    let ended = hold["completed_at"].as_u64().expect("WAIT completed_at");
    let elapsed = ended.saturating_sub(begun);
    // Killed 2 s in: a wait started over would end at least 6 s after the first start.
    assert!(
        (4000..5500).contains(&elapsed),
        "the WAIT took {elapsed} ms from its start to its end; it should be 4 s plus a little"
    );
}

#[test]
fn sigkill_during_a_script_runs_it_again_and_never_repeats_finished_stages() {
    let work = tempfile::tempdir().expect("tempdir");
    let (before, slow) = (work.path().join("before"), work.path().join("slow"));
    let stages = [
        stage(
            "before",
            "SCRIPT_RUN",
            &json!({"run": "echo before >> \"$M\"", "env": {"M": before}}),
        ),
        stage(
            "slow",
            "SCRIPT_RUN",
            &json!({
                "run": "echo \"start $$\" >> \"$M\"\nsleep 3\necho \"end $$\" >> \"$M\"",
                "env": {"M": slow},
            }),
        ),
    ]
    .concat();
    let state = tempfile::tempdir().expect("tempdir");
    let (_repo, mut g, id) = deploy(&stages, state.path());

    let started = g.wait_until(LIMIT, "the slow script has started", || {
        let d = g.deployment(&id);
        let lines = marker_lines(&slow);
        (find_stage(&d, "slow")?["status"] == "RUNNING" && !lines.is_empty()).then_some(lines)
    });
    g.kill();
    // The script outlives the killed server (it leads its own process group); end it too,
    // as the machine's crash would have.
    kill_process_group(pid_of(&started[0]));
    assert_eq!(
        marker_lines(&slow).len(),
        1,
        "the first run was cut short after its first line"
    );
    let g = g.restart();

    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(
        stage_statuses(&d),
        owned(&[("before", "SUCCESS"), ("slow", "SUCCESS")]),
        "{d}"
    );
    assert_eq!(
        marker_lines(&before),
        ["before"],
        "a finished stage never runs again"
    );
    let lines = marker_lines(&slow);
    assert_eq!(lines.len(), 3, "start, start again, end: {lines:?}");
    let (first_run, second_run) = (pid_of(&lines[0]), pid_of(&lines[1]));
    assert_ne!(first_run, second_run, "{lines:?}");
    assert!(lines[0].starts_with("start ") && lines[1].starts_with("start "));
    assert_eq!(lines[2], format!("end {second_run}"), "the rerun finished");
    assert_eq!(
        stage_of(&d, "slow")["metadata"]["attempts"],
        "2",
        "the plugin counted the rerun: {d}"
    );
    let log = g.stage_log(&id, "slow");
    assert!(
        log.iter().any(|l| l.contains("attempt 2")),
        "the stage log says the script ran again: {log:?}"
    );
}

#[test]
fn a_rollback_interrupted_by_sigkill_resumes_and_ends_failure() {
    let work = tempfile::tempdir().expect("tempdir");
    let (prepared, undone) = (work.path().join("prepared"), work.path().join("undone"));
    let stages = [
        stage(
            "prepare",
            "SCRIPT_RUN",
            &json!({
                "run": "echo prepare >> \"$M1\"",
                "onRollback": "echo \"rb-start $$\" >> \"$M2\"\nsleep 2\necho \"rb-end $$\" >> \"$M2\"",
                "env": {"M1": prepared, "M2": undone},
            }),
        ),
        stage("broken", "SCRIPT_RUN", &json!({"run": "exit 3"})),
    ]
    .concat();
    let state = tempfile::tempdir().expect("tempdir");
    let (_repo, mut g, id) = deploy(&stages, state.path());

    let started = g.wait_until(LIMIT, "the rollback script has started", || {
        let d = g.deployment(&id);
        let lines = marker_lines(&undone);
        (d["status"] == "ROLLING_BACK" && !lines.is_empty()).then_some(lines)
    });
    g.kill();
    kill_process_group(pid_of(&started[0]));
    let stored = g.stored_deployment(&id).expect("stored deployment");
    assert_eq!(
        stored["status"], "ROLLING_BACK",
        "killed while rolling back"
    );
    let g = g.restart();

    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("broken")),
        "the reason names the failed stage: {d}"
    );
    assert_eq!(
        stage_statuses(&d),
        owned(&[
            ("prepare", "SUCCESS"),
            ("broken", "FAILURE"),
            ("rollback-prepare", "SUCCESS"),
        ]),
        "{d}"
    );
    assert_eq!(marker_lines(&prepared), ["prepare"]);
    let lines = marker_lines(&undone);
    assert_eq!(
        lines.len(),
        3,
        "rollback started, started again, ended: {lines:?}"
    );
    assert!(lines[1].starts_with("rb-start "), "{lines:?}");
    assert_eq!(
        lines[2],
        format!("rb-end {}", pid_of(&lines[1])),
        "{lines:?}"
    );
}

#[test]
fn an_idle_restart_changes_nothing() {
    let work = tempfile::tempdir().expect("tempdir");
    let marker = work.path().join("ran");
    let stages = [
        stage("settle", "WAIT", &json!({"duration": "0s"})),
        stage(
            "record",
            "SCRIPT_RUN",
            &json!({"run": "echo \"$SR_TRIGGERED_COMMIT_HASH\" >> \"$M\"", "env": {"M": marker}}),
        ),
    ]
    .concat();
    let state = tempfile::tempdir().expect("tempdir");
    let (repo, mut g, id) = deploy(&stages, state.path());
    let head = repo.head();
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    g.wait_until(LIMIT, "the app's lock is released", || {
        let app = g.app_view("web");
        (app["running_commit"] == head.as_str() && app["active_deployment"].is_null()).then_some(())
    });

    let listed = g.deployments();
    let tables = ["apps", "repos", "deployments"].map(|t| g.stored_rows(t));
    g.kill();
    let g = g.restart();
    // Several resume sweeps (1 s) and the poll tick at start go by.
    std::thread::sleep(Duration::from_millis(2500));

    assert_eq!(
        g.deployments(),
        listed,
        "the API shows the same deployments"
    );
    assert_eq!(
        ["apps", "repos", "deployments"].map(|t| g.stored_rows(t)),
        tables,
        "the state file is unchanged"
    );
    assert_eq!(marker_lines(&marker), [head], "nothing ran again");
}
