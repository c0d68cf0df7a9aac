//! Who links the web console: only the binaries that serve it, `gannet` and the api function.
//! Every other crate, the webhook function's first, builds without the bundle and so without
//! Node.js (the bundle is built outside cargo, by `make console`). Read with `cargo tree`.

use std::collections::BTreeSet;
use std::process::Command;

/// The packages `cargo tree` prints (one per line, `--prefix none`) for `args`, over the normal
/// and build dependencies of the shipped code.
fn tree(args: &[&str]) -> BTreeSet<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let output = Command::new(env!("CARGO"))
        .current_dir(root)
        .args([
            "tree",
            "--offline",
            "--edges",
            "normal,build",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}"])
        .args(args)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn only_the_cli_and_the_functions_for_their_api_binary_depend_on_the_console() {
    let dependents = tree(&["--workspace", "--invert", "gannet-console", "--depth", "1"]);
    assert_eq!(
        dependents,
        BTreeSet::from(["gannet-console", "gannet-cli", "gannet-functions"].map(String::from)),
    );
}

#[test]
fn the_functions_without_their_console_feature_and_the_controller_build_without_it() {
    for args in [
        &["--package", "gannet-functions", "--no-default-features"][..],
        &["--package", "gannet-controller"][..],
    ] {
        let packages = tree(args);
        assert!(
            packages.contains(args[1]),
            "cargo tree {args:?} lists the package itself: {packages:?}"
        );
        assert!(
            !packages.contains("gannet-console"),
            "cargo tree {args:?} depends on gannet-console"
        );
    }
}
