//! The web console's bundle: the files `scripts/console.sh build` (`make console`) makes of
//! `console/`, embedded (no CDN, works offline) for the binaries that serve them, `gannet`
//! (`gannet up`, `gannet console`) and the AWS `api` function, which hand them to the HTTP
//! layer as a [`Console`]. The server answers the page for the console's routes and the other
//! files under `/assets/` (`gannet_controller::console_routes`).
//!
//! The build runs no Node.js (see `build.rs`): where the bundle is missing or stale this crate
//! still builds, and [`bundle`], evaluated in a serving binary's `const`, stops that binary's
//! compilation saying what to run.

use gannet_controller::Console;

// `BUNDLE`: the console, or why there is none (written by build.rs).
include!(concat!(env!("OUT_DIR"), "/bundle.rs"));

/// The console, for a binary that serves it. Call it in a `const`
/// (`const CONSOLE: Console = gannet_console::bundle();`): where `make console` has not built a
/// bundle of the current sources, that binary then fails to compile, naming the command to run.
pub const fn bundle() -> Console {
    match BUNDLE {
        Ok(console) => console,
        // A `const fn` may panic only with a literal or `"{}"` and a `&str`.
        #[allow(clippy::uninlined_format_args)]
        Err(why) => panic!("{}", why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_has_its_page_script_and_styles_and_loads_nothing_from_elsewhere() {
        let console = bundle();
        let index = std::str::from_utf8(console.page().bytes).expect("UTF-8 page");
        assert!(index.contains("/assets/app.js"), "{index}");
        assert!(index.contains("/assets/app.css"), "{index}");
        assert!(
            !index.contains("<style"),
            "inline styles break the CSP: {index}"
        );
        for file in console.files() {
            assert!(!file.bytes.is_empty(), "{} is empty", file.name);
            let text = String::from_utf8_lossy(file.bytes);
            for remote in ["http://", "https://"] {
                // An SVG names its XML namespace with a URL; nothing else may.
                let allowed = text.matches("http://www.w3.org/").count();
                assert!(
                    text.matches(remote).count() <= allowed,
                    "{} refers to a remote URL",
                    file.name
                );
            }
        }
        assert_eq!(
            console.asset("app.js").expect("app.js").content_type,
            "text/javascript; charset=utf-8"
        );
        assert!(console.asset("../secret").is_none());
    }
}
