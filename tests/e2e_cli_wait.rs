//! End to end: the CLI waiting for deployments against a real `gannet up`. `sync --wait`,
//! `deployments wait` and `deployments watch` exit 0 on SUCCESS, 3 on FAILURE, 4 on
//! CANCELLED, 5 on timeout and 6 when the server stays unreachable, and a wait outlives a
//! server killed and restarted under it. `apps pause` stops pushes from deploying until
//! `apps resume`, which deploys what was pushed meanwhile; `apps history`, `completions`, and
//! `--server`/`--token` before or after the subcommand. (Rollback and `apps diff` need live
//! state: they are in `e2e_drift.rs`, on Lambda.)

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{
    app_config, deployed_web, finish, gannet_bin, run_gannet, token_of, CliRun, Gannet, KillOnDrop,
    Repo, ADMIN_TOKEN,
};

const LIMIT: Duration = Duration::from_secs(30);
const CONFIG: &str = "apps/web/app.pipecd.yaml";

fn wait_stage(seconds: u64) -> String {
    format!("      - name: WAIT\n        with: {{duration: {seconds}s}}\n")
}

const OK: &str = "      - name: SCRIPT_RUN\n        with: {run: echo waited-ok}\n";
const BAD: &str = "      - name: SCRIPT_RUN\n        with: {run: 'echo waited-bad; exit 7'}\n";

/// Starts a client command in the background against `url`, as the admin.
fn spawn(url: &str, args: &[&str]) -> Child {
    Command::new(gannet_bin())
        .args(args)
        .env("GANNET_SERVER", url)
        .env("GANNET_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gannet runs")
}

