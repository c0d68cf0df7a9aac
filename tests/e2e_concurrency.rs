//! End to end: at-least-once delivery and concurrency against a real `gannet up`. Handling
//! every message twice changes no outcome; a repeated webhook delivery deploys once; fifty
//! racing pushes never run two deployments of one app at once and end on the last commit;
//! two apps deploy side by side; a PENDING deployment names the one it waits for.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{app_config, find_stage, marker_lines, Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(20);

/// One pipeline stage (a YAML list item); `with` is written as JSON, which YAML reads as is.
fn stage(id: &str, name: &str, with: &Value) -> String {
    format!("      - id: {id}\n        name: {name}\n        with: {with}\n")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn ms(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not epoch ms: {v}"))
}

/// Everything a run leaves behind that delivery twice must not change.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Per deployment: id, commit, status, reason, and per stage id, status and log lines.
    deployments: Vec<Value>,
    /// The marker files the scripts append to, by name.
    markers: Vec<(String, Vec<String>)>,
    stored_deployments: i64,
    dead_letters: i64,
}

/// Deploys `repo`'s head on a fresh `gannet up` with `extra_config`, waits for the end, and
/// collects the outcome. Scripts write their markers under `$MARKER_DIR`, a directory of
/// this run's own, which gannet passes on to them (`plugins.script-run.allowEnv`).
fn run_once(repo: &Repo, extra_config: &str, markers: &[&str]) -> Outcome {
    let state = tempdir();
    let marker_dir = tempdir();
    let opts = UpOptions {
        extra_config: format!(
            "{}plugins: {{script-run: {{allowEnv: [MARKER_DIR]}}}}\n{extra_config}",
            UpOptions::default().extra_config
        ),
        env: vec![(
            "MARKER_DIR".to_owned(),
            marker_dir.path().display().to_string(),
        )],
        ..UpOptions::default()
    };
    let g = Gannet::start(repo, state.path(), &opts);
    let head = repo.head();
    let (status, body) = g.push(&head, "twice-1");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&head, LIMIT);
    g.wait_terminal(&id, LIMIT);
    g.wait_until(LIMIT, "the app's lock is released", || {
        g.app_view("web")["active_deployment"]
            .is_null()
            .then_some(())
    });
    let deployments = g
        .deployments()
        .iter()
        .map(|d| {
            let id = d["id"].as_str().expect("id");
            let stages: Vec<Value> = d["stages"]
                .as_array()
                .expect("stages")
                .iter()
                .map(|s| {
                    let sid = s["id"].as_str().expect("stage id");
                    // WAIT's progress notes depend on when a step happened to run.
                    let log: Vec<String> = g
                        .stage_log(id, sid)
                        .into_iter()
                        .filter(|l| !l.contains(" elapsed, "))
                        .collect();
                    json!({"id": sid, "status": s["status"], "reason": s["status_reason"], "log": log})
                })
                .collect();
            json!({
                "id": id,
                "commit": d["commit"],
                "status": d["status"],
                "reason": d["status_reason"],
                "stages": stages,
            })
        })
        .collect();
    Outcome {
        deployments,
        markers: markers
            .iter()
            .map(|m| ((*m).to_owned(), marker_lines(&marker_dir.path().join(m))))
            .collect(),
        stored_deployments: g.count("deployments"),
        dead_letters: g.count("dead_letters"),
    }
}

const TWICE: &str = "testing: {deliverTwice: true}\n";

/// Runs the head of `repo` once plainly and once with every message handled twice; the two
/// outcomes must be identical. Returns the plain one.
fn check_twice(repo: &Repo, markers: &[&str]) -> Outcome {
    let plain = run_once(repo, "", markers);
    let twice = run_once(repo, TWICE, markers);
    assert_eq!(
        twice, plain,
        "delivering every message twice changed the outcome"
    );
    assert_eq!(plain.stored_deployments, 1, "{plain:?}");
    assert_eq!(plain.dead_letters, 0, "{plain:?}");
    plain
}

#[test]
fn delivering_every_message_twice_changes_no_successful_outcome() {
    let repo = Repo::new();
    let stages = [
        stage(
            "first",
            "SCRIPT_RUN",
            &json!({"run": "echo \"first $SR_TRIGGERED_COMMIT_HASH\" >> \"$MARKER_DIR/first\""}),
        ),
        stage("hold", "WAIT", &json!({"duration": "1s"})),
        stage(
            "second",
            "SCRIPT_RUN",
            &json!({"run": "echo second >> \"$MARKER_DIR/second\""}),
        ),
    ]
    .concat();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", &stages))],
        "add web",
    );
    let out = check_twice(&repo, &["first", "second"]);
    let d = &out.deployments[0];
    assert_eq!(d["status"], "SUCCESS", "{out:?}");
    assert!(
        d["stages"]
            .as_array()
            .is_some_and(|s| s.len() == 3 && s.iter().all(|s| s["status"] == "SUCCESS")),
        "{out:?}"
    );
    assert_eq!(
        out.markers,
        [
            ("first".to_owned(), vec![format!("first {head}")]),
            ("second".to_owned(), vec!["second".to_owned()]),
        ]
    );
}

