//! The web console's routes: `index.html` for each page (`/`, `/apps/...`,
//! `/deployments/...`, `/chains/...`, `/previews/...`), its files under `/assets/`. The files
//! hold no data (the console reads everything through the API, with the caller's own token), so
//! they need no caller; they are sent with a strict Content-Security-Policy and entity tags.
//!
//! This crate links no bundle: the binaries that serve the console (`gannet`, the AWS `api`
//! function) embed the one `gannet-console` holds and hand it in as a [`Console`], so every
//! other crate builds without the console or Node.js.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::ApiError;

/// The Content-Security-Policy the console is served with: its own scripts, styles and API
/// only; no inline code, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One file of the console's bundle.
#[derive(Debug)]
pub struct ConsoleFile {
    /// Its name in the bundle (`app.js`, `index.html`).
    pub name: &'static str,
    pub content_type: &'static str,
    /// A quoted entity tag that changes when the file does.
    pub etag: &'static str,
    pub bytes: &'static [u8],
}

/// A built console: the page every console route loads, and the files it loads under
/// `/assets/`.
#[derive(Clone, Copy, Debug)]
pub struct Console {
    page: &'static ConsoleFile,
    files: &'static [ConsoleFile],
}

impl Console {
    /// The bundle of `files`, whose page (its `index.html`) is `page`.
    pub const fn new(page: &'static ConsoleFile, files: &'static [ConsoleFile]) -> Self {
        Self { page, files }
    }

    /// The page every console route loads.
    pub fn page(&self) -> &'static ConsoleFile {
        self.page
    }

    /// The file `/assets/<name>` (such as `app.js`); the page is not one of them.
    pub fn asset(&self, name: &str) -> Option<&'static ConsoleFile> {
        self.files
            .iter()
            .find(|f| f.name == name && f.name != self.page.name)
    }

    /// Every file of the bundle, the page included.
    pub fn files(&self) -> &'static [ConsoleFile] {
        self.files
    }
}

/// The console's routes, for the server's router (and `gannet console`, which serves them
/// itself on AWS).
pub fn routes<S: Clone + Send + Sync + 'static>(console: Console) -> Router<S> {
    let page = move |headers: HeaderMap| async move { serve(console.page(), &headers) };
    let file = move |Path(name): Path<String>, headers: HeaderMap| async move {
        match console.asset(&name) {
            Some(file) => serve(file, &headers),
            None => ApiError::NotFound(format!(
                "no console file {}",
                gannet_domain::report::cut(&name, 80)
            ))
            .into_response(),
        }
    };
    Router::new()
        .route("/", get(page))
        .route("/apps", get(page))
        .route("/apps/{*rest}", get(page))
        .route("/deployments", get(page))
        .route("/deployments/{*rest}", get(page))
        .route("/chains", get(page))
        .route("/chains/{*rest}", get(page))
        // A plan preview's check run links `<console root>/previews/<id>`.
        .route("/previews", get(page))
        .route("/previews/{*rest}", get(page))
        .route("/assets/{file}", get(file))
}

/// The file, or 304 when the browser's copy is current; revalidated on every load so a new
/// release shows at once.
fn serve(file: &'static ConsoleFile, headers: &HeaderMap) -> Response {
    let current = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == file.etag));
    let mut response = if current {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, file.content_type)], file.bytes).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(file.etag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    static FILES: [ConsoleFile; 2] = [
        ConsoleFile {
            name: "app.js",
            content_type: "text/javascript; charset=utf-8",
            etag: "\"script\"",
            bytes: b"the script",
        },
        ConsoleFile {
            name: "index.html",
            content_type: "text/html; charset=utf-8",
            etag: "\"page\"",
            bytes: b"the page",
        },
    ];
    const CONSOLE: Console = Console::new(&FILES[1], &FILES);

    /// GET `path` (with `If-None-Match: etag` when given): the status, the content type and
    /// the body.
    async fn check(path: &str, etag: Option<&str>) -> (u16, String, String) {
        let mut request = Request::get(path);
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        let response = routes::<()>(CONSOLE)
            .oneshot(request.body(Body::empty()).expect("request"))
            .await
            .expect("the routes answer");
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if status < 400 {
            let csp = response.headers().get(header::CONTENT_SECURITY_POLICY);
            assert_eq!(
                csp.and_then(|v| v.to_str().ok()),
                Some(CONTENT_SECURITY_POLICY),
                "{path}"
            );
        }
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .expect("body");
        (status, kind, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn every_page_route_loads_the_page_and_assets_are_the_other_files() {
        for (path, status, body) in [
            ("/", 200, "the page"),
            ("/apps", 200, "the page"),
            ("/apps/web", 200, "the page"),
            ("/deployments", 200, "the page"),
            ("/deployments/d-1", 200, "the page"),
            ("/chains", 200, "the page"),
            ("/chains/c-1", 200, "the page"),
            ("/previews", 200, "the page"),
            ("/previews/p-1", 200, "the page"),
            ("/assets/app.js", 200, "the script"),
            // The page is not a file under /assets/, and nothing else is served.
            ("/assets/index.html", 404, "no console file index.html"),
            ("/assets/missing.js", 404, "no console file missing.js"),
        ] {
            let (got, _, text) = check(path, None).await;
            assert_eq!(got, status, "{path}: {text}");
            assert!(text.contains(body), "{path}: {text}");
        }
        let (_, kind, _) = check("/assets/app.js", None).await;
        assert_eq!(kind, "text/javascript; charset=utf-8");
    }

    #[tokio::test]
    async fn a_current_copy_is_answered_304_and_an_old_one_gets_the_file() {
        for (etag, status, body) in [
            ("\"script\"", 304, ""),
            ("\"old\", \"script\"", 304, ""),
            ("\"old\"", 200, "the script"),
        ] {
            let (got, _, text) = check("/assets/app.js", Some(etag)).await;
            assert_eq!(
                (got, text.as_str()),
                (status, body),
                "If-None-Match: {etag}"
            );
        }
    }
}
