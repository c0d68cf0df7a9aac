//! Embeds the web console's bundle: the files `scripts/console.sh build` makes of `console/`
//! (`make console`, which every make target building a binary that serves the console runs
//! first) in `$GANNET_CONSOLE_DIST`, by default `console/dist` (a directory that is always
//! there, its contents gitignored).
//!
//! Runs no Node.js or npm, and never fails for want of a bundle. Without one, or with one built
//! from other sources than `console/` holds now, it writes down why instead, and only the
//! binaries that serve the console fail to compile, saying what to run: they take it with
//! `gannet_console::bundle()` in a `const`. Everything else that depends on this crate (the
//! functions' library, for the api binary) builds on a machine without Node.js.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What the bundle is built from, relative to the workspace root (directories whole).
const SOURCES: [&str; 5] = [
    "console/src",
    "console/build.mjs",
    "console/package.json",
    "console/package-lock.json",
    "console/tsconfig.json",
];
/// The file of the bundle holding the fingerprint of the [`SOURCES`] it was built from,
/// written by `scripts/console.sh build` (which computes it the same way: [`fingerprint`]).
const STAMP: &str = ".sources.sha256";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .ancestors()
        .nth(2)
        .expect("shared/console is two levels down");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-env-changed=GANNET_CONSOLE_DIST");
    let dist = match std::env::var_os("GANNET_CONSOLE_DIST") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("console/dist"),
    };
    println!("cargo:rerun-if-changed={}", dist.display());
    for source in SOURCES {
        println!("cargo:rerun-if-changed={}", root.join(source).display());
    }
    let code = bundle(root, &dist)
        .unwrap_or_else(|why| format!("const BUNDLE: Result<Console, &str> = Err({why:?});\n"));
    std::fs::write(out.join("bundle.rs"), code).expect("write bundle.rs");
}

/// The code of `BUNDLE` for the bundle in `dist`, or why it cannot be served.
fn bundle(root: &Path, dist: &Path) -> Result<String, String> {
    if !dist.join("index.html").is_file() {
        return Err(format!(
            "the web console is not built: {} holds no bundle. Run `make console` \
             (scripts/console.sh build; it needs Node.js 20 or newer), or point \
             GANNET_CONSOLE_DIST at a bundle `scripts/console.sh build DIR` made of these sources",
            dist.display()
        ));
    }
    let built_from = std::fs::read_to_string(dist.join(STAMP)).unwrap_or_default();
    if built_from.trim() != fingerprint(root)? {
        return Err(format!(
            "the web console bundle in {} was not built from the sources in console/ now: \
             run `make console` (scripts/console.sh build) to rebuild it",
            dist.display()
        ));
    }
    table(dist)
}

/// The fingerprint of the [`SOURCES`], as `scripts/console.sh` computes it: the SHA-256 of
/// `sha256sum`'s listing of every file (`<hash>  <path>` lines, paths from the workspace root,
/// in byte order).
fn fingerprint(root: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    for source in SOURCES {
        list(root, &root.join(source), &mut files)?;
    }
    files.sort();
    let mut listing = String::new();
    for file in &files {
        let bytes =
            std::fs::read(root.join(file)).map_err(|e| format!("cannot read {file}: {e}"))?;
        let _ = writeln!(listing, "{}  {file}", hex(&Sha256::digest(&bytes)));
    }
    Ok(hex(&Sha256::digest(listing.as_bytes())))
}

/// Every regular file at or under `path` (symbolic links are not followed), relative to `root`.
fn list(root: &Path, path: &Path, files: &mut Vec<String>) -> Result<(), String> {
    let unreadable = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    if !path.is_dir() {
        let relative = path.strip_prefix(root).expect("under the root");
        files.push(
            relative
                .to_str()
                .ok_or("a source path is not UTF-8")?
                .to_owned(),
        );
        return Ok(());
    }
    for entry in std::fs::read_dir(path).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let kind = entry.file_type().map_err(unreadable)?;
        if kind.is_dir() || kind.is_file() {
            list(root, &entry.path(), files)?;
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `BUNDLE`: every file of the bundle with its content type and an entity tag, the page
/// (`index.html`) among them.
fn table(dist: &Path) -> Result<String, String> {
    let unreadable = |e: std::io::Error| format!("cannot read {}: {e}", dist.display());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dist).map_err(unreadable)? {
        let name = entry.map_err(unreadable)?.file_name();
        let name = name.to_str().ok_or("a bundle file name is not UTF-8")?;
        // The stamp, and the .gitkeep that keeps the default directory in a clone.
        if !name.starts_with('.') {
            names.push(name.to_owned());
        }
    }
    names.sort();
    let mut code = format!(
        "static FILES: [gannet_controller::ConsoleFile; {}] = [\n",
        names.len()
    );
    for name in &names {
        let path = dist.join(name);
        let bytes = std::fs::read(&path).map_err(unreadable)?;
        let kind = match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            Some("ico") => "image/x-icon",
            Some("json") => "application/json",
            _ => {
                return Err(format!(
                    "the web console bundle in {} holds {name}, of a type not served: \
                     rebuild it with `make console`",
                    dist.display()
                ))
            }
        };
        let _ = writeln!(
            code,
            "    gannet_controller::ConsoleFile {{ name: {name:?}, content_type: {kind:?}, etag: \"\\\"{:016x}\\\"\", bytes: include_bytes!({:?}) }},",
            fnv1a(&bytes),
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let page = names
        .iter()
        .position(|n| n == "index.html")
        .expect("bundle() checked that there is an index.html");
    let _ = writeln!(
        code,
        "const BUNDLE: Result<Console, &str> = Ok(Console::new(&FILES[{page}], &FILES));"
    );
    Ok(code)
}

/// FNV-1a, 64 bits: a stable fingerprint of a file for its entity tag.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
