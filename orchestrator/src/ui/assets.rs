//! The page's files, compiled into the binary: hand-written HTML, CSS and JavaScript, no
//! build step and nothing fetched from elsewhere, so the page works offline.

/// One embedded file.
pub(super) struct Asset {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

/// The file served at `path` (below the run's secret), if any.
pub(super) fn find(path: &str) -> Option<Asset> {
    let (content_type, body): (_, &'static [u8]) = match path {
        "/" => (
            "text/html; charset=utf-8",
            include_bytes!("assets/index.html"),
        ),
        "/app.css" => ("text/css; charset=utf-8", include_bytes!("assets/app.css")),
        "/app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("assets/app.js"),
        ),
        "/favicon.svg" => ("image/svg+xml", include_bytes!("assets/favicon.svg")),
        _ => return None,
    };
    Some(Asset { content_type, body })
}
