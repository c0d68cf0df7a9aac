//! End to end: a real `gannet up` SIGKILLed in the middle of a deployment, then restarted on
//! the same state file. Finished stages never run again, a WAIT resumes where it was, a
//! script (a job) outlives the kill and the restarted server follows it to its end, so it runs
//! once, a rollback resumes, and an idle restart changes nothing.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::{app_config, find_stage, marker_lines, stage_of, Gannet, Repo, UpOptions};

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

/// A 20 s script whose every second is a line of output, and which records its start and end.
fn twenty_seconds(marker: &Path, then: &str) -> String {
    format!(
        "echo \"start $$\" >> \"{m}\"\ni=1\nwhile [ $i -le 20 ]; do echo \"tick $i\"; sleep 1; i=$((i+1)); done\necho \"end $$\" >> \"{m}\"\n{then}",
        m = marker.display()
    )
}

/// Pushes `stages`, SIGKILLs `gannet up` 5 s into the 20 s stage `slow` and restarts it at
/// 10 s; returns the restarted server and the finished deployment.
fn kill_at_5s_restart_at_10s(
    stages: &str,
    slow_marker: &Path,
    state: &Path,
) -> (Gannet, String, Value) {
    let (_repo, mut g, id) = deploy(stages, state);
    g.wait_until(LIMIT, "the 20 s script has started", || {
        (!marker_lines(slow_marker).is_empty()).then_some(())
    });
    let began = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    g.kill();
    let script = pid_of(&marker_lines(slow_marker)[0]);
    assert!(
        std::path::Path::new(&format!("/proc/{script}")).exists(),
        "the script must outlive the killed server"
    );
    std::thread::sleep(Duration::from_secs(10).saturating_sub(began.elapsed()));
    let g = g.restart();
    let d = g.wait_terminal(&id, Duration::from_secs(40));
    (g, id, d)
}

/// The stage's `tick` lines, every one from 1 to 20, in order.
fn assert_every_tick(log: &[String]) {
    // Lines are written at least once: a crash between writing lines and saving the cursor,
    // or two deliveries of one step after the restart, repeat lines, never lose one. So the
    // first time each line appears is what counts.
    let mut ticks: Vec<&str> = Vec::new();
    for line in log.iter().filter(|l| l.starts_with("tick ")) {
        if !ticks.contains(&line.as_str()) {
            ticks.push(line);
        }
    }
    let want: Vec<String> = (1..=20).map(|i| format!("tick {i}")).collect();
    assert_eq!(
        ticks, want,
        "the stage log has every line of the script's output"
    );
}

#[test]
fn a_20s_script_outlives_a_sigkill_of_gannet_runs_once_and_ends_success() {
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
            &json!({"run": twenty_seconds(&slow, "")}),
        ),
    ]
    .concat();
    let state = tempfile::tempdir().expect("tempdir");
    let (g, id, d) = kill_at_5s_restart_at_10s(&stages, &slow, state.path());
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
    assert_eq!(lines.len(), 2, "started once, ended once: {lines:?}");
    assert_eq!(lines[1], format!("end {}", pid_of(&lines[0])), "{lines:?}");
    let stored = g.stored_deployment(&id).expect("stored deployment");
    let slow_stage = stage_of(&stored, "slow");
    let took = slow_stage["completed_at"].as_u64().expect("completed_at")
        - slow_stage["started_at"].as_u64().expect("started_at");
    assert!(
        (19_000..26_000).contains(&took),
        "the stage took {took} ms; the script takes 20 s and ran once"
    );
    assert_every_tick(&g.stage_log(&id, "slow"));
}

#[test]
fn a_failing_20s_script_outlives_a_sigkill_and_its_rollback_runs_once() {
    let work = tempfile::tempdir().expect("tempdir");
    let (slow, undone) = (work.path().join("slow"), work.path().join("undone"));
    let stages = stage(
        "slow",
        "SCRIPT_RUN",
        &json!({
            "run": twenty_seconds(&slow, "exit 4"),
            "onRollback": "echo undo >> \"$U\"",
            "env": {"U": undone},
        }),
    );
    let state = tempfile::tempdir().expect("tempdir");
    let (g, id, d) = kill_at_5s_restart_at_10s(&stages, &slow, state.path());
    assert_eq!(d["status"], "FAILURE", "{d}");
    assert!(
        d["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("script exited with code 4")),
        "{d}"
    );
    assert_eq!(
        stage_statuses(&d),
        owned(&[("slow", "FAILURE"), ("rollback-slow", "SUCCESS")]),
        "{d}"
    );
    assert_eq!(marker_lines(&slow).len(), 2, "the script ran once");
    assert_eq!(marker_lines(&undone), ["undo"], "onRollback ran once");
    assert_every_tick(&g.stage_log(&id, "slow"));
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
        lines,
        [
            started[0].clone(),
            format!("rb-end {}", pid_of(&started[0]))
        ],
        "the rollback script outlived the kill and ran once"
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
