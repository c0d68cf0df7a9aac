//! End to end: GitHub webhooks into a real `gannet up`, and every bad-input row of DESIGN.md.

mod support;

use std::time::Duration;

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
        Some(&gannet_git::webhook::sign(
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
