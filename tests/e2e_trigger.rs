//! End to end: each commit is judged by its own changes. The trigger records the head it
//! checked an app at whether or not it deployed it (as PipeCD does), so a change the app
//! ignores does not stay in every later diff and block the app's next real change.

mod support;

use std::time::Duration;

use support::{Gannet, Repo, UpOptions};

const LIMIT: Duration = Duration::from_secs(20);

fn config(wait: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: hello\n  trigger:\n    onCommit:\n      ignores: [\"apps/hello/docs/**\"]\n  pipeline:\n    stages:\n      - name: WAIT\n        with: {{duration: {wait}}}\n"
    )
}

/// Pushes `head` and waits until gannet has judged it (every queue empty).
fn push(g: &Gannet, head: &str) {
    let (status, body) = g.push(head, &format!("delivery-{head}"));
    assert_eq!(status, 202, "{body}");
    g.wait_until(LIMIT, "the push is judged", || {
        (g.count("messages") == 0
            && g.stored_rows("repos")
                .iter()
                .any(|(_, body)| body.contains(head)))
        .then_some(())
    });
}

fn deployments_of(g: &Gannet, commit: &str) -> usize {
    g.deployments()
        .iter()
        .filter(|d| d["commit"] == commit)
        .count()
}

#[test]
fn an_ignored_change_does_not_block_the_next_change() {
    let repo = Repo::new();
    let first = repo.commit(
        &[("apps/hello/app.pipecd.yaml", &config("0s"))],
        "add hello",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deployment_of(&first, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    g.wait_idle(LIMIT);

    // Only an ignored file changes: nothing is deployed.
    let docs = repo.commit(&[("apps/hello/docs/notes.md", "notes")], "docs only");
    push(&g, &docs);
    assert_eq!(
        deployments_of(&g, &docs),
        0,
        "an ignored change deploys nothing"
    );

    // The app's own config changes: deployed, although the docs change is still in
    // `first..head`.
    let change = repo.commit(&[("apps/hello/app.pipecd.yaml", &config("1ms"))], "config");
    push(&g, &change);
    let id = g.deployment_of(&change, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    g.wait_idle(LIMIT);

    // An invalid config deploys nothing; the fix deploys.
    let broken = repo.commit(&[("apps/hello/app.pipecd.yaml", &config("soon"))], "broken");
    push(&g, &broken);
    assert_eq!(deployments_of(&g, &broken), 0);
    assert_eq!(g.app_view("hello")["sync_status"], "INVALID_CONFIG");
    let fixed = repo.commit(&[("apps/hello/app.pipecd.yaml", &config("2ms"))], "fixed");
    push(&g, &fixed);
    let id = g.deployment_of(&fixed, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");

    // A docs-only change after the fix still deploys nothing.
    let more_docs = repo.commit(&[("apps/hello/docs/more.md", "more")], "more docs");
    push(&g, &more_docs);
    assert_eq!(deployments_of(&g, &more_docs), 0);
}

/// The first scan of a repository: by default (`adopt`) every app found is taken as it runs,
/// nothing is deployed and the log says so per app; the next commit that changes an app
/// deploys it. With `onFirstSight: deploy` every app deploys at once, and the log says why.
#[test]
fn the_first_sight_of_a_repository_adopts_or_deploys_as_configured() {
    for mode in ["adopt", "deploy"] {
        let repo = Repo::new();
        let first = repo.commit(
            &[
                ("apps/hello/app.pipecd.yaml", &config("0s")),
                (
                    "apps/other/app.pipecd.yaml",
                    &config("0s").replace("hello", "other"),
                ),
            ],
            "add hello and other",
        );
        let state = tempfile::tempdir().expect("tempdir");
        let opts = UpOptions {
            on_first_sight: mode,
            ..UpOptions::default()
        };
        let g = Gannet::start(&repo, state.path(), &opts);
        g.wait_until(LIMIT, "the first scan is stored", || {
            (g.count("messages") == 0
                && g.stored_rows("repos")
                    .iter()
                    .any(|(_, body)| body.contains(&first)))
            .then_some(())
        });
        let log = g.log();
        let apps = g.get("/apps").1["apps"].clone();
        let names: Vec<&str> = apps
            .as_array()
            .expect("apps")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert_eq!(names.len(), 2, "{mode}: both apps are known: {apps}");
        if mode == "adopt" {
            assert_eq!(deployments_of(&g, &first), 0, "adopt deploys nothing");
            for app in ["hello", "other"] {
                assert!(
                    log.lines().any(|l| l.contains("adopted, not deployed")
                        && l.contains(&format!("app={app}"))),
                    "the log says {app} was adopted:\n{log}"
                );
            }
            // The next commit that changes hello deploys hello, and only hello.
            let next = repo.commit(
                &[("apps/hello/app.pipecd.yaml", &config("1s"))],
                "change hello",
            );
            push(&g, &next);
            let of_next: Vec<String> = g
                .deployments()
                .iter()
                .filter(|d| d["commit"] == next.as_str())
                .filter_map(|d| d["app"].as_str().map(str::to_owned))
                .collect();
            assert_eq!(of_next, ["hello"], "a change after adoption deploys");
        } else {
            for app in ["hello", "other"] {
                assert!(
                    log.lines().any(|l| l.contains("deployment triggered")
                        && l.contains(&format!("app={app}"))
                        && l.contains("onFirstSight: deploy")),
                    "the log says {app} deploys on first sight:\n{log}"
                );
            }
            assert_eq!(deployments_of(&g, &first), 2, "deploy deploys every app");
        }
    }
}
