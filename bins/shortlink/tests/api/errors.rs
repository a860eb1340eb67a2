//! The error table: every status and code the contract lists, in its envelope, for the inputs
//! that must produce it; and the request id every response carries.

use actix_web::ResponseError;
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_http::ApiError;
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{
    DEADLINE, RawResponse, Setup, TestApp, assert_error, assert_invalid, assert_ok, header, send,
    text,
};

#[tokio::test]
async fn bad_destinations_are_rejected_naming_the_field() {
    let app = TestApp::spawn().await;
    let own = format!("{}/somewhere", app.address);
    let too_long = format!("https://example.com/{}", "a".repeat(8192));
    // 8,020 characters as sent, 48,020 once percent-encoded.
    let too_long_encoded = format!("https://example.com/{}", "é".repeat(8000));
    // The loop check ignores the port, the case and the trailing dot of the host.
    let own_other_port = "http://127.0.0.1:1/x";
    let own_https = "https://127.0.0.1./x";
    let cases = [
        ("not a url", "not a url"),
        ("no scheme", "example.com/page"),
        ("ftp", "ftp://example.com/file"),
        ("javascript", "javascript:alert(1)"),
        ("data", "data:text/html,<b>x</b>"),
        ("no host", "https://"),
        ("space inside", "https://exa mple.com/"),
        ("CRLF inside", "https://example.com/\r\nSet-Cookie: a=b"),
        ("tab inside", "https://example.com/\tpath"),
        ("trailing newline", "https://example.com/\n"),
        ("credentials", "https://user:secret@example.com/"),
        ("user only", "https://user@example.com/"),
        ("own domain", own.as_str()),
        ("over 8192 characters", too_long.as_str()),
        ("over 8192 once encoded", too_long_encoded.as_str()),
        ("own host, other port", own_other_port),
        ("own host, https, trailing dot", own_https),
        ("empty", ""),
    ];
    for (what, destination) in cases {
        let res = app
            .post_json("/links", &json!({ "destination": destination }))
            .await;
        let error = assert_invalid(res, &["destination"]).await;
        assert_eq!(
            error["message"], error["details"][0]["message"],
            "{what}: the summary is the field's message"
        );
    }

    let res = app
        .post_json("/links", &json!({ "destination": "ftp://example.com/" }))
        .await;
    let error = assert_invalid(res, &["destination"]).await;
    assert_eq!(
        error["message"],
        "destination must be an absolute http or https URL"
    );

    // Missing, or not a string.
    for body in [
        json!({}),
        json!({ "destination": 5 }),
        json!({ "destination": null }),
    ] {
        let res = app.post_json("/links", &body).await;
        assert_invalid(res, &["destination"]).await;
    }

    // Exactly 8192 characters is still fine.
    let longest = format!("https://example.com/{}", "a".repeat(8192 - 20));
    assert_eq!(longest.len(), 8192);
    app.create_link(&json!({ "destination": longest })).await;
}

#[tokio::test]
async fn bad_custom_slugs_are_rejected_naming_the_field() {
    let app = TestApp::spawn().await;
    let too_long = "a".repeat(65);
    for slug in [
        too_long.as_str(),
        "",
        "has space",
        "dot.ted",
        "slash/ed",
        "ünïcode",
        "emoji😀",
        "api",
        "API",
        "healthz",
        "readyz",
        "docs",
        "metrics",
        "static",
        "link_01JD0000000000000000000000",
    ] {
        let res = app
            .post_json(
                "/links",
                &json!({ "destination": "https://example.com/", "customSlug": slug }),
            )
            .await;
        let error = assert_invalid(res, &["customSlug"]).await;
        assert!(!text(&error["message"]).is_empty(), "{slug}");
    }

    // Both fields bad: both named.
    let res = app
        .post_json(
            "/links",
            &json!({ "destination": "nope", "customSlug": "api" }),
        )
        .await;
    assert_invalid(res, &["destination", "customSlug"]).await;
}

