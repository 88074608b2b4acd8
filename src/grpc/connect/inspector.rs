//! The Inspector (`GET /inspect`): a single page that reads conversations, logs, packs, memory
//! and search through the public Connect API with the API key typed into it, so it can do
//! nothing its caller could not. Its three files are built from `inspector/` and embedded
//! from the committed `inspector/dist`: nothing is fetched from elsewhere, and the page works
//! offline. Served only when [`crate::config::Settings::inspector`] says so.
//!
//! The answers carry a strict Content-Security-Policy: scripts and styles only from these
//! files, connections only to this origin, images only from them or `data:` URIs, no framing,
//! no forms, no base URI. Whatever a log holds, the page shows it as text.

use http_body_util::Full;
use hyper::body::Bytes;
use tonic::codegen::http::{HeaderValue, Method, Response, StatusCode, header};

/// Where the Inspector is served.
pub(super) const PATH: &str = "/inspect";

/// The policy every Inspector answer carries.
pub(super) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    /// Its path on the server.
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The page, its script and its style sheet.
const ASSETS: [Asset; 3] = [
    Asset {
        path: PATH,
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../../inspector/dist/index.html"),
    },
    Asset {
        path: "/inspect/inspector.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../inspector/dist/inspector.js"),
    },
    Asset {
        path: "/inspect/inspector.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../../inspector/dist/inspector.css"),
    },
];

/// Whether `path` is the Inspector's (served or not).
pub(super) fn is_inspector(path: &str) -> bool {
    path == PATH || path.starts_with("/inspect/")
}

/// The answer to a request for `path`: the file (`GET`, `HEAD`), 404 for an unknown file or
/// while the Inspector is off, 405 for another method.
pub(super) fn answer(method: &Method, path: &str, served: bool) -> Response<tonic::body::Body> {
    let path = if path == "/inspect/" { PATH } else { path };
    let asset = ASSETS.iter().find(|a| a.path == path).filter(|_| served);
    let (status, content_type, body) = match asset {
        None => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            &b"not found\n"[..],
        ),
        Some(_) if method != Method::GET && method != Method::HEAD => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            &b"the inspector takes GET\n"[..],
        ),
        Some(asset) => (StatusCode::OK, asset.content_type, asset.body),
    };
    let body = if method == Method::HEAD { &[][..] } else { body };
    let mut response = Response::new(tonic::body::Body::new(Full::new(Bytes::from_static(body))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    let mut set = |name, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(header::CONTENT_TYPE, content_type);
    set(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY);
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(header::X_FRAME_OPTIONS, "DENY");
    set(header::REFERRER_POLICY, "no-referrer");
    set(header::CACHE_CONTROL, "no-store");
    set(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        set(header::ALLOW, "GET, HEAD");
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_references_only_its_own_files() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        for asset in &ASSETS[1..] {
            assert!(page.contains(asset.path), "index.html names {}", asset.path);
        }
        assert!(
            !page.contains("<script>") && !page.contains("style="),
            "nothing inline"
        );
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "no other origin"
        );
    }

    #[test]
    fn files_are_served_with_the_policy_and_nothing_else_is() {
        let page = answer(&Method::GET, "/inspect/", true);
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(
            answer(&Method::GET, "/inspect/inspector.js", true).headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            answer(&Method::GET, "/inspect", false).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            answer(&Method::GET, "/inspect/../Cargo.toml", true).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            answer(&Method::POST, "/inspect", true).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
