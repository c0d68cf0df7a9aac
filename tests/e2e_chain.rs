//! End to end on `gannet up`: a deployment chain (PipeCD's `postSync.chain` and
//! `trigger.onChain`) over real HTTP and a real git repository. Three apps deploy in order;
//! a failure in the middle stops the chain, says where, and leaves the last app alone;
//! cancelling a chain cancels its deployment under way; `gannet chains` shows each.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{app_config, Gannet, Repo, UpOptions};

const LIMIT: Duration = Duration::from_secs(60);

/// An app (`kind: Application`, pipeline only) whose one stage runs `script`, deployable by
/// a chain.
fn chained(name: &str, stage: &str) -> String {
    format!(
        "{}  trigger:\n    onChain:\n      disabled: false\n",
        app_config(name, stage)
    )
}

fn script(run: &str) -> String {
    format!("      - name: SCRIPT_RUN\n        with: {{run: \"{run}\"}}\n")
}

/// `head`, which chains `one` then `two` (by name), and the two chained apps.
fn apps(one_stage: &str) -> Vec<(String, String)> {
    let head = format!(
        "{}  postSync:\n    chain:\n      applications:\n        - name: one\n        - name: two\n",
        app_config("head", &script("echo head"))
    );
    vec![
        ("apps/head/app.pipecd.yaml".into(), head),
        ("apps/one/app.pipecd.yaml".into(), chained("one", one_stage)),
        (
            "apps/two/app.pipecd.yaml".into(),
            chained("two", &script("echo two")),
        ),
    ]
}

fn commit(repo: &Repo, files: &[(String, String)], message: &str) -> String {
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.commit(&files, message)
}

/// Syncs `head` and returns its deployment's id, ended SUCCESS.
fn sync_head(g: &Gannet, key: &str) -> String {
    let (status, body) = g.post("/apps/head/sync", json!({ "key": key }));
    assert_eq!(status, 200, "{body}");
    let id = body["deployment"]["id"].as_str().expect("id").to_owned();
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    id
}

/// The chain `first` started, once it has ended.
fn chain_ended(g: &Gannet, first: &str) -> Value {
    g.wait_until(LIMIT, "the chain to end", || {
        let (status, body) = g.get(&format!("/chains/{first}"));
        (status == 200 && body["chain"]["status"] != "RUNNING").then_some(body["chain"].clone())
    })
}

/// The deployments of `app` a chain started.
fn chained_deployments(g: &Gannet, app: &str) -> Vec<Value> {
    let (_, body) = g.get(&format!("/deployments?app={app}"));
    body["deployments"]
        .as_array()
        .expect("deployments")
        .iter()
        .filter(|d| d["trigger"] == "ON_CHAIN")
        .cloned()
        .collect()
}

fn node(chain: &Value, block: usize, index: usize) -> &Value {
    &chain["blocks"][block]["nodes"][index]
}

