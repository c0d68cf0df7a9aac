//! Fixtures for tests of configs: where PipeCD's example configs are, and a YAML bomb.

use std::path::PathBuf;

/// Where PipeCD's example configs are (the compatibility corpus): `$GANNET_PIPECD_EXAMPLES`, or
/// `shared/pipecd-examples` in the folder that holds the checkout. `None` when they are not
/// there, so a fresh clone's tests pass without them; `make test` says in one line that the
/// compatibility suite was skipped. With `GANNET_REQUIRE_PIPECD_EXAMPLES` set (CI), a missing
/// corpus is a failure.
pub fn pipecd_examples() -> Option<PathBuf> {
    let dir = std::env::var_os("GANNET_PIPECD_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This crate is <checkout>/shared/config; the corpus sits beside <checkout>.
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pipecd-examples")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("GANNET_REQUIRE_PIPECD_EXAMPLES").is_none(),
        "PipeCD's examples are required (GANNET_REQUIRE_PIPECD_EXAMPLES) but missing at {}; set GANNET_PIPECD_EXAMPLES to their directory",
        dir.display()
    );
    None
}

/// A billion-laughs YAML document: `levels` anchors, each a list of ten aliases of the one
/// before, so it expands to 10^`levels` scalars. Every line is at the top level, so it can be
/// indented under any key.
pub fn yaml_bomb(levels: usize) -> String {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..levels {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text
}
