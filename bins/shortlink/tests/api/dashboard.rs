//! The dashboard as a browser fetches it: the page at `/` and its assets, with the security
//! headers, content types, compression and revalidation.

use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, X_FRAME_OPTIONS,
};

use crate::helpers::TestApp;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'none'";

async fn fetch(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header(ACCEPT_ENCODING, "identity")
        .send()
        .await
        .expect("the server answers")
}

fn header(res: &reqwest::Response, name: reqwest::header::HeaderName) -> &str {
    res.headers()
        .get(&name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{name} is missing from {}", res.url()))
}

#[tokio::test]
async fn the_root_serves_the_page_with_a_strict_policy() {
    let app = TestApp::spawn().await;
    let res = fetch(&app, "/").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_SECURITY_POLICY), CSP);
    assert_eq!(header(&res, X_FRAME_OPTIONS), "DENY");
    assert_eq!(header(&res, CONTENT_TYPE), "text/html; charset=utf-8");
    assert_eq!(header(&res, CACHE_CONTROL), "no-cache");
    let page = res.text().await.expect("a body");
    assert!(page.contains(r#"<script type="module" src="/assets/js/app.js"></script>"#));
    assert!(
        !page.contains("<script>") && !page.contains("style="),
        "nothing inline"
    );

    // Every asset the page names is served, with its own type and the same policy.
    let mut named = 0;
    for path in page.split('"').filter(|s| s.starts_with("/assets/")) {
        let res = fetch(&app, path).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert_eq!(header(&res, CONTENT_SECURITY_POLICY), CSP, "{path}");
        let expected = match path.rsplit_once('.').map(|(_, ext)| ext) {
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("svg") => "image/svg+xml; charset=utf-8",
            other => panic!("unexpected asset kind {other:?} in {path}"),
        };
        assert_eq!(header(&res, CONTENT_TYPE), expected, "{path}");
        named += 1;
    }
    assert!(
        named >= 3,
        "the page names its style sheet, icon and script"
    );
}

#[tokio::test]
async fn assets_are_gzipped_on_request_and_revalidated_by_etag() {
    let app = TestApp::spawn().await;
    let plain = fetch(&app, "/assets/js/app.js").await;
    let etag = header(&plain, ETAG).to_owned();
    let plain_len = plain.bytes().await.expect("a body").len();

    let gz = app
        .client
        .get(app.url("/assets/js/app.js"))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .expect("the server answers");
    assert_eq!(header(&gz, CONTENT_ENCODING), "gzip");
    assert_eq!(header(&gz, ETAG), etag);
    assert!(gz.bytes().await.expect("a body").len() < plain_len);

    let again = app
        .client
        .get(app.url("/assets/js/app.js"))
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert!(again.bytes().await.expect("no body").is_empty());
}

#[tokio::test]
async fn an_unknown_asset_is_a_plain_404_not_a_short_code() {
    let app = TestApp::spawn().await;
    for path in [
        "/assets/nope.js",
        "/assets/js/nope.js",
        "/assets/%2e%2e%2fCargo.toml",
    ] {
        let res = fetch(&app, path).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(header(&res, X_FRAME_OPTIONS), "DENY", "{path}");
    }
}
