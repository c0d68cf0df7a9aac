//! End to end: GitHub webhooks into a real `gannet up`, and every bad-input row of DESIGN.md.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{app_config, Gannet, Repo, UpOptions};

const QUICK: &str = "      - name: WAIT\n        with: {duration: 0s}\n";

#[test]
fn a_signed_push_deploys_and_ping_answers() {
    let repo = Repo::new();
    repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", QUICK))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());

    let (status, body) = g.hook(
        "ping",
        Some("p-1"),
        Some(&gannet_events::github::sign(
            support::SECRET.as_bytes(),
            b"{\"zen\":\"Keep it simple.\",\"hook_id\":1}",
        )),
        b"{\"zen\":\"Keep it simple.\",\"hook_id\":1}".to_vec(),
    );
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("pong")),
        "{body}"
    );

    let head = repo.head();
    let (status, body) = g.push(&head, "delivery-1");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&head, Duration::from_secs(20));
    let d = g.wait_terminal(&id, Duration::from_secs(30));
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(d["stages"][0]["status"], "SUCCESS", "{d}");
}

/// How a table row signs its body.
#[derive(Clone, Copy, Debug)]
enum Sig {
    /// Signed with the configured secret.
    Good,
    /// Signed with another secret.
    WrongSecret,
    /// Well formed, but signs other bytes.
    OtherBody,
    /// `sha256=` and garbage.
    Garbage,
    /// No header at all.
    Missing,
}

/// One webhook request of the bad-input table, and what gannet must answer.
struct Case {
    name: &'static str,
    event: Option<&'static str>,
    delivery: Option<&'static str>,
    sig: Sig,
    body: Vec<u8>,
    status: u16,
    /// The `status` field of the JSON answer (`None`: the answer need not be JSON).
    outcome: Option<&'static str>,
    /// A fragment of the `reason` field.
    reason: &'static str,
}

/// A push body, tweaked by `edit`.
fn push_with(after: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v: Value =
        serde_json::from_str(&support::push_payload(support::GITHUB, "main", after)).expect("json");
    edit(&mut v);
    v.to_string().into_bytes()
}

/// Sends one request exactly as the row describes; returns (status, JSON body or Null).
fn send(g: &Gannet, case: &Case) -> (u16, Value) {
    let secret = support::SECRET.as_bytes();
    let signature = match case.sig {
        Sig::Good => Some(gannet_events::github::sign(secret, &case.body)),
        Sig::WrongSecret => Some(gannet_events::github::sign(b"not-the-secret", &case.body)),
        Sig::OtherBody => Some(gannet_events::github::sign(secret, b"{}")),
        Sig::Garbage => Some("sha256=zz".to_owned()),
        Sig::Missing => None,
    };
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let mut req = client
        .post(format!("{}/hooks/github", g.url))
        .header("content-type", "application/json")
        .body(case.body.clone());
    if let Some(e) = case.event {
        req = req.header("x-github-event", e);
    }
    if let Some(d) = case.delivery {
        req = req.header("x-github-delivery", d);
    }
    if let Some(s) = signature {
        req = req.header("x-hub-signature-256", s);
    }
    let res = req
        .send()
        .unwrap_or_else(|e| panic!("{}: request failed: {e}", case.name));
    let status = res.status().as_u16();
    (status, res.json().unwrap_or(Value::Null))
}

/// Sends `case` and checks the answer and that nothing at all was stored.
fn check(g: &Gannet, case: &Case) {
    let before = g.stored();
    let (status, body) = send(g, case);
    assert_eq!(status, case.status, "{}: {body}", case.name);
    if let Some(outcome) = case.outcome {
        assert_eq!(body["status"], outcome, "{}: {body}", case.name);
    }
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(case.reason),
        "{}: reason {reason:?} lacks {:?}",
        case.name,
        case.reason
    );
    assert_eq!(g.stored(), before, "{}: something was stored", case.name);
}