/// The deployment a `sync`/`rollback` printed: `… <id> of web at <sha> started`.
fn started_id(run: &CliRun) -> String {
    run.stdout
        .lines()
        .find(|l| l.ends_with("started"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no started line: {run:?}"))
        .to_owned()
}

#[test]
fn sync_wait_exits_by_the_deployments_outcome() {
    let (repo, _state, g, _) = deployed_web(OK);
    let run = g.cli_env(&["sync", "web", "--wait", "--timeout", "30s"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = started_id(&run);
    assert_eq!(g.deployment(&id)["status"], "SUCCESS");
    assert!(
        run.stderr
            .contains(&format!("deployment {id} ended SUCCESS")),
        "{run:?}"
    );
    // Piped output is appended lines (no redrawing), with each stage's change.
    assert!(!run.stdout.contains('\x1b'), "{run:?}");
    assert!(run.stdout.contains("stage stage-0"), "{run:?}");
    g.wait_unlocked("web", LIMIT);

    repo.commit(&[(CONFIG, &app_config("web", BAD))], "break web");
    let run = g.cli_env(&["sync", "web", "--wait"], &[]);
    assert_eq!(run.code, 3, "FAILURE exits 3: {run:?}");
    assert!(run.stderr.contains("ended FAILURE"), "{run:?}");
    g.wait_unlocked("web", LIMIT);

    // --json: stdout is the final deployment alone.
    let run = g.cli_env(&["sync", "web", "--wait", "--json"], &[]);
    assert_eq!(run.code, 3, "{run:?}");
    let d: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON alone");
    assert_eq!(d["status"], "FAILURE", "{d}");
    g.wait_unlocked("web", LIMIT);

    // Cancelled while waited for: 4.
    repo.commit(&[(CONFIG, &app_config("web", &wait_stage(30)))], "slow web");
    let child = spawn(&g.url, &["sync", "web", "--wait"]);
    let id = g.wait_until(LIMIT, "the sync's deployment runs", || {
        g.deployments()
            .into_iter()
            .find(|d| d["status"] == "RUNNING")
            .and_then(|d| d["id"].as_str().map(str::to_owned))
    });
    let (status, body) = g.post(&format!("/deployments/{id}/cancel"), serde_json::json!({}));
    assert_eq!(status, 200, "{body}");
    let run = finish(child, LIMIT);
    assert_eq!(run.code, 4, "CANCELLED exits 4: {run:?}");
    assert!(run.stderr.contains("ended CANCELLED"), "{run:?}");
    g.wait_unlocked("web", LIMIT);

    // Not done in time: 5, and the deployment goes on.
    let run = g.cli_env(&["sync", "web", "--wait", "--timeout", "1s"], &[]);
    assert_eq!(run.code, 5, "a timeout exits 5: {run:?}");
    let id = started_id(&run);
    assert!(run.stderr.contains("is still RUNNING"), "{run:?}");
    assert_eq!(g.deployment(&id)["status"], "RUNNING");
    let (status, body) = g.post(&format!("/deployments/{id}/cancel"), serde_json::json!({}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_wait_outlives_a_server_restart_and_gives_up_on_a_server_that_stays_down() {
    let (repo, _state, g, _) = deployed_web(OK);
    let head = repo.commit(
        &[(
            CONFIG,
            &app_config("web", &format!("{}{OK}", wait_stage(4))),
        )],
        "slower web",
    );
    assert_eq!(g.push(&head, "wait-restart").0, 202);
    let id = g.deployment_of(&head, LIMIT);
    g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);
    let child = spawn(&g.url, &["deployments", "wait", &id, "--retry-for", "60s"]);
    std::thread::sleep(Duration::from_millis(700));
    // SIGKILL mid-stage, down for a while, then back on the same state: the deployment
    // resumes and the wait sees it end.
    let mut g = g;
    g.kill();
    std::thread::sleep(Duration::from_secs(2));
    let g = g.restart();
    let run = finish(child, LIMIT * 2);
    assert_eq!(run.code, 0, "{run:?}\n{}", g.log());
    assert!(
        run.stderr.contains("cannot reach gannet"),
        "it said the server was down: {run:?}"
    );
    assert!(
        run.stderr
            .contains(&format!("deployment {id} ended SUCCESS")),
        "{run:?}"
    );
    assert_eq!(g.deployment(&id)["status"], "SUCCESS");

    // A server that stays down: 6 once --retry-for has passed, saying so.
    let url = g.url.clone();
    drop(g);
    let started = Instant::now();
    let run = run_gannet(
        &[
            "deployments",
            "wait",
            &id,
            "--retry-for",
            "2s",
            "--server",
            &url,
        ],
        &[("GANNET_TOKEN", ADMIN_TOKEN)],
    );
    assert_eq!(run.code, 6, "{run:?}");
    assert!(run.stderr.contains("unreachable for"), "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn watch_redraws_on_a_terminal_and_says_how_to_approve_a_waiting_stage() {
    let stages = "      - name: SCRIPT_RUN\n        with: {run: 'for i in 1 2 3 4 5 6 7; do echo tail-line-$i; done'}\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice]}\n";
    let (repo, _state, g, _) = deployed_web(OK);
    let head = repo.commit(&[(CONFIG, &app_config("web", stages))], "approval");
    assert_eq!(g.push(&head, "watch-approval").0, 202);
    let id = g.deployment_of(&head, LIMIT);
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);

    // Not a terminal: appended lines, with the hint once.
    let run = g.cli_env(&["deployments", "watch", &id, "--timeout", "2s"], &[]);
    assert_eq!(run.code, 5, "{run:?}");
    let hint = format!("waiting for approval: gannet approve {id} --stage stage-1");
    assert_eq!(run.stdout.matches(&hint).count(), 1, "{run:?}");
    assert!(!run.stdout.contains('\x1b'), "{run:?}");

    // A terminal (script(1) gives it one): the board is redrawn in place, with the stages,
    // the hint and the last lines of the stage that ran.
    let command = format!("{} deployments watch {id} --timeout 3s", gannet_bin());
    let out = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("GANNET_SERVER", &g.url)
        .env("GANNET_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("script(1) runs");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{screen}");
    assert!(
        screen.contains("\x1b[") && screen.contains("A\r\x1b[J"),
        "no redraw: {screen:?}"
    );
    assert!(screen.contains(&hint), "{screen}");
    assert!(screen.contains("WAIT_APPROVAL"), "{screen}");
    assert!(screen.contains("RUNNING"), "{screen}");

    // Approved: the watch ends 0.
    let run = g.cli_env(&["approve", &id], &[("GANNET_TOKEN", token_of("alice"))]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = g.cli_env(&["deployments", "watch", &id, "--timeout", "20s"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// A CI job pushes, then waits on what its commit does to the app: 0 when the deployment ends
/// SUCCESS (or the commit does not deploy the app), 3 on FAILURE, 5 when it outlasts
/// --timeout; without --commit, the app idle and SYNCED.
#[test]
fn apps_wait_follows_what_a_pushed_commit_does_to_the_app() {
    let (repo, _state, g, _) = deployed_web(OK);
    // The push's webhook and the wait start together, as a CI step would run them.
    let push_and_wait = |stages: &str, message: &str, timeout: &str| {
        let head = repo.commit(&[(CONFIG, &app_config("web", stages))], message);
        let waiter = spawn(
            &g.url,
            &[
                "apps",
                "wait",
                "web",
                "--commit",
                &head,
                "--timeout",
                timeout,
            ],
        );
        let (status, body) = g.push(&head, &format!("delivery-{head}"));
        assert_eq!(status, 202, "{body}");
        (head, finish(waiter, LIMIT))
    };
    let good = OK.replace("waited-ok", "waited-ok-again");
    let (head, run) = push_and_wait(&good, "a good change", "30s");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("ended SUCCESS"), "{run:?}");
    assert_eq!(
        g.deployment(&g.deployment_of(&head, LIMIT))["status"],
        "SUCCESS"
    );

    let (_, run) = push_and_wait(BAD, "a bad change", "30s");
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("ended FAILURE"), "{run:?}");

    let (head, run) = push_and_wait(&wait_stage(20), "a slow change", "2s");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("gave up after"), "{run:?}");
    let slow = g.deployment_of(&head, LIMIT);
    let run = g.cli_env(&["cancel", &slow, "--no-rollback"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    g.wait_terminal(&slow, LIMIT);
    g.wait_unlocked("web", LIMIT);

    // A commit that changes none of the app's files: judged, nothing to wait for.
    let other = repo.commit(&[("README.md", "docs only")], "docs");
    let (status, body) = g.push(&other, &format!("delivery-{other}"));
    assert_eq!(status, 202, "{body}");
    let run = g.cli_env(
        &[
            "apps",
            "wait",
            "web",
            "--commit",
            &other,
            "--timeout",
            "30s",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("does not deploy web"), "{run:?}");

    // Without --commit: the app is idle; it is not SYNCED (its last deployment was cancelled).
    let run = g.cli_env(&["apps", "wait", "web", "--timeout", "10s"], &[]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("web is idle and UNKNOWN"), "{run:?}");
    let run = g.cli_env(&["apps", "wait", "web", "--commit", "abc"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
}

/// `webhook push` resolves `--after HEAD` in the repository it runs in, and exits non-zero
/// when gannet accepted the push but ignored it (a branch it does not watch): nothing deploys.
#[test]
fn webhook_push_resolves_head_and_fails_when_the_push_is_ignored() {
    let (repo, _state, g, _) = deployed_web(OK);
    let head = repo.commit(
        &[(
            CONFIG,
            &app_config("web", &OK.replace("waited-ok", "pushed-by-cli")),
        )],
        "by the cli",
    );
    let push = |branch: &str| {
        let out = Command::new(gannet_bin())
            .args([
                "webhook",
                "push",
                "--repo",
                support::GITHUB,
                "--branch",
                branch,
            ])
            .args(["--after", "HEAD", "--secret-env", "GANNET_E2E_SECRET"])
            .env("GANNET_SERVER", &g.url)
            .env("GANNET_E2E_SECRET", support::SECRET)
            .current_dir(repo.path())
            .output()
            .expect("gannet runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = push("release");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the push was ignored"), "{stderr}");
    let (code, stderr) = push("main");
    assert_eq!(code, Some(0), "{stderr}");
    let id = g.deployment_of(&head, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
}

#[test]
fn a_paused_app_ignores_pushes_until_resumed_then_deploys_what_was_pushed() {
    let (repo, _state, g, _) = deployed_web(OK);
    let run = g.cli_env(&["apps", "pause", "web", "--reason", "release freeze"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let app = g.app_view("web");
    assert_eq!(app["paused"]["by"], "admin", "{app}");
    assert_eq!(app["paused"]["reason"], "release freeze", "{app}");
    // Shown in the list and the app.
    let run = g.cli_env(&["apps", "list"], &[]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("web") && l.contains("paused")),
        "{run:?}"
    );
    let run = g.cli_env(&["apps", "show", "web"], &[]);
    assert!(run.stdout.contains("paused:   by admin"), "{run:?}");
    assert!(run.stdout.contains("release freeze"), "{run:?}");
    // Pausing again changes nothing; a viewer may not pause.
    let run = g.cli_env(&["apps", "pause", "web"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(g.app_view("web")["paused"], app["paused"]);
    let run = g.cli_env(
        &["apps", "pause", "web"],
        &[("GANNET_TOKEN", token_of("vic"))],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("needs the role deployer or admin"),
        "{run:?}"
    );

    let before = g.deployments().len();
    let head = repo.commit(
        &[(
            CONFIG,
            &app_config(
                "web",
                "      - name: SCRIPT_RUN\n        with: {run: echo second}\n",
            ),
        )],
        "second",
    );
    assert_eq!(g.push(&head, "paused-push").0, 202);
    g.wait_until(LIMIT, "the push was judged", || {
        g.log()
            .contains("not triggered: the app is paused")
            .then_some(())
    });
    g.wait_idle(LIMIT);
    assert_eq!(
        g.deployments().len(),
        before,
        "a paused app deployed on a push"
    );
    let run = g.cli_env(&["apps", "history", "web"], &[]);
    assert!(
        run.stdout
            .contains("History of web (paused: release freeze)"),
        "{run:?}"
    );

    let run = g.cli_env(&["apps", "resume", "web"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(g.app_view("web")["paused"].is_null());
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(d["trigger"], "ON_COMMIT", "{d}");

    let run = g.cli_env(&["apps", "history", "web", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let ids: Vec<&str> = list["deployments"]
        .as_array()
        .expect("deployments")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(ids.first(), Some(&id.as_str()), "newest first: {list}");
    assert_eq!(ids.len(), before + 1, "{list}");
}

#[test]
fn server_and_token_go_before_or_after_the_subcommand() {
    let (_repo, _state, g, _) = deployed_web(OK);
    let token = token_of("vic");
    for args in [
        vec![
            "--server",
            g.url.as_str(),
            "--token",
            token,
            "apps",
            "list",
            "--json",
        ],
        vec![
            "apps",
            "list",
            "--json",
            "--server",
            g.url.as_str(),
            "--token",
            token,
        ],
        vec![
            "apps",
            "--token",
            token,
            "list",
            "--server",
            g.url.as_str(),
            "--json",
        ],
    ] {
        let run = run_gannet(&args, &[]);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert!(run.stdout.contains("\"web\""), "{run:?}");
    }
    // The flag wins over the environment; a wrong token is refused (1), not unreachable.
    let run = run_gannet(
        &[
            "apps",
            "list",
            "--server",
            g.url.as_str(),
            "--token",
            "not-a-token-000000000000000",
        ],
        &[("GANNET_TOKEN", ADMIN_TOKEN)],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("HTTP 401"), "{run:?}");
}

#[test]
fn completions_for_each_shell_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let run = run_gannet(&["completion", shell], &[]);
        assert_eq!(
            run.stdout,
            run_gannet(&["completions", shell], &[]).stdout,
            "completions is completion's other name"
        );
        assert_eq!(run.code, 0, "{shell}: {run:?}");
        // Fish names a long option `-l server`, the others `--server`.
        for word in [
            "rollback",
            "deployments",
            "pause",
            "server",
            "token",
            "wait",
            "retry-for",
        ] {
            assert!(run.stdout.contains(word), "{shell} completions lack {word}");
        }
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gannet.bash");
    std::fs::write(&path, run_gannet(&["completions", "bash"], &[]).stdout).expect("write");
    let check = Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .expect("bash");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let run = run_gannet(&["completions", "tcsh"], &[]);
    assert_eq!(run.code, 2, "{run:?}");
}

/// Completion asks the server for names: `gannet __complete` lists app names and deployment
/// ids (for the word after a command line with `next`), and bash's script completes them.
#[test]
fn completion_names_apps_and_deployments_from_the_server() {
    let (_repo, _state, g, id) = deployed_web(OK);
    let run = g.cli_env(&["__complete", "apps"], &[]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "web\n"), "{run:?}");
    let run = g.cli_env(&["__complete", "deployments"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.lines().any(|l| l == id), "{run:?}");
    for (line, names) in [
        (vec!["gannet", "sync"], "web\n".to_owned()),
        (
            vec!["gannet", "deployments", "watch", "--app"],
            "web\n".to_owned(),
        ),
        (vec!["gannet", "approve"], format!("{id}\n")),
        (vec!["gannet", "apps"], String::new()),
        (vec!["gannet", "sync", "web"], String::new()),
    ] {
        let mut args = vec!["__complete", "next", "--"];
        args.extend(&line);
        let run = g.cli_env(&args, &[]);
        assert_eq!(run.code, 0, "{line:?}: {run:?}");
        assert_eq!(run.stdout, names, "{line:?}");
    }
    // The --server typed on the line wins over $GANNET_SERVER.
    let nowhere = format!("http://127.0.0.1:{}", support::free_port());
    let run = run_gannet(
        &[
            "__complete",
            "next",
            "--",
            "gannet",
            "--server",
            &g.url,
            "apps",
            "show",
        ],
        &[("GANNET_SERVER", &nowhere), ("GANNET_TOKEN", ADMIN_TOKEN)],
    );
    assert_eq!(run.stdout, "web\n", "{run:?}");

    // bash, for real: the script sourced, then Tab after a partial word (bash calls the
    // function with the command, the word and the word before).
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("gannet.bash");
    std::fs::write(&script, run_gannet(&["completion", "bash"], &[]).stdout).expect("write");
    let complete = |words: &str, current: usize| -> Vec<String> {
        let program = format!(
            "source {}; COMP_WORDS=({} {words}); COMP_CWORD={current}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; _gannet_with_names \"${{COMP_WORDS[0]}}\" \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            gannet_bin()
        );
        let out = Command::new("bash")
            .args(["-c", &program])
            .env("GANNET_SERVER", &g.url)
            .env("GANNET_TOKEN", ADMIN_TOKEN)
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(complete("apps show w", 3), ["web"]);
    assert_eq!(complete("apps show x", 3), Vec::<String>::new());
    assert_eq!(
        complete(&format!("deployments logs {}", &id[..6]), 3),
        [id.as_str()]
    );
    assert_eq!(complete("rollback web --to ''", 4), [id.as_str()]);
    // Elsewhere, clap's completion of commands and flags.
    assert_eq!(complete("deployme", 1), ["deployments"]);
    assert!(complete("sync web --wa", 3).contains(&"--wait".to_owned()));
}

/// `webhook push --wait` waits for what the push deploys, app by app, with the exit codes of
/// `sync --wait`: 0 when each app's deployment of the commit ends SUCCESS (or the commit
/// deploys nothing of it), 3 when one ends FAILURE, 5 when one outlasts --timeout.
#[test]
fn webhook_push_wait_waits_for_every_app_the_push_deploys() {
    const API: &str = "apps/api/app.pipecd.yaml";
    let repo = Repo::new();
    let first = repo.commit(
        &[
            (CONFIG, &app_config("web", OK)),
            (API, &app_config("api", OK)),
        ],
        "web and api",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &support::UpOptions::default());
    let first_deployments = || {
        g.deployments()
            .into_iter()
            .filter(|d| d["commit"] == first.as_str())
            .collect::<Vec<_>>()
    };
    g.wait_until(LIMIT, "web and api deploy", || {
        let ds = first_deployments();
        (ds.len() == 2 && ds.iter().all(|d| d["status"] == "SUCCESS")).then_some(())
    });
    g.wait_unlocked("web", LIMIT);
    g.wait_unlocked("api", LIMIT);

    // A viewer's token is enough to wait.
    let push_and_wait = |files: &[(&str, &str)], message: &str, timeout: &str| {
        let head = repo.commit(files, message);
        let out = Command::new(gannet_bin())
            .args([
                "webhook",
                "push",
                "--repo",
                support::GITHUB,
                "--after",
                "HEAD",
            ])
            .args([
                "--secret-env",
                "GANNET_E2E_SECRET",
                "--wait",
                "--timeout",
                timeout,
            ])
            .env("GANNET_SERVER", &g.url)
            .env("GANNET_TOKEN", token_of("vic"))
            .env("GANNET_E2E_SECRET", support::SECRET)
            .current_dir(repo.path())
            .output()
            .expect("gannet runs");
        let run = CliRun {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        (head, run)
    };

    // Both apps change; api's deployment fails: 3, once both have ended.
    let good = app_config("web", &OK.replace("waited-ok", "pushed-and-waited"));
    let (head, run) = push_and_wait(
        &[(CONFIG, &good), (API, &app_config("api", BAD))],
        "web and a broken api",
        "60s",
    );
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("ended SUCCESS"), "web's: {run:?}");
    assert!(run.stderr.contains("ended FAILURE"), "api's: {run:?}");
    let ended: Vec<String> = g
        .deployments()
        .into_iter()
        .filter(|d| d["commit"] == head.as_str())
        .map(|d| d["status"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert!(
        ended.iter().all(|s| s == "SUCCESS" || s == "FAILURE"),
        "{ended:?}"
    );
    g.wait_unlocked("api", LIMIT);

    // Only web changes: web's deployment succeeds and api has nothing to deploy: 0.
    let good = app_config("web", &OK.replace("waited-ok", "pushed-again"));
    let (_, run) = push_and_wait(&[(CONFIG, &good)], "web alone", "60s");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("ended SUCCESS"), "{run:?}");
    assert!(run.stderr.contains("does not deploy api"), "{run:?}");
    g.wait_unlocked("web", LIMIT);

    // Slower than --timeout: 5, and the deployment goes on.
    let (head, run) = push_and_wait(
        &[(CONFIG, &app_config("web", &wait_stage(20)))],
        "slow web",
        "2s",
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("gave up after"), "{run:?}");
    let slow = g.deployment_of(&head, LIMIT);
    let status = g.deployment(&slow)["status"].clone();
    assert!(
        !["SUCCESS", "FAILURE", "CANCELLED"].contains(&status.as_str().unwrap_or_default()),
        "{status}"
    );
    let (status, body) = g.post(
        &format!("/deployments/{slow}/cancel"),
        serde_json::json!({}),
    );
    assert_eq!(status, 200, "{body}");
}

/// A TLS front for `upstream` (127.0.0.1:`upstream`) on 127.0.0.1:`port` with `cert`/`key`: a
/// byte relay in Python's standard library, as a load balancer terminating HTTPS would be.
fn tls_front(dir: &std::path::Path, port: u16, upstream: u16) -> Child {
    let script = format!(
        r#"
import socket, ssl, threading
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain({cert:?}, {key:?})
server = socket.create_server(("127.0.0.1", {port}))
def pipe(a, b):
    try:
        while (data := a.recv(65536)):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
def serve(raw):
    try:
        tls = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close(); return
    up = socket.create_connection(("127.0.0.1", {upstream}))
    threading.Thread(target=pipe, args=(tls, up), daemon=True).start()
    pipe(up, tls)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"#,
        cert = dir.join("cert.pem").display().to_string(),
        key = dir.join("key.pem").display().to_string(),
    );
    Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs")
}

#[test]
fn the_cli_talks_https_checking_the_servers_certificate() {
    // A test CA and a certificate it signed for localhost.
    let dir = tempfile::tempdir().expect("tempdir");
    support::test_certificate(dir.path());

    let repo = Repo::new();
    let head = repo.commit(&[(CONFIG, &app_config("web", OK))], "add web");
    let state = tempfile::tempdir().expect("tempdir");
    let front = support::free_port();
    let g = Gannet::start_raw(
        state.path(),
        |port| {
            format!(
                "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\napi:\n  tokens: {{env: GANNET_E2E_TOKENS}}\n  hosts: [\"localhost:{front}\"]\nrepos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: deploy\n    github: {}\nintervals: {{poll: 1m, resume: 1s}}\n",
                repo.path().display(),
                support::GITHUB
            )
        },
        &[],
    );
    g.wait_terminal(&g.deployment_of(&head, LIMIT), LIMIT);
    let upstream: u16 = g
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let _front = KillOnDrop(tls_front(dir.path(), front, upstream));
    let url = format!("https://localhost:{front}");
    let cert = dir.path().join("ca.pem");
    let cert = cert.to_str().expect("path");
    let run = g.wait_until(LIMIT, "the TLS front answers", || {
        let run = run_gannet(
            &["apps", "list", "--server", &url],
            &[("GANNET_TOKEN", ADMIN_TOKEN), ("SSL_CERT_FILE", cert)],
        );
        (run.code == 0).then_some(run)
    });
    assert!(run.stdout.contains("web"), "{run:?}");
    let run = run_gannet(
        &["sync", "web", "--wait", "--server", &url],
        &[("GANNET_TOKEN", ADMIN_TOKEN), ("SSL_CERT_FILE", cert)],
    );
    assert_eq!(run.code, 0, "{run:?}");

    // A certificate the client does not trust is refused, and said so (not "unreachable").
    let run = run_gannet(
        &["apps", "list", "--server", &url],
        &[("GANNET_TOKEN", ADMIN_TOKEN)],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("does not trust"), "{run:?}");
    assert!(run.stderr.contains("SSL_CERT_FILE"), "{run:?}");
}