/// A key that is not in the server's key cache yet is looked up in the database while actix
/// extracts the body. When the body is rejected first, the answer must still be the 400, and
/// the server must go on serving. Each case gets a server whose connections are not opened yet,
/// so the lookup surely takes longer than rejecting the body.
#[tokio::test]
async fn a_bad_body_on_a_keys_first_request_is_400_and_the_server_survives() {
    let bodies = [
        ("text/plain", r#"{"destination":"https://example.com/"}"#),
        ("application/json", "{not json"),
        (
            "application/json",
            r#"{"destination":"https://example.com/","customslug":"x"}"#,
        ),
    ];
    for (content_type, body) in bodies {
        let setup = Setup {
            check_key: false,
            ..Setup::default()
        };
        let app = TestApp::spawn_with(TestDatabase::sqlite(), setup).await;
        let res = send(
            app.api(Method::POST, "/links")
                .header("content-type", content_type)
                .body(body),
        )
        .await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
        assert_ok(app.get("/links").await).await;
    }
}

#[tokio::test]
async fn unknown_fields_are_named() {
    let app = TestApp::spawn().await;
    let res = app
        .post_json(
            "/links",
            &json!({ "destination": "https://example.com/", "customslug": "typo" }),
        )
        .await;
    let error = assert_invalid(res, &["customslug"]).await;
    assert!(text(&error["message"]).contains("customslug"), "{error}");

    let code = app.create_code("https://example.com/").await;
    let res = app
        .patch_json(
            &format!("/links/{code}"),
            &json!({ "destination": "https://example.com/", "clicks": 9 }),
        )
        .await;
    assert_invalid(res, &["clicks"]).await;
}

#[tokio::test]
async fn malformed_json_and_wrong_content_types_are_rejected() {
    let app = TestApp::spawn().await;
    let post = |content_type: Option<&str>, body: &str| {
        let mut req = app.api(Method::POST, "/links").body(body.to_owned());
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        send(req)
    };
    let valid = r#"{"destination":"https://example.com/"}"#;

    for body in [
        r#"{"destination":"https://example.com/""#,
        "{not json",
        "",
        "[1,",
    ] {
        let res = post(Some("application/json"), body).await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
    }
    // serde would read an object's fields by position from an array: no body of the other
    // shape is read, on any route that takes one.
    for body in ["[]", r#"["https://example.com/arr","arr"]"#] {
        let res = post(Some("application/json"), body).await;
        let error = assert_error(res, 400, "VALIDATION_FAILED").await;
        assert_eq!(
            error["message"],
            "the request body must be an object in JSON"
        );
    }
    let code = app.create_code("https://example.com/kept").await;
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/links/{code}"),
            r#"["https://example.com/moved"]"#,
        ),
        (
            Method::POST,
            "/webhooks".to_owned(),
            r#"["https://hooks.example.com/x",["link.created"]]"#,
        ),
        (Method::POST, "/links/bulk".to_owned(), valid),
    ] {
        let res = send(
            app.api(method, &path)
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
    }
    let kept = assert_ok(app.get(&format!("/links/{code}")).await).await;
    assert_eq!(kept["destination"], "https://example.com/kept");
    assert_ok(app.delete(&format!("/links/{code}")).await).await;
    let hooks = assert_ok(app.get("/webhooks").await).await;
    assert_eq!(hooks, json!([]), "no webhook made");
    // One JSON value and then more is not a JSON body, whatever the first value says.
    for trailing in [" x", "{}", r#"{"destination":"https://example.com/2"}"#] {
        let res = post(Some("application/json"), &format!("{valid}{trailing}")).await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
        let res = send(
            app.api(Method::POST, "/links/bulk")
                .header("content-type", "application/json")
                .body(format!("[{valid}]{trailing}")),
        )
        .await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
    }
    let listed = assert_ok(app.get("/links").await).await;
    assert_eq!(listed["items"], json!([]), "a refused body creates nothing");

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("application/jsonx"),
        None,
    ] {
        let res = post(content_type, valid).await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
    }

    for content_type in [
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "Application/JSON",
    ] {
        assert_ok(post(Some(content_type), valid).await).await;
    }
}