#[test]
fn every_bad_webhook_is_answered_and_stores_nothing() {
    let repo = Repo::new();
    repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", QUICK))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    // The poll at start deploys the first head; let it finish so the state is still.
    let first = g.deployment_of(&repo.head(), Duration::from_secs(20));
    assert_eq!(
        g.wait_terminal(&first, Duration::from_secs(20))["status"],
        "SUCCESS"
    );
    g.wait_idle(Duration::from_secs(10));
    // A new head that any wrongly queued trigger would deploy.
    let head = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config("web", &QUICK.replace("0s", "1ms")),
        )],
        "change web",
    );
    let push = push_with(&head, |_| {});
    let over_limit = |size: usize| {
        let mut body = b"{\"pad\":\"".to_vec();
        body.resize(size - 2, b'x');
        body.extend_from_slice(b"\"}");
        body
    };
    const MB: usize = 1024 * 1024;
    let cases = [
        Case {
            name: "bad signature (other secret)",
            event: Some("push"),
            delivery: Some("bad-1"),
            sig: Sig::WrongSecret,
            body: push.clone(),
            status: 401,
            outcome: Some("rejected"),
            reason: "does not match",
        },
        Case {
            name: "signature of another body",
            event: Some("push"),
            delivery: Some("bad-2"),
            sig: Sig::OtherBody,
            body: push.clone(),
            status: 401,
            outcome: Some("rejected"),
            reason: "does not match",
        },
        Case {
            name: "malformed signature",
            event: Some("push"),
            delivery: Some("bad-3"),
            sig: Sig::Garbage,
            body: push.clone(),
            status: 401,
            outcome: Some("rejected"),
            reason: "malformed",
        },
        Case {
            name: "missing signature",
            event: Some("push"),
            delivery: Some("bad-4"),
            sig: Sig::Missing,
            body: push.clone(),
            status: 401,
            outcome: Some("rejected"),
            reason: "missing",
        },
        Case {
            name: "malformed JSON, correctly signed",
            event: Some("push"),
            delivery: Some("bad-5"),
            sig: Sig::Good,
            body: b"{\"ref\": \"refs/heads/main\", ".to_vec(),
            status: 400,
            outcome: Some("rejected"),
            reason: "malformed push payload",
        },
        Case {
            name: "push whose after is not a commit",
            event: Some("push"),
            delivery: Some("bad-6"),
            sig: Sig::Good,
            body: push_with(&head, |v| v["after"] = "not-a-sha".into()),
            status: 400,
            outcome: Some("rejected"),
            reason: "after",
        },
        Case {
            name: "body one byte over 25 MB",
            event: Some("push"),
            delivery: Some("bad-7"),
            sig: Sig::Good,
            body: over_limit(25 * MB + 1),
            status: 413,
            outcome: Some("rejected"),
            reason: "25 MB",
        },
        Case {
            name: "body of 26 MB",
            event: Some("push"),
            delivery: Some("bad-8"),
            sig: Sig::Good,
            body: over_limit(26 * MB),
            status: 413,
            outcome: Some("rejected"),
            reason: "25 MB",
        },
        Case {
            name: "missing X-GitHub-Event",
            event: None,
            delivery: Some("bad-9"),
            sig: Sig::Good,
            body: push.clone(),
            status: 400,
            outcome: Some("rejected"),
            reason: "X-GitHub-Event",
        },
        Case {
            name: "unhandled event type",
            event: Some("issues"),
            delivery: Some("bad-10"),
            sig: Sig::Good,
            body: br#"{"action":"opened","issue":{"number":1}}"#.to_vec(),
            status: 202,
            outcome: Some("ignored"),
            reason: "event issues is not handled",
        },
        Case {
            name: "tag push",
            event: Some("push"),
            delivery: Some("bad-11"),
            sig: Sig::Good,
            body: push_with(&head, |v| v["ref"] = "refs/tags/v1".into()),
            status: 202,
            outcome: Some("ignored"),
            reason: "tag push",
        },
        Case {
            name: "branch delete",
            event: Some("push"),
            delivery: Some("bad-12"),
            sig: Sig::Good,
            body: push_with(&head, |v| {
                v["deleted"] = true.into();
                v["before"] = head.clone().into();
                v["after"] = "0".repeat(40).into();
                v["head_commit"] = Value::Null;
            }),
            status: 202,
            outcome: Some("ignored"),
            reason: "branch deleted",
        },
        Case {
            name: "repository not in the config",
            event: Some("push"),
            delivery: Some("bad-13"),
            sig: Sig::Good,
            body: support::push_payload("acme/other", "main", &head).into_bytes(),
            status: 202,
            outcome: Some("ignored"),
            reason: "repository acme/other is not configured",
        },
        Case {
            name: "push to another branch",
            event: Some("push"),
            delivery: Some("bad-14"),
            sig: Sig::Good,
            body: support::push_payload(support::GITHUB, "dev", &head).into_bytes(),
            status: 202,
            outcome: Some("ignored"),
            reason: "branch dev is not watched",
        },
        Case {
            name: "missing X-GitHub-Delivery",
            event: Some("push"),
            delivery: None,
            sig: Sig::Good,
            body: push.clone(),
            status: 400,
            outcome: Some("rejected"),
            reason: "X-GitHub-Delivery",
        },
        Case {
            name: "empty X-GitHub-Delivery",
            event: Some("push"),
            delivery: Some(""),
            sig: Sig::Good,
            body: push.clone(),
            status: 400,
            outcome: Some("rejected"),
            reason: "X-GitHub-Delivery",
        },
        Case {
            name: "ping",
            event: Some("ping"),
            delivery: Some("ping-1"),
            sig: Sig::Good,
            body: br#"{"zen":"Design for failure.","hook_id":7}"#.to_vec(),
            status: 200,
            outcome: Some("pong"),
            reason: "",
        },
    ];
    for case in &cases {
        check(&g, case);
    }
    // Had any refused request queued a trigger, the new head would now be deploying.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        g.deployments().iter().all(|d| d["commit"] != head.as_str()),
        "a refused webhook deployed {head}"
    );

    // The same push, properly sent, deploys the head exactly once however often it is repeated.
    let (status, body) = g.push(&head, "dup-1");
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("queued")),
        "{body}"
    );
    let id = g.deployment_of(&head, Duration::from_secs(20));
    for _ in 0..3 {
        let (status, body) = g.push(&head, "dup-1");
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("duplicate")),
            "{body}"
        );
        assert!(
            body["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("dup-1"),
            "{body}"
        );
    }
    assert_eq!(
        g.wait_terminal(&id, Duration::from_secs(20))["status"],
        "SUCCESS"
    );
    g.wait_idle(Duration::from_secs(10));
    let stored = g.stored();
    assert_eq!(stored.deliveries, vec!["dup-1".to_owned()]);
    assert_eq!(stored.deployments.len(), 2, "{stored:?}");
    assert_eq!(stored.dead_letters, 0);
}