#[test]
fn delivering_every_message_twice_changes_no_rollback() {
    let repo = Repo::new();
    let stages = [
        stage(
            "prepare",
            "SCRIPT_RUN",
            &json!({
                "run": "echo prepare >> \"$MARKER_DIR/prepare\"",
                "onRollback": "echo undo >> \"$MARKER_DIR/undo\"",
            }),
        ),
        stage("hold", "WAIT", &json!({"duration": "1s"})),
        stage(
            "broken",
            "SCRIPT_RUN",
            &json!({"run": "echo broken >> \"$MARKER_DIR/broken\"\nexit 3"}),
        ),
    ]
    .concat();
    repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", &stages))],
        "add web",
    );
    let out = check_twice(&repo, &["prepare", "undo", "broken"]);
    let d = &out.deployments[0];
    assert_eq!(d["status"], "FAILURE", "{out:?}");
    let statuses: Vec<(&str, &str)> = d["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default(),
                s["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("prepare", "SUCCESS"),
            ("hold", "SUCCESS"),
            ("broken", "FAILURE"),
            ("rollback-prepare", "SUCCESS"),
        ],
        "{out:?}"
    );
    for name in ["prepare", "undo", "broken"] {
        let lines = &out
            .markers
            .iter()
            .find(|(m, _)| m == name)
            .expect("marker")
            .1;
        assert_eq!(lines, &[name.to_owned()], "{name} ran exactly once");
    }
}

#[test]
fn a_repeated_delivery_id_is_a_duplicate_and_deploys_once() {
    let repo = Repo::new();
    let head = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config("web", &stage("hold", "WAIT", &json!({"duration": "0s"}))),
        )],
        "add web",
    );
    let state = tempdir();
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let (status, body) = g.push(&head, "same-delivery");
    assert_eq!(status, 202, "{body}");
    let (status, body) = g.push(&head, "same-delivery");
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("duplicate")),
        "{body}"
    );
    let id = g.deployment_of(&head, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    g.wait_until(LIMIT, "the app's lock is released", || {
        g.app_view("web")["active_deployment"]
            .is_null()
            .then_some(())
    });
    assert_eq!(g.deployments().len(), 1);
    assert_eq!(g.count("deployments"), 1);
    assert_eq!(g.count("deliveries"), 1);
}