#[tokio::test]
async fn bad_query_parameters_are_named() {
    let app = TestApp::spawn().await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("limit=", "limit"),
        ("cursor=garbage", "cursor"),
        ("cursor=link_", "cursor"),
        // Ids the ULID parser takes but this service never writes: lower case, a first digit
        // past 7.
        ("cursor=link_01m8gch01xsfsqzdgh31zfehz3", "cursor"),
        ("cursor=link_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "cursor"),
        ("search=%00", "search"),
        ("search=a%0Ab", "search"),
        ("limit=5&limit=50", "limit"),
    ] {
        let res = app.get(&format!("/links?{query}")).await;
        assert_invalid(res, &[field]).await;
    }
    // A list without parameters says so rather than ignore them.
    for (query, field) in [("limit=1", "limit"), ("cursor=x", "cursor")] {
        let res = app.get(&format!("/webhooks?{query}")).await;
        assert_invalid(res, &[field]).await;
    }
    for query in ["limit=1", "limit=100"] {
        assert_ok(app.get(&format!("/links?{query}")).await).await;
    }
    // Nor do the routes of one link, or the creations: a refused DELETE deletes nothing.
    let code = app.create_code("https://example.com/kept").await;
    for (method, path) in [
        (Method::GET, format!("/links/{code}?fields=id")),
        (Method::PATCH, format!("/links/{code}?dryRun=true")),
        (Method::DELETE, format!("/links/{code}?soft=true")),
        (Method::POST, "/links?domain=x".to_owned()),
        (Method::POST, "/links/bulk?atomic=true".to_owned()),
        (Method::POST, "/webhooks?x=1".to_owned()),
        (Method::GET, "/webhooks/wh_x?x=1".to_owned()),
    ] {
        let body = if method == Method::GET { "" } else { "{}" };
        let res = send(
            app.api(method.clone(), &path)
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        let error = assert_error(res, 400, "VALIDATION_FAILED").await;
        let field = path.split(['?', '=']).nth(1).unwrap_or_default();
        assert_eq!(
            crate::helpers::detail_fields(&error),
            [field],
            "{method} {path}"
        );
    }
    assert_ok(app.get(&format!("/links/{code}")).await).await;
}

/// Every `limit` (the links, an endpoint's deliveries, the analytics breakdowns) refuses a word
/// or a number out of range with one message saying what it takes, not the integer parser's.
#[tokio::test]
async fn every_page_limit_says_what_it_takes() {
    let app = TestApp::spawn().await;
    let target = app.url("/healthz");
    let hook = assert_ok(
        app.post_json(
            "/webhooks",
            &json!({ "targetUrl": target, "events": ["link.created"] }),
        )
        .await,
    )
    .await;
    let deliveries = format!("/webhooks/{}/deliveries", text(&hook["id"]));
    for list in ["/links", &deliveries, "/analytics?groupBy=countries"] {
        let join = if list.contains('?') { '&' } else { '?' };
        for limit in ["abc", "", "0", "101", "2.5"] {
            let res = app.get(&format!("{list}{join}limit={limit}")).await;
            let error = assert_invalid(res, &["limit"]).await;
            assert_eq!(
                error["message"], "limit must be an integer from 1 to 100",
                "{list} limit={limit}"
            );
        }
    }
}

#[tokio::test]
async fn unknown_links_and_routes_are_404() {
    let app = TestApp::spawn().await;
    for path in [
        "/links/nope",
        "/links/link_01JD0000000000000000000000",
        "/links/link_x",
    ] {
        let error = assert_error(app.get(path).await, 404, "NOT_FOUND").await;
        assert_eq!(error["message"], "link not found");
    }
    for path in ["/nope", "/links/a/b", "/v2/links"] {
        assert_error(app.get(path).await, 404, "NOT_FOUND").await;
    }
    // Without a key too: an unknown route is not a secret.
    let res = send(app.client.get(app.url("/api/v1/nope"))).await;
    assert_error(res, 404, "NOT_FOUND").await;
    // The rest of `/api` is the API's: its 404 is the envelope, not the missing-link page.
    for path in ["/api/v2/links", "/api/", "/api"] {
        let res = send(app.client.get(app.url(path))).await;
        assert_error(res, 404, "NOT_FOUND").await;
    }
}

crate::helpers::on_both_backends!(
    text_that_can_name_no_link_is_not_found_and_filters_refuse_control_characters
);

/// A NUL reached PostgreSQL, which refuses such text: the answer was a 500 there (and an export
/// cut off after its header row), a 404 on SQLite.
async fn text_that_can_name_no_link_is_not_found_and_filters_refuse_control_characters(
    app: TestApp,
) {
    let code = app.create_code("https://example.com/kept").await;
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        for path in ["/links/%00", "/links/a%00b", "/links/%C3%A9"] {
            let res = send(
                app.api(method.clone(), path)
                    .header("content-type", "application/json")
                    .body("{}"),
            )
            .await;
            assert_error(res, 404, "NOT_FOUND").await;
        }
    }
    for path in ["/qr?shortCode=%00", "/analytics?linkId=%00"] {
        assert_error(app.get(path).await, 404, "NOT_FOUND").await;
    }
    for field in ["city", "browser", "os", "referrer"] {
        for route in ["/analytics", "/analytics/export"] {
            let res = app.get(&format!("{route}?{field}=a%00b")).await;
            assert_invalid(res, &[field]).await;
        }
    }
    assert_ok(app.get(&format!("/links/{code}")).await).await;
}

