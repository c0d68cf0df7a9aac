//! Bundles the web console (`console/` at the workspace root) with `scripts/console.sh build`
//! into OUT_DIR and writes the table of its files that `src/lib.rs` embeds. Needs Node.js and
//! npm; `scripts/console.sh` installs the pinned packages (npm ci) when they are missing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let dist = out.join("console");
    for input in [
        "console/src",
        "console/build.mjs",
        "console/package.json",
        "console/package-lock.json",
        "console/tsconfig.json",
        "scripts/console.sh",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    // A bundle built elsewhere (`scripts/console.sh build DIR`), for a build machine without
    // Node.js.
    println!("cargo:rerun-if-env-changed=GANNET_CONSOLE_DIST");
    if let Some(prebuilt) = std::env::var_os("GANNET_CONSOLE_DIST") {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        std::fs::write(out.join("assets.rs"), table(&prebuilt)).expect("write assets.rs");
        return;
    }
    let script = root.join("scripts/console.sh");
    let status = Command::new("bash")
        .arg(&script)
        .arg("build")
        .arg(&dist)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        status.success(),
        "{} build failed ({status}); its messages are above. The console needs Node.js and npm \
         (or set GANNET_CONSOLE_DIST to a bundle built with `scripts/console.sh build DIR`).",
        script.display()
    );
    std::fs::write(out.join("assets.rs"), table(&dist)).expect("write assets.rs");
}

/// `ASSETS`: every file of the bundle with its content type and an entity tag.
fn table(dist: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dist)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dist.display()))
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .into_string()
                .expect("UTF-8 name")
        })
        .collect();
    names.sort();
    assert!(
        names.iter().any(|n| n == "index.html"),
        "the console bundle in {} has no index.html",
        dist.display()
    );
    let mut code = String::from("pub static ASSETS: &[Asset] = &[\n");
    for name in &names {
        let path = dist.join(name);
        let bytes = std::fs::read(&path).expect("read bundle file");
        let kind = match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            Some("ico") => "image/x-icon",
            Some("json") => "application/json",
            other => panic!("the console bundle holds {name}, of a type ({other:?}) not served"),
        };
        let _ = writeln!(
            code,
            "    Asset {{ name: {name:?}, content_type: {kind:?}, etag: \"\\\"{:016x}\\\"\", bytes: include_bytes!({:?}) }},",
            fnv1a(&bytes),
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    code
}

/// FNV-1a, 64 bits: a stable fingerprint of a file for its entity tag.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