/// Watches the app's live deployments every 20 ms until told to stop, recording every
/// sample in which more than one was live; returns how many samples it took.
fn watch_live(g: &Gannet, stop: &AtomicBool, overlaps: &Mutex<Vec<Vec<String>>>) -> usize {
    let mut samples = 0;
    let started = Instant::now();
    while !stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(120) {
        let (status, body) = g.get("/deployments?status=PLANNED,RUNNING,ROLLING_BACK&limit=1000");
        assert_eq!(status, 200, "{body}");
        let live: Vec<String> = body["deployments"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|d| format!("{} {}", d["id"], d["status"]))
            .collect();
        samples += 1;
        if live.len() > 1 {
            overlaps.lock().expect("overlaps").push(live);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    samples
}

/// Sets the flag when dropped, so a panicking test still stops its watcher thread.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Fifty commits to one app, each followed at once by its own signed push on its own thread,
/// so pushes race with one another and with the next commits.
fn fifty_racing_pushes(supersede: bool) {
    const PUSHES: usize = 50;
    let repo = Repo::new();
    let work = tempdir();
    let (marker, lock, overlap) = (
        work.path().join("deployed"),
        work.path().join("lock"),
        work.path().join("overlap"),
    );
    // `mkdir` fails when the directory exists: two scripts at once would collide here.
    let run =
        "mkdir \"$LOCKDIR\" || { echo \"$SR_TRIGGERED_COMMIT_HASH\" >> \"$OVERLAP\"; exit 1; }\n\
               echo \"$SR_TRIGGERED_COMMIT_HASH\" >> \"$MARKER\"\n\
               sleep 0.05\n\
               rmdir \"$LOCKDIR\"";
    let stages = [
        stage("settle", "WAIT", &json!({"duration": "0s"})),
        stage(
            "record",
            "SCRIPT_RUN",
            &json!({"run": run, "env": {"MARKER": marker, "LOCKDIR": lock, "OVERLAP": overlap}}),
        ),
    ]
    .concat();
    // The poll at start may deploy this first commit before any push arrives.
    let initial = repo.commit(
        &[
            ("apps/web/app.pipecd.yaml", &app_config("web", &stages)),
            ("apps/web/version.txt", "0"),
        ],
        "add web",
    );
    let state = tempdir();
    let opts = UpOptions {
        supersede,
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    let stop = AtomicBool::new(false);
    let overlaps = Mutex::new(Vec::new());
    // Fails at once, rather than at the time limit, when exclusion is already broken.
    let check_exclusion = || {
        let seen = overlaps.lock().expect("overlaps").clone();
        assert!(
            seen.is_empty(),
            "two deployments of one app were live at once: {seen:?}"
        );
    };

    let (commits, samples) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let watcher = s.spawn(|| watch_live(&g, &stop, &overlaps));
        let mut commits = vec![initial];
        let mut pushes = Vec::new();
        for i in 1..=PUSHES {
            let sha = repo.commit(
                &[("apps/web/version.txt", &i.to_string())],
                &format!("version {i}"),
            );
            commits.push(sha.clone());
            let g = &g;
            pushes.push(s.spawn(move || g.push(&sha, &format!("race-{i}"))));
        }
        for p in pushes {
            let (status, body) = p.join().expect("push thread");
            assert_eq!(status, 202, "{body}");
        }
        let last = commits.last().cloned().expect("commits");
        g.wait_until(
            Duration::from_secs(45),
            "the last commit is deployed and nothing is left to run",
            || {
                check_exclusion();
                let app = g.app_view("web");
                let done = g.deployments().iter().all(|d| {
                    matches!(
                        d["status"].as_str(),
                        Some("SUCCESS" | "FAILURE" | "CANCELLED")
                    )
                });
                (app["running_commit"] == last.as_str()
                    && app["active_deployment"].is_null()
                    && done)
                    .then_some(())
            },
        );
        stop.store(true, Ordering::SeqCst);
        (commits, watcher.join().expect("watcher thread"))
    });

    assert!(samples >= 20, "the watcher sampled only {samples} times");
    check_exclusion();
    assert!(
        marker_lines(&overlap).is_empty(),
        "two scripts ran at once: {:?}",
        marker_lines(&overlap)
    );
    let last = commits.last().expect("commits");
    let all = g.deployments();
    let of_last = all
        .iter()
        .find(|d| &d["commit"] == last)
        .expect("a deployment of the last commit");
    assert_eq!(of_last["status"], "SUCCESS", "{of_last}");
    let by_status =
        |status: &str| -> Vec<&Value> { all.iter().filter(|d| d["status"] == status).collect() };
    assert!(
        by_status("FAILURE").is_empty(),
        "{:?}",
        by_status("FAILURE")
    );
    assert_eq!(
        by_status("SUCCESS").len() + by_status("CANCELLED").len(),
        all.len(),
        "every deployment is terminal: {all:?}"
    );
    let cancelled = by_status("CANCELLED");
    if supersede {
        assert!(
            !cancelled.is_empty(),
            "fifty racing pushes left no PENDING deployment to supersede ({} deployments)",
            all.len()
        );
        for d in &cancelled {
            assert!(
                d["status_reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("superseded")),
                "{d}"
            );
            assert!(
                d["stages"].as_array().is_some_and(Vec::is_empty),
                "a superseded deployment never ran: {d}"
            );
        }
    } else {
        assert!(
            cancelled.is_empty(),
            "nothing supersedes by default: {cancelled:?}"
        );
        assert!(all.len() > 1, "the pushes made one deployment only");
    }

    // Each deployment that succeeded ran its script exactly once, oldest commit first.
    let ran = marker_lines(&marker);
    let index_of = |sha: &str| commits.iter().position(|c| c == sha);
    let order: Vec<Option<usize>> = ran.iter().map(|sha| index_of(sha)).collect();
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] < w[1]),
        "scripts ran out of commit order or twice: {order:?}"
    );
    let mut succeeded: Vec<String> = by_status("SUCCESS")
        .iter()
        .map(|d| d["commit"].as_str().unwrap_or_default().to_owned())
        .collect();
    succeeded.sort_by_key(|sha| index_of(sha));
    assert_eq!(ran, succeeded, "one script run per successful deployment");
    let stored: i64 = g.count("deployments");
    assert_eq!(usize::try_from(stored).ok(), Some(all.len()));
}

#[test]
fn fifty_racing_pushes_run_one_deployment_at_a_time_oldest_first() {
    fifty_racing_pushes(false);
}