#[tokio::test]
async fn known_routes_with_wrong_methods_are_405() {
    let app = TestApp::spawn().await;
    for (method, path) in [
        (Method::PUT, "/links"),
        (Method::DELETE, "/links"),
        (Method::GET, "/links/bulk"),
        (Method::PUT, "/links/abc"),
        (Method::POST, "/qr"),
        (Method::PATCH, "/webhooks"),
        (Method::POST, "/openapi.json"),
    ] {
        let res = send(app.api(method.clone(), path)).await;
        assert_error(res, 405, "METHOD_NOT_ALLOWED").await;
    }
    let res = send(app.api(Method::PUT, "/links")).await;
    assert_eq!(header(res.headers(), "allow"), Some("GET, HEAD, POST"));
    // The probes too: not the missing link's page.
    for path in ["/healthz", "/readyz"] {
        let res = send(app.client.post(app.url(path))).await;
        assert_eq!(header(res.headers(), "allow"), Some("GET, HEAD"), "{path}");
        assert_error(res, 405, "METHOD_NOT_ALLOWED").await;
    }
}

/// Every route that serves GET serves HEAD: the same status and head, no body (load balancers
/// probe `/healthz` with HEAD; it used to fall through to the short codes and answer 404).
#[tokio::test]
async fn every_get_route_answers_head() {
    let app = TestApp::spawn().await;
    let code = app.create_code("https://example.com/head").await;
    let open = ["/healthz", "/readyz", "/docs", "/api/v1/openapi.json", "/"];
    let api = [
        "/links".to_owned(),
        format!("/links/{code}"),
        format!("/qr?shortCode={code}"),
    ];
    let requests = (open.iter().map(|path| {
        (
            app.client.get(app.url(path)),
            app.client.head(app.url(path)),
        )
    }))
    .chain(
        api.iter()
            .map(|path| (app.api(Method::GET, path), app.api(Method::HEAD, path))),
    );
    for (get, head) in requests {
        let (get, head) = (send(get).await, send(head).await);
        let what = get.url().path().to_owned();
        assert_eq!(head.status(), get.status(), "{what}");
        assert_eq!(get.status(), 200, "{what}");
        assert_eq!(
            header(head.headers(), "content-type"),
            header(get.headers(), "content-type"),
            "{what}"
        );
        assert_eq!(head.bytes().await.expect("a body").len(), 0, "{what}");
    }
}

/// Asserts an error envelope with a request id on a response read by hand.
fn assert_raw_error(res: &RawResponse, status: u16, code: &str, what: &str) {
    assert_eq!(res.status, status, "{what}: {res:?}");
    assert!(
        res.headers.iter().any(|h| h.starts_with("x-request-id: ")),
        "{what}: {res:?}"
    );
    let body: Value = serde_json::from_str(&res.body).expect("the body is JSON");
    assert_eq!(
        body,
        json!({
            "status": "error",
            "success": false,
            "statusCode": status,
            "error": {
                "code": code,
                "message": body["error"]["message"],
            }
        }),
        "{what}"
    );
    assert!(!text(&body["error"]["message"]).is_empty(), "{what}");
}

