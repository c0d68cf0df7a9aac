//! The web console's files, bundled from `console/` when this crate is built and embedded in
//! the binary (no CDN, works offline). The server answers `index.html` for the console's page
//! routes and the other files under `/assets/`.

/// One file of the bundle.
#[derive(Debug)]
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    /// A quoted entity tag that changes when the file does.
    pub etag: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The file `name` (such as `app.js`) of the bundle.
pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The page every console route loads.
pub fn index() -> &'static Asset {
    asset("index.html").expect("build.rs checks that the bundle has index.html")
}

/// The Content-Security-Policy the console is served with: its own scripts, styles and API
/// only; no inline code, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_has_its_page_script_and_styles_and_loads_nothing_from_elsewhere() {
        let index = std::str::from_utf8(index().bytes).expect("UTF-8 page");
        assert!(index.contains("/assets/app.js"), "{index}");
        assert!(index.contains("/assets/app.css"), "{index}");
        assert!(
            !index.contains("<style"),
            "inline styles break the CSP: {index}"
        );
        for asset in ASSETS {
            assert!(!asset.bytes.is_empty(), "{} is empty", asset.name);
            let text = String::from_utf8_lossy(asset.bytes);
            for remote in ["http://", "https://"] {
                // An SVG names its XML namespace with a URL; nothing else may.
                let allowed = text.matches("http://www.w3.org/").count();
                assert!(
                    text.matches(remote).count() <= allowed,
                    "{} refers to a remote URL",
                    asset.name
                );
            }
        }
        assert_eq!(
            asset("app.js").expect("app.js").content_type,
            "text/javascript; charset=utf-8"
        );
        assert!(asset("../secret").is_none());
    }
}