#[test]
fn fifty_racing_pushes_with_supersede_cancel_older_pending_ones() {
    fifty_racing_pushes(true);
}

#[test]
fn two_apps_in_one_repo_deploy_side_by_side() {
    let repo = Repo::new();
    let stages = |name: &str| {
        [
            stage("hold", "WAIT", &json!({"duration": "1s"})),
            stage(
                "done",
                "SCRIPT_RUN",
                &json!({"run": format!("echo {name}")}),
            ),
        ]
        .concat()
    };
    repo.commit(&[("README.md", "two apps\n")], "start");
    let first = repo.commit(
        &[("apps/a/app.pipecd.yaml", &app_config("a", &stages("a")))],
        "add a",
    );
    let second = repo.commit(
        &[("apps/b/app.pipecd.yaml", &app_config("b", &stages("b")))],
        "add b",
    );
    let state = tempdir();
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    std::thread::scope(|s| {
        let pushes = [(&first, "two-a"), (&second, "two-b")]
            .map(|(sha, delivery)| s.spawn(|| g.push(sha, delivery)));
        for p in pushes {
            let (status, body) = p.join().expect("push thread");
            assert_eq!(status, 202, "{body}");
        }
    });
    let find = |app: &str| {
        g.wait_until(LIMIT, &format!("a deployment of {app}"), || {
            g.deployments()
                .into_iter()
                .find(|d| d["app"] == app)
                .and_then(|d| d["id"].as_str().map(str::to_owned))
        })
    };
    let (a, b) = (find("a"), find("b"));
    for id in [&a, &b] {
        let d = g.wait_terminal(id, LIMIT);
        assert_eq!(d["status"], "SUCCESS", "{d}");
        assert!(d["blocked_by"].is_null(), "{d}");
    }
    assert_eq!(g.deployments().len(), 2, "one deployment per app");
    let (da, db) = (
        g.stored_deployment(&a).expect("a stored"),
        g.stored_deployment(&b).expect("b stored"),
    );
    // Each holds its 1 s WAIT; one lock per app lets the two windows overlap.
    assert!(
        ms(&da["planned_at"]) < ms(&db["completed_at"])
            && ms(&db["planned_at"]) < ms(&da["completed_at"]),
        "the two apps deployed one after the other: a {}..{}, b {}..{}",
        da["planned_at"],
        da["completed_at"],
        db["planned_at"],
        db["completed_at"]
    );
    for app in ["a", "b"] {
        assert!(g.app_view(app)["running_commit"].is_string());
    }
}

#[test]
fn a_pending_deployment_names_the_one_it_waits_for() {
    let repo = Repo::new();
    let stages = stage("hold", "WAIT", &json!({"duration": "3s"}));
    let first = repo.commit(
        &[
            ("apps/web/app.pipecd.yaml", &app_config("web", &stages)),
            ("apps/web/version.txt", "1"),
        ],
        "version 1",
    );
    let state = tempdir();
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let (status, body) = g.push(&first, "pending-1");
    assert_eq!(status, 202, "{body}");
    let first_id = g.deployment_of(&first, LIMIT);
    g.wait_until(LIMIT, "the first deployment's WAIT runs", || {
        let d = g.deployment(&first_id);
        (find_stage(&d, "hold")?["status"] == "RUNNING").then_some(())
    });

    let second = repo.commit(&[("apps/web/version.txt", "2")], "version 2");
    let (status, body) = g.push(&second, "pending-2");
    assert_eq!(status, 202, "{body}");
    let second_id = g.deployment_of(&second, LIMIT);
    let waiting = g.wait_until(
        LIMIT,
        "the second deployment says what it waits for",
        || {
            let d = g.deployment(&second_id);
            (d["blocked_by"] == first_id.as_str()).then_some(d)
        },
    );
    assert_eq!(waiting["status"], "PENDING", "{waiting}");
    assert!(
        waiting["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains(first_id.as_str())),
        "the reason names the deployment holding the lock: {waiting}"
    );
    assert_eq!(
        g.deployment(&first_id)["status"],
        "RUNNING",
        "the first was still running"
    );

    for id in [&first_id, &second_id] {
        assert_eq!(g.wait_terminal(id, LIMIT)["status"], "SUCCESS");
    }
    let (d1, d2) = (
        g.stored_deployment(&first_id).expect("first stored"),
        g.stored_deployment(&second_id).expect("second stored"),
    );
    assert!(
        ms(&d2["planned_at"]) >= ms(&d1["completed_at"]),
        "the second was planned only after the first ended"
    );
    assert!(g.deployment(&second_id)["blocked_by"].is_null());
}