#[test]
fn without_a_webhook_section_pushes_are_refused_and_nothing_is_stored() {
    let repo = Repo::new();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", QUICK))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let repo_path = repo.path().display().to_string();
    let g = Gannet::start_raw(
        state.path(),
        |port| {
            format!(
                "listen: 127.0.0.1:{port}\nstate: state/gannet.db\n{}repos:\n  - id: shop\n    path: {repo_path}\n    onFirstSight: deploy\n    github: {}\nintervals: {{poll: 1h, resume: 1s}}\n",
                support::API_CONFIG,
                support::GITHUB
            )
        },
        &[],
    );
    // The poll at start still deploys: only the webhook is closed.
    let first = g.deployment_of(&head, Duration::from_secs(20));
    g.wait_terminal(&first, Duration::from_secs(20));
    g.wait_idle(Duration::from_secs(10));
    let next = repo.commit(&[("apps/web/README", "x")], "touch web");
    let push = push_with(&next, |_| {});
    for (name, sig) in [("signed", Sig::Good), ("unsigned", Sig::Missing)] {
        check(
            &g,
            &Case {
                name,
                event: Some("push"),
                delivery: Some("no-secret-1"),
                sig,
                body: push.clone(),
                status: 401,
                outcome: Some("rejected"),
                reason: "no webhook secret is configured",
            },
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(g.stored().deliveries.is_empty());
    assert!(g.deployments().iter().all(|d| d["commit"] != next.as_str()));
}

/// Deploys the web app once and waits until everything it queued is done.
fn deployed(repo: &Repo, g: &Gannet) -> String {
    let id = g.deployment_of(&repo.head(), Duration::from_secs(20));
    assert_eq!(
        g.wait_terminal(&id, Duration::from_secs(20))["status"],
        "SUCCESS"
    );
    g.wait_idle(Duration::from_secs(10));
    id
}

#[test]
fn undecodable_queue_messages_are_dead_lettered_and_nothing_else_is_affected() {
    let repo = Repo::new();
    repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", QUICK))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let mut g = Gannet::start(&repo, state.path(), &UpOptions::default());
    deployed(&repo, &g);
    let before = g.stored();

    // (queue, body, what the reason must say)
    let garbage = [
        ("stage", "not json", "message is not JSON"),
        (
            "plan",
            r#"{"v":99,"type":"plan","app":"shop:a"}"#,
            "version 99 is not supported",
        ),
        ("trigger", r#"{"v":1,"type":"explode"}"#, "does not decode"),
        ("notify", r#"{"v":1,"type":"notify"}"#, "does not decode"),
    ];
    g.kill();
    {
        let db = g.db_rw();
        for (queue, body, _) in garbage {
            db.execute(
                "INSERT INTO messages (queue, body, visible_at, attempts, sent_at) VALUES (?1, ?2, 0, 0, 0)",
                [queue, body],
            )
            .expect("insert garbage");
        }
    }
    let g = g.restart();
    g.wait_until(
        Duration::from_secs(20),
        "every garbage message is dead-lettered",
        || (g.count("dead_letters") == garbage.len() as i64).then_some(()),
    );
    g.wait_idle(Duration::from_secs(10));
    let db = g.db();
    for (queue, body, reason) in garbage {
        let (stored_reason, attempts): (String, i64) = db
            .query_row(
                "SELECT reason, attempts FROM dead_letters WHERE queue = ?1 AND body = ?2",
                [queue, body],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap_or_else(|e| panic!("no dead letter for {queue} {body}: {e}"));
        assert!(
            stored_reason.contains("cannot decode message") && stored_reason.contains(reason),
            "{queue}: {stored_reason}"
        );
        assert_eq!(attempts, 1, "{queue}: dead-lettered at once, never retried");
    }
    let after = g.stored();
    assert_eq!(
        (
            &after.deployments,
            &after.apps,
            &after.repos,
            &after.deliveries
        ),
        (
            &before.deployments,
            &before.apps,
            &before.repos,
            &before.deliveries
        ),
        "garbage changed the state"
    );
    assert!(g.log().contains("message dead-lettered"), "{}", g.log());

    // The pipeline still works.
    let head = repo.commit(&[("apps/web/README", "after garbage")], "touch web");
    assert_eq!(g.push(&head, "after-garbage").0, 202);
    let id = g.deployment_of(&head, Duration::from_secs(20));
    assert_eq!(
        g.wait_terminal(&id, Duration::from_secs(20))["status"],
        "SUCCESS"
    );
}

#[test]
fn the_webhook_secret_never_appears_in_logs_stage_logs_api_output_or_state() {
    let stages = "      - name: SCRIPT_RUN\n        with:\n          run: |\n            echo \"deploying $SR_APPLICATION_NAME\"\n            echo \"to stderr\" >&2\n            env\n          onRollback: echo rollback\n";
    let repo = Repo::new();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        env: vec![("GANNET_LOG".into(), "debug".into())],
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    let id = deployed(&repo, &g);
    // Refused and accepted webhooks, so their log lines are in the log too.
    let (status, _) = g.hook(
        "push",
        Some("refused"),
        Some("sha256=00"),
        support::push_payload(support::GITHUB, "main", &head).into_bytes(),
    );
    assert_eq!(status, 401);
    assert_eq!(g.push(&head, "accepted").0, 202);
    g.wait_idle(Duration::from_secs(10));

    let mut outputs: Vec<(String, String)> = vec![("gannet log".into(), g.log())];
    for path in [
        "/apps".to_owned(),
        "/apps/web".to_owned(),
        "/deployments".to_owned(),
        format!("/deployments/{id}"),
    ] {
        let (status, body) = g.get(&path);
        assert_eq!(status, 200, "{path}: {body}");
        outputs.push((format!("GET {path}"), body.to_string()));
    }
    let d = g.deployment(&id);
    let mut stage_text = String::new();
    for s in d["stages"].as_array().expect("stages") {
        let sid = s["id"].as_str().expect("id");
        let (status, body) = g.get(&format!("/deployments/{id}/stages/{sid}/logs"));
        assert_eq!(status, 200, "{body}");
        stage_text.push_str(&body.to_string());
    }
    assert!(
        stage_text.contains("deploying web")
            && stage_text.contains("to stderr")
            && stage_text.contains("SR_APPLICATION_NAME=web"),
        "the script's output, its whole environment included, was logged: {stage_text}"
    );
    outputs.push(("stage logs".into(), stage_text));
    for args in [
        vec!["apps", "list", "--json"],
        vec!["deployments", "show", &id],
        vec!["deployments", "logs", &id],
    ] {
        let run = g.cli_env(&args, &[]);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        outputs.push((format!("gannet {args:?}"), run.stdout + &run.stderr));
    }
    for file in ["state/gannet.db", "state/gannet.db-wal", "gannet.yaml"] {
        let bytes = std::fs::read(state.path().join(file)).unwrap_or_default();
        outputs.push((file.into(), String::from_utf8_lossy(&bytes).into_owned()));
    }
    for (what, text) in &outputs {
        assert!(
            !text.is_empty() || what.ends_with("-wal"),
            "{what} is empty; the check would prove nothing"
        );
        assert!(
            !text.contains(support::SECRET),
            "the webhook secret appears in {what}"
        );
    }
}

#[test]
fn gannet_up_started_with_a_relative_config_deploys() {
    // As a user runs it: `gannet up --config gannet.yaml` in the config's directory, where the
    // state path is relative too. The stage needs a checkout of the commit.
    let stages = "      - name: SCRIPT_RUN\n        with:\n          run: echo ran in $(pwd)\n";
    let repo = Repo::new();
    repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start_in_dir(&repo, state.path(), &UpOptions::default());
    let head = repo.head();
    let id = g.deployment_of(&head, Duration::from_secs(20));
    let d = g.wait_terminal(&id, Duration::from_secs(30));
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
}