#[test]
fn a_chain_deploys_in_order_stops_at_a_failure_and_cancels_what_is_under_way() {
    let repo = Repo::new();
    commit(&repo, &apps(&script("echo one")), "three apps");
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        on_first_sight: "adopt",
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    g.wait_until(LIMIT, "the apps to be found", || {
        let (_, body) = g.get("/apps");
        (body["apps"].as_array().map_or(0, Vec::len) == 3).then_some(())
    });

    // Three apps, in order: head, then one, then two.
    let first = sync_head(&g, "chain-1");
    let chain = chain_ended(&g, &first);
    assert_eq!(chain["status"], "SUCCESS", "{chain}");
    assert_eq!(chain["first"], first.as_str());
    assert_eq!(chain["blocks"].as_array().map(Vec::len), Some(3));
    let one = chained_deployments(&g, "one");
    let two = chained_deployments(&g, "two");
    assert_eq!((one.len(), two.len()), (1, 1), "one deployment each");
    assert_eq!(node(&chain, 1, 0)["deployment"], one[0]["id"]);
    assert_eq!(node(&chain, 2, 0)["deployment"], two[0]["id"]);
    // Block 2 started only after block 1 had ended.
    let one_done = one[0]["completed_at"].as_str().expect("one ended");
    let two_made = two[0]["created_at"].as_str().expect("two created");
    assert!(
        one_done <= two_made,
        "one ended {one_done}, two began {two_made}"
    );

    // A failure in the middle: `one` fails, the chain says so, `two` is not deployed.
    commit(&repo, &apps(&script("echo broken; exit 3")), "break one");
    let second = sync_head(&g, "chain-2");
    let chain = chain_ended(&g, &second);
    assert_eq!(chain["status"], "FAILURE", "{chain}");
    let reason = chain["status_reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("block 1 (name one) failed: one (deployment "),
        "{reason}"
    );
    assert_eq!(node(&chain, 1, 0)["status"], "FAILURE");
    assert_eq!(chain["blocks"][2]["status"], "CANCELLED");
    assert_eq!(node(&chain, 2, 0)["status"], "CANCELLED");
    assert!(node(&chain, 2, 0).get("deployment").is_none(), "{chain}");
    assert_eq!(
        chained_deployments(&g, "two").len(),
        1,
        "two did not deploy again"
    );

    // The CLI lists both and shows the failed one block by block.
    let (code, out) = g.cli(&["chains", "list"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("FAILURE") && out.contains("SUCCESS"), "{out}");
    let (code, out) = g.cli(&["chains", "show", &second]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Block 1: name one  FAILURE"), "{out}");
    assert!(out.contains("Block 2: name two  CANCELLED"), "{out}");

    // The console shows it block by block, and lists it (in Chromium).
    let expect = json!({
        "status": "FAILURE",
        "reason": "block 1 (name one) failed",
        "blocks": ["SUCCESS", "FAILURE", "CANCELLED"],
        "nodes": {"head": "SUCCESS", "one": "FAILURE", "two": "CANCELLED"},
    });
    let run =
        support::console_scenario(&g, "chain", support::ADMIN_TOKEN, "head", &second, &expect);
    assert_eq!(run.code, 0, "{run:?}");

    // Cancel: `one` waits for an approval; cancelling the chain cancels it, and `two` never
    // deploys.
    let approval = "      - name: WAIT_APPROVAL\n        with: {approvers: [nobody]}\n";
    commit(&repo, &apps(approval), "one waits");
    let third = sync_head(&g, "chain-3");
    let waiting = g.wait_until(LIMIT, "one to wait for its approval", || {
        chained_deployments(&g, "one")
            .into_iter()
            .find(|d| d["status"] == "RUNNING")
    });
    let (code, out) = g.cli(&["chains", "cancel", &third]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("cancelled"), "{out}");
    let id = waiting["id"].as_str().expect("id");
    let d = g.wait_terminal(id, LIMIT);
    assert_eq!(d["status"], "CANCELLED", "{d}");
    let chain = chain_ended(&g, &third);
    assert_eq!(chain["status"], "CANCELLED", "{chain}");
    assert_eq!(chain["cancelled_by"], "admin");
    assert_eq!(node(&chain, 1, 0)["status"], "CANCELLED");
    assert_eq!(chained_deployments(&g, "two").len(), 1);
    // Once ended, it cannot be cancelled again.
    let (status, body) = g.post(&format!("/chains/{third}/cancel"), json!({}));
    assert_eq!(status, 409, "{body}");
    // A viewer cannot cancel a chain; an unknown one is not found.
    let (status, body) = g.post_as(
        support::token_of("vic"),
        &format!("/chains/{third}/cancel"),
        json!({}),
    );
    assert_eq!(status, 403, "{body}");
    let (status, _) = g.get("/chains/c-nope");
    assert_eq!(status, 404);
}

/// A crash in the middle of a chain loses nothing: `gannet up` is SIGKILLed while block 1's
/// app waits for an approval; after a restart the approval lets it finish, block 2 starts,
/// the chain ends SUCCESS, and each app was deployed by the chain exactly once.
#[test]
fn a_chain_killed_in_the_middle_resumes_after_a_restart_and_deploys_each_app_once() {
    let repo = Repo::new();
    let approval = "      - name: WAIT_APPROVAL\n        with: {approvers: [admin]}\n";
    commit(&repo, &apps(approval), "one waits for an approval");
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        on_first_sight: "adopt",
        ..UpOptions::default()
    };
    let mut g = Gannet::start(&repo, state.path(), &opts);
    g.wait_until(LIMIT, "the apps to be found", || {
        let (_, body) = g.get("/apps");
        (body["apps"].as_array().map_or(0, Vec::len) == 3).then_some(())
    });
    let first = sync_head(&g, "crash-1");
    let waiting = g.wait_until(LIMIT, "one to wait for its approval", || {
        chained_deployments(&g, "one")
            .into_iter()
            .find(|d| d["status"] == "RUNNING")
    });
    g.kill();
    let g = g.restart();
    let id = waiting["id"].as_str().expect("id");
    let (status, body) = g.post(&format!("/deployments/{id}/approve"), json!({}));
    assert_eq!(status, 200, "{body}");
    let chain = chain_ended(&g, &first);
    assert_eq!(chain["status"], "SUCCESS", "{chain}");
    for app in ["one", "two"] {
        let deployed = chained_deployments(&g, app);
        assert_eq!(deployed.len(), 1, "{app}: {deployed:?}");
        assert_eq!(deployed[0]["status"], "SUCCESS", "{app}");
    }
}
