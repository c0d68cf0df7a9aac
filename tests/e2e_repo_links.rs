//! End to end: a repository's symbolic links never lead gannet out of it. A chain of links,
//! each of which looks as if it stays inside the repository, reaches a file the test writes
//! outside it; drift, `GET /api/v1/apps/{app}/diff` (on a real `gannet up`) and
//! `gannet config check` each refuse it, naming the file and the field, and nothing anywhere
//! quotes the outside file. Absolute and climbing manifest paths are refused the same way.
//!
//! Every wait here is bounded, and the server is local.

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use support::{run_gannet, Gannet, Repo, UpOptions};

const LIMIT: Duration = Duration::from_secs(30);
const MARKER: &str = "gannet-e2e-outside-marker-7f3a: this line must never be quoted";

/// A Lambda app whose function manifest is `file`.
fn lambda(name: &str, file: &str) -> String {
    format!("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: {name}\n  input:\n    functionManifestFile: {file}\n")
}

/// Links under `dir` (relative to the repository `root`) that reach the filesystem's root:
/// `l0 -> ../..` is the repository's root, each `lN -> l(N-1)/../../..` reads (lexically) as
/// the repository's root too, but climbs three more directories; past `/` the kernel stays at
/// `/`. Returns the name of the last rung.
fn ladder(root: &Path, dir: &str) -> String {
    let at = root.join(dir);
    std::fs::create_dir_all(&at).expect("mkdir");
    symlink("../..", at.join("l0")).expect("symlink");
    for n in 1..12 {
        symlink(format!("l{}/../../..", n - 1), at.join(format!("l{n}"))).expect("symlink");
    }
    "l11".to_owned()
}

#[test]
fn a_chain_of_links_out_of_the_repository_is_refused_by_drift_diff_and_config_check() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        outside.path().join("function.yaml"),
        format!("{MARKER}\nname: stolen\n"),
    )
    .expect("write");
    let outside_rel = outside
        .path()
        .canonicalize()
        .expect("canonical")
        .strip_prefix("/")
        .expect("absolute")
        .to_owned();

    let repo = Repo::new();
    let top = ladder(repo.path(), "apps/linked");
    // `m` reads as `apps/linked/l11/<tmp>/...`: inside, lexically; really the outside dir.
    symlink(
        format!("{top}/{}", outside_rel.display()),
        repo.path().join("apps/linked/m"),
    )
    .expect("symlink");
    assert!(
        std::fs::read_to_string(repo.path().join("apps/linked/m/function.yaml"))
            .expect("the kernel follows the chain")
            .contains(MARKER),
        "the chain really reaches the outside file"
    );
    let absolute = outside.path().join("function.yaml");
    let head = repo.commit(
        &[
            (
                "apps/linked/app.pipecd.yaml",
                &lambda("linked", "m/function.yaml"),
            ),
            (
                "apps/absolute/app.pipecd.yaml",
                &lambda("absolute", &absolute.display().to_string()),
            ),
            (
                "apps/climbing/app.pipecd.yaml",
                &lambda(
                    "climbing",
                    "../../../../../../../../../../../../../etc/passwd",
                ),
            ),
        ],
        "apps whose manifests are outside",
    );

    // `gannet config check`, in the repository's work tree (where the kernel would follow).
    let check = run_gannet(
        &["config", "check", &repo.path().display().to_string()],
        &[],
    );
    let said = format!("{}{}", check.stdout, check.stderr);
    assert_ne!(check.code, 0, "{said}");
    assert!(
        !said.contains(MARKER),
        "config check quoted the outside file: {said}"
    );
    assert!(
        !said.contains("root:"),
        "config check quoted /etc/passwd: {said}"
    );
    for (app, why) in [
        ("linked", "leads outside the repository"),
        ("absolute", "is not a path inside the repository"),
        ("climbing", "is not a path inside the repository"),
    ] {
        let line = said
            .lines()
            .find(|l| l.contains(&format!("apps/{app}/app.pipecd.yaml")))
            .unwrap_or_else(|| panic!("no line for {app}: {said}"));
        assert!(
            line.contains("spec.input.functionManifestFile") && line.contains(why),
            "{app}: {line}"
        );
    }

    // A real `gannet up`: drift checks every second; the Lambda endpoint is never reached.
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        extra_config: "intervals: {poll: 1m, resume: 1s, drift: 1s}\nqueue: {visibility: 3s}\nplugins: {lambda: {deployTargets: [{name: local, region: us-east-1, endpoint: 'http://127.0.0.1:1'}]}}\n".into(),
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    let (status, body) = g.push(&head, "links");
    assert_eq!(status, 202, "{body}");
    // The checkout leaves out every link of the chain that leads out (and logs it), so the
    // manifest is not there; the checked reader would refuse it all the same.
    let refused = |text: &str| {
        text.contains("functionManifestFile")
            && (text.contains("does not exist") || text.contains("leads outside the repository"))
    };
    let app = g.wait_until(LIMIT, "drift judges the linked app", || {
        let (status, body) = g.get("/apps/linked");
        let reason = body["app"]["sync_reason"].as_str().unwrap_or_default();
        (status == 200 && body["app"]["sync_status"] == "INVALID_CONFIG" && refused(reason))
            .then(|| body.clone())
    });
    assert!(
        g.log()
            .contains("a symbolic link leaving the repository was left out of the checkout"),
        "{}",
        g.log()
    );

    let (status, diff) = g.get("/apps/linked/diff");
    assert_eq!(status, 409, "{diff}");
    let error = diff["error"].as_str().unwrap_or_default();
    assert!(refused(error), "{error}");

    let everything = format!(
        "{}{}{}{}{}{}",
        app,
        g.get("/apps").1,
        g.get("/apps/absolute").1,
        g.get("/apps/climbing").1,
        diff,
        g.log()
    );
    assert!(
        !everything.contains(MARKER),
        "the outside file leaked: {everything}"
    );
    assert!(
        !everything.contains("root:x:0"),
        "/etc/passwd leaked: {everything}"
    );
}
