//! The web console's routes: `index.html` for each page (`/`, `/apps/...`,
//! `/deployments/...`), its files under `/assets/`. The files hold no data (the console reads
//! everything through the API, with the caller's own token), so they need no caller; they are
//! sent with a strict Content-Security-Policy and entity tags.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use gannet_console::Asset;

use crate::ApiError;

/// The console's routes, for the server's router (and `gannet console`, which serves them
/// itself on AWS).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route("/apps", get(page))
        .route("/apps/{*rest}", get(page))
        .route("/deployments", get(page))
        .route("/deployments/{*rest}", get(page))
        .route("/assets/{file}", get(file))
}

async fn page(headers: HeaderMap) -> Response {
    serve(gannet_console::index(), &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match gannet_console::asset(&name).filter(|a| a.name != "index.html") {
        Some(asset) => serve(asset, &headers),
        None => ApiError::NotFound(format!(
            "no console file {}",
            gannet_core::report::cut(&name, 80)
        ))
        .into_response(),
    }
}

/// The file, or 304 when the browser's copy is current; revalidated on every load so a new
/// release shows at once.
fn serve(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let current = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == asset.etag));
    let mut response = if current {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(gannet_console::CONTENT_SECURITY_POLICY),
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