/// Refused before routing, with the envelope: a request target over 16 KiB is 414, header
/// fields over 64 KiB in all are 431. Just under the bounds, the request is served.
#[tokio::test]
async fn oversized_uris_and_headers_answer_the_envelope() {
    let app = TestApp::spawn().await;
    let auth = format!("Authorization: Bearer {}", app.key);
    for path in ["/api/v1/links", "/api/v1/nowhere", "/api/v1/webhooks"] {
        let long = format!("GET {path}?x={} HTTP/1.1\r\n{auth}", "a".repeat(16 * 1024));
        assert_raw_error(&app.raw(&long, b"").await, 414, "URI_TOO_LONG", path);

        let big = format!(
            "GET {path} HTTP/1.1\r\n{auth}\r\nX-Big: {}",
            "b".repeat(64 * 1024)
        );
        assert_raw_error(&app.raw(&big, b"").await, 431, "HEADERS_TOO_LARGE", path);

        let many: String = (0..40)
            .map(|i| format!("\r\nX-Filler-{i}: {}", "c".repeat(2000)))
            .collect();
        let many = format!("GET {path} HTTP/1.1\r\n{auth}{many}");
        assert_raw_error(&app.raw(&many, b"").await, 431, "HEADERS_TOO_LARGE", path);
    }

    let near = format!(
        "GET /api/v1/links?x={} HTTP/1.1\r\n{auth}\r\nX-Big: {}",
        "a".repeat(16 * 1024 - 64),
        "b".repeat(60 * 1024)
    );
    let res = app.raw(&near, b"").await;
    assert_eq!(
        res.status, 400,
        "served (and the unknown parameter named): {res:?}"
    );
    assert!(res.body.contains("VALIDATION_FAILED"), "{res:?}");
}

/// Heads HTTP/1.1 refuses are refused, and the connection closed: framed both by
/// `Transfer-Encoding` and `Content-Length` (a proxy in front that read the other framing would
/// see another request in the body: the one after it is not answered), or without `Host`.
#[tokio::test]
async fn ambiguous_framing_and_a_missing_host_are_400_and_close() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let app = TestApp::spawn().await;
    let smuggled = "0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nContent-Length: {}\r\nTransfer-Encoding: chunked",
        smuggled.len()
    );
    let res = app.raw(&head, smuggled.as_bytes()).await;
    assert_eq!(res.status, 400, "{res:?}");
    assert!(
        !res.body.contains("HTTP/1.1"),
        "the second request answered: {res:?}"
    );

    let mut stream = tokio::net::TcpStream::connect(&app.domain)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut answer))
        .await
        .expect("answered and closed in time")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

/// Sent by hand: the server answers as soon as it knows the body is too large and stops
/// reading, which an HTTP client still busy writing may report as a broken pipe instead of the
/// answer.
#[tokio::test]
async fn bodies_over_one_mebibyte_are_413() {
    let app = TestApp::spawn().await;
    let limit = 1024 * 1024;
    let assert_413 = |res: RawResponse, what: &str| {
        assert_raw_error(&res, 413, "PAYLOAD_TOO_LARGE", what);
    };

    // Declared too large: answered before any of the body is sent.
    for path in ["/api/v1/links", "/api/v1/links/bulk"] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}",
            app.key,
            limit + 1
        );
        assert_413(app.raw(&head, b"").await, path);
    }

    // Streamed without a length: too large once the 1 MiB + 1st byte arrives.
    let mut chunked = format!("{:x}\r\n", limit + 1).into_bytes();
    chunked.extend(std::iter::repeat_n(b' ', limit + 1));
    // Ended: the server reads a refused body to its end before it closes (so that the client,
    // still writing, reads the answer instead of a reset).
    chunked.extend(b"\r\n0\r\n\r\n");
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked",
        app.key
    );
    assert_413(app.raw(&head, &chunked).await, "chunked");

    // Exactly 1 MiB is read (and judged on its content).
    let filler = " ".repeat(limit - 2);
    let body = format!("{{{filler}}}");
    assert_eq!(body.len(), limit);
    let res = send(
        app.api(Method::POST, "/links")
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_invalid(res, &["destination"]).await;
}

/// A 500 cannot be caused by a client by design, so the table itself is checked: the cause is
/// logged, never sent.
#[tokio::test]
async fn internal_errors_are_500_without_their_cause() {
    let response =
        ApiError::Internal("secret: SELECT * FROM api_keys at /src/x.rs:1".into()).error_response();
    assert_eq!(response.status().as_u16(), 500);
    let bytes = actix_web::body::to_bytes(response.into_body())
        .await
        .expect("the body is in memory");
    let text = String::from_utf8(bytes.to_vec()).expect("the body is UTF-8");
    assert!(!text.contains("secret"), "{text}");
    assert!(!text.contains("SELECT"), "{text}");
    let body: Value = serde_json::from_str(&text).expect("the body is JSON");
    assert_eq!(
        body,
        json!({
            "status": "error",
            "success": false,
            "statusCode": 500,
            "error": { "code": "INTERNAL_ERROR", "message": "internal error" }
        })
    );
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::spawn().await;
    let code = app.create_code("https://example.com/").await;
    let requests = [
        ("ok", app.api(Method::GET, "/links")),
        (
            "created",
            app.api(Method::POST, "/links")
                .json(&json!({ "destination": "https://example.com/" })),
        ),
        ("invalid", app.api(Method::POST, "/links").json(&json!({}))),
        ("unauthorized", app.client.get(app.url("/api/v1/links"))),
        ("api not found", app.api(Method::GET, "/nope")),
        ("method", app.api(Method::PUT, "/links")),
        ("redirect", app.client.get(app.url(&format!("/{code}")))),
        (
            "redirect head",
            app.client.head(app.url(&format!("/{code}"))),
        ),
        ("unknown code", app.client.get(app.url("/no-such-code"))),
        ("healthz", app.client.get(app.url("/healthz"))),
        ("readyz", app.client.get(app.url("/readyz"))),
        ("qr", app.api(Method::GET, &format!("/qr?shortCode={code}"))),
    ];
    for (what, request) in requests {
        let sent_id = format!("test-{}", what.replace(' ', "-"));
        let cloned = request
            .try_clone()
            .expect("a request without a streamed body");
        let echoed = send(cloned.header("x-request-id", &sent_id)).await;
        assert_eq!(
            header(echoed.headers(), "x-request-id"),
            Some(sent_id.as_str()),
            "{what}: echoed"
        );
        let generated = send(request).await;
        let id = header(generated.headers(), "x-request-id")
            .unwrap_or_else(|| panic!("{what}: no X-Request-Id"));
        assert!(
            !id.is_empty() && id != sent_id,
            "{what}: generated id {id:?}"
        );
    }

    // Two requests without an id get two different ones.
    let a = send(app.client.get(app.url("/healthz"))).await;
    let b = send(app.client.get(app.url("/healthz"))).await;
    assert_ne!(
        header(a.headers(), "x-request-id"),
        header(b.headers(), "x-request-id")
    );
    assert_eq!(assert_ok(a).await["status"], "ok");

    // Echoed up to 128 visible ASCII characters; anything else is replaced.
    let (longest, too_long) = ("r".repeat(128), "r".repeat(129));
    for (sent, echoed) in [
        (longest.as_str(), true),
        (too_long.as_str(), false),
        ("with space", false),
    ] {
        let res = send(
            app.client
                .get(app.url("/healthz"))
                .header("x-request-id", sent),
        )
        .await;
        let id = header(res.headers(), "x-request-id").expect("an id");
        assert_eq!(id == sent, echoed, "{sent:?} → {id:?}");
        assert!(!id.is_empty() && id.len() <= 128, "{id:?}");
    }
}

/// A body that stops arriving is answered 408 with the envelope once the server's body timeout
/// has passed (here the harness's, well within the client's deadline), and creates nothing.
#[tokio::test]
async fn a_body_that_stops_arriving_is_408() {
    let app = TestApp::spawn().await;
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100",
        app.key
    );
    let res = app.raw(&head, br#"{"destination": "https://exa"#).await;
    assert_raw_error(&res, 408, "REQUEST_TIMEOUT", "a body 72 bytes short");
    let page = assert_ok(app.get("/links").await).await;
    assert_eq!(page["items"], json!([]));
}
