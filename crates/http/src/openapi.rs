//! The OpenAPI 3.1 document, generated from the handlers' annotations and the types they use, so
//! it cannot drift from them; and the docs page that renders it (Swagger UI, bundled into the
//! binary so it works offline).

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::{Value, json};
use shortlink_domain::{
    BaseUrl, ClickInfo, EventKind, LinkView, MAX_DESTINATION_LEN, MAX_TAG_LEN, Timestamp,
};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::error::{ApiError, ErrorEnvelope};
use crate::routes::{analytics, export, links, qr, webhooks};
use crate::state::AppState;

/// The document's skeleton; [`document`] completes it.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "shortlink",
        description = "Short links, redirects that count every click, QR codes and signed webhooks. \
            Every request under /api/v1 (but this document) needs `Authorization: Bearer <API key>`.",
        license(name = "MIT OR Apache-2.0"),
    ),
    paths(
        links::create, links::bulk, links::list, links::get, links::update, links::delete,
        qr::qr,
        analytics::analytics, export::export,
        webhooks::create, webhooks::list, webhooks::get, webhooks::delete, webhooks::deliveries,
    ),
    components(schemas(ErrorEnvelope, LinkCreatedEvent, LinkClickedEvent, LinkUpdatedEvent, LinkDeletedEvent, analytics::Bucket, analytics::Group)),
    modifiers(&Conventions),
    tags(
        (name = "links", description = "Create, list, change and delete short links."),
        (name = "qr", description = "QR codes of short links."),
        (name = "analytics", description = "Clicks and unique visitors: totals, time series, breakdowns and the events themselves."),
        (name = "webhooks", description = "Endpoints that receive signed events."),
    ),
)]
struct ApiDoc;

/// `link.created`, as POSTed to webhook endpoints.
#[derive(Serialize, ToSchema)]
pub struct LinkCreatedEvent {
    /// `link.created`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^link\\.created$")]
    kind: &'static str,
    /// When the link was created.
    timestamp: Timestamp,
    /// The link.
    data: LinkView,
}

/// `link.updated`, as POSTed to webhook endpoints.
#[derive(Serialize, ToSchema)]
pub struct LinkUpdatedEvent {
    /// `link.updated`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^link\\.updated$")]
    kind: &'static str,
    /// When the link was changed.
    timestamp: Timestamp,
    /// The link after the change.
    data: LinkView,
}

/// `link.deleted`, as POSTed to webhook endpoints.
#[derive(Serialize, ToSchema)]
pub struct LinkDeletedEvent {
    /// `link.deleted`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^link\\.deleted$")]
    kind: &'static str,
    /// When the link was deleted.
    timestamp: Timestamp,
    /// The link as it was.
    data: LinkView,
}

/// `link.clicked`, as POSTed to webhook endpoints.
#[derive(Serialize, ToSchema)]
pub struct LinkClickedEvent {
    /// `link.clicked`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^link\\.clicked$")]
    kind: &'static str,
    /// When the click happened.
    timestamp: Timestamp,
    /// The link and the click.
    data: LinkClickedData,
}

/// The `data` of `link.clicked`.
#[derive(Serialize, ToSchema)]
pub struct LinkClickedData {
    link: LinkView,
    click: ClickInfo,
}

/// What every operation shares, added in one place rather than on each handler: the bearer
/// security requirement, the error responses every authenticated request can get (each with its
/// `error.code`), and the rate-limit headers.
struct Conventions;

fn error_response(error: &ApiError, when: &str) -> Response {
    let (status, code) = error.status_and_code();
    let mut response = ResponseBuilder::new()
        .description(format!("`{code}`: {when}"))
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name("ErrorEnvelope"))),
        );
    if status.as_u16() == 429 {
        response = response.header(
            "Retry-After",
            HeaderBuilder::new()
                .description(Some("Seconds to wait."))
                .build(),
        );
    }
    if status.as_u16() == 401 {
        response = response.header(
            "WWW-Authenticate",
            HeaderBuilder::new().description(Some("`Bearer`")).build(),
        );
    }
    response.build()
}

fn rate_limit_headers(response: &mut Response) {
    for (name, description) in [
        (
            "RateLimit-Limit",
            "The workspace's requests per second (also the burst).",
        ),
        (
            "RateLimit-Remaining",
            "Requests that could be made right now.",
        ),
        (
            "RateLimit-Reset",
            "Seconds until the full burst is available again.",
        ),
    ] {
        response.headers.insert(
            name.to_owned(),
            HeaderBuilder::new().description(Some(description)).build(),
        );
    }
}

impl Modify for Conventions {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("sk_…")
                    .build(),
            ),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            let by_id = path.contains('{') || path.ends_with("/qr");
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.patch,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                conventions(op, by_id);
            }
        }
    }
}

fn conventions(op: &mut Operation, by_id: bool) {
    op.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    // The answers a creating POST records for its `Idempotency-Key` (those the route declares:
    // the creation, a slug conflict) come again for a repeated key, marked as replayed.
    let idempotent = (op.parameters.iter().flatten())
        .any(|p| p.name.eq_ignore_ascii_case(crate::idempotency::HEADER));
    for response in op.responses.responses.values_mut() {
        if let RefOr::T(response) = response {
            rate_limit_headers(response);
            if idempotent {
                let replayed = HeaderBuilder::new().description(Some(
                    "`true` when this is the recorded answer of an earlier request with the same \
                     `Idempotency-Key`.",
                ));
                (response.headers).insert("Idempotent-Replayed".to_owned(), replayed.build());
            }
        }
    }
    let mut add = |error: ApiError, when: &str| {
        let status = error.status_and_code().0.as_u16().to_string();
        op.responses
            .responses
            .entry(status)
            .or_insert_with(|| RefOr::T(error_response(&error, when)));
    };
    add(
        ApiError::invalid(""),
        "invalid input: a field, a parameter, the JSON itself or the content type.",
    );
    add(
        ApiError::Unauthorized,
        "the API key is missing, malformed, unknown or revoked.",
    );
    add(
        ApiError::RateLimited { retry_after: 1 },
        "the workspace's rate, or this address's failed-authentication budget, is spent.",
    );
    add(
        ApiError::Internal(String::new()),
        "a bug; the response carries no detail, the log has it under the request id.",
    );
    add(
        ApiError::Unavailable,
        "the database is unreachable; retry later.",
    );
    if op.request_body.is_some() {
        let bound = crate::extract::MAX_BODY_BYTES >> 20;
        add(
            ApiError::PayloadTooLarge,
            &format!("the body is over {bound} MiB."),
        );
        let timeout = crate::extract::REQUEST_BODY_TIMEOUT.as_secs();
        add(
            ApiError::RequestTimeout(timeout),
            &format!("the body did not arrive whole within {timeout} s."),
        );
    }
    if by_id {
        add(
            ApiError::NotFound("link"),
            "no such resource in this workspace.",
        );
    }
}

/// A regular expression matching URLs on `base`'s domain (host case-insensitive), which are not
/// acceptable destinations (they would loop).
fn own_domain_pattern(base: &BaseUrl) -> String {
    // The loop check refuses the host on any port, with or without the root's trailing dot.
    let host: String = base
        .host()
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphabetic() => {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            }
            c if c.is_ascii_alphanumeric() || c == ':' || c == '-' => c.to_string(),
            c => format!("\\{c}"),
        })
        .collect();
    format!("^[hH][tT][tT][pP][sS]?://{host}\\.?(:[0-9]*)?([/?#]|$)")
}

/// The complete document for a server whose short links live on `base`: the generated part,
/// plus what utoipa has no builder for (OpenAPI 3.1 `webhooks`) and the one rule that depends on
/// configuration (a destination may not point at the service's own domain).
/// `docs/openapi.json` is the document of the default configuration.
pub fn document(base: &BaseUrl) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    // The scheme, `//` and a host (domain's `names_its_host`): no text a parser would repair.
    let names_its_host = json!({ "pattern": "^[hH][tT][tT][pP][sS]?://[^/\\\\?#]" });
    doc["components"]["schemas"]["CreateWebhookRequest"]["properties"]["targetUrl"]["allOf"] =
        json!([names_its_host]);
    let url_rules = json!([
        names_its_host,
        { "not": { "pattern": own_domain_pattern(base) } },
        // Normalising adds the `/` of an empty path, so a destination of the full length
        // without one is one character too long once stored.
        { "not": { "pattern": "^[^:]+://[^/]*$", "minLength": MAX_DESTINATION_LEN } },
    ]);
    // The rules of the option fields that utoipa's attributes cannot state (domain's
    // `link_options.rs` has them): no control characters, tags without surrounding spaces,
    // two-letter countries, the four redirect statuses, URLs as destinations are.
    const CONTROL: &str = "\\u0000-\\u001F\\u007F-\\u009F";
    const CONTROL_BUT_LINES: &str = "\\u0000-\\u0009\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F";
    let no_control = format!("^[^{CONTROL}]*$");
    // Not blank: one character that is neither a space nor a control character. The spaces are
    // Rust's (Unicode's White_Space, the controls among them left to CONTROL), spelled out: a
    // pattern's `\s` also takes U+FEFF, which the domain lets through.
    const SPACE: &str = " \\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
    let visible = |excluded: &str| format!("^[^{excluded}]*[^{SPACE}{CONTROL}][^{excluded}]*$");
    let tag = format!("^[^{SPACE}{CONTROL}](?:[^{CONTROL}]*[^{SPACE}{CONTROL}])?$");
    for schema in ["CreateLinkRequest", "UpdateLinkRequest"] {
        let props = &mut doc["components"]["schemas"][schema]["properties"];
        for url in ["destination", "expiredUrl", "ios", "android", "image"] {
            props[url]["allOf"] = url_rules.clone();
            props[url]["maxLength"] = json!(MAX_DESTINATION_LEN);
        }
        props["geo"]["propertyNames"] = json!({ "pattern": "^[A-Za-z]{2}$" });
        props["geo"]["additionalProperties"] = json!({
            "type": "string", "format": "uri", "maxLength": MAX_DESTINATION_LEN,
            "allOf": url_rules,
        });
        props["redirectType"]["enum"] = json!([301, 302, 307, 308, null]);
        props["tags"]["items"] =
            json!({ "type": "string", "minLength": 1, "maxLength": MAX_TAG_LEN, "pattern": tag });
        props["title"]["pattern"] = json!(visible(CONTROL));
        props["description"]["pattern"] = json!(visible(CONTROL_BUT_LINES));
    }
    if let Some(params) = doc["paths"]["/api/v1/links"]["get"]["parameters"].as_array_mut() {
        for param in params.iter_mut() {
            match param["name"].as_str() {
                Some("tag") => param["schema"]["pattern"] = json!(tag),
                Some("search") => param["schema"]["pattern"] = json!(no_control),
                _ => {}
            }
        }
    }
    let event = |kind: EventKind, schema: &str| {
        json!({ "post": {
            "summary": format!("`{kind}`, POSTed to subscribed endpoints, signed per Standard Webhooks"),
            "parameters": [
                { "name": "webhook-id", "in": "header", "required": true, "schema": { "type": "string" },
                  "description": "The message id (`msg_…`), the same on every retry." },
                { "name": "webhook-timestamp", "in": "header", "required": true, "schema": { "type": "string" },
                  "description": "Unix seconds of this attempt." },
                { "name": "webhook-signature", "in": "header", "required": true, "schema": { "type": "string" },
                  "description": "`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the secret's decoded bytes." }
            ],
            "requestBody": { "required": true, "content": { "application/json": {
                "schema": { "$ref": format!("#/components/schemas/{schema}") } } } },
            "responses": { "2XX": { "description": "Delivered. Anything else is retried by the schedule." } }
        }})
    };
    doc["webhooks"] = json!({
        "link.created": event(EventKind::LinkCreated, "LinkCreatedEvent"),
        "link.clicked": event(EventKind::LinkClicked, "LinkClickedEvent"),
        "link.updated": event(EventKind::LinkUpdated, "LinkUpdatedEvent"),
        "link.deleted": event(EventKind::LinkDeleted, "LinkDeletedEvent"),
    });
    doc
}

/// `GET /openapi.json` (no authentication), mounted under `/api/v1`; the page that shows it,
/// `GET /docs`, and its assets are [`configure_page`]'s.
pub fn configure_document(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::get_only("/openapi.json", serve_document));
}

/// `GET /docs`, the page that shows the document, and its bundled assets under `/docs/`, mounted
/// at the root.
pub fn configure_page(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/docs",
        crate::get().to(|| async {
            let mut page = asset("text/html; charset=utf-8", PAGE.as_bytes());
            page.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                header::HeaderValue::from_static(PAGE_POLICY),
            );
            page
        }),
    )
    .route(
        "/docs/swagger-ui.css",
        crate::get().to(|| async { asset("text/css; charset=utf-8", CSS) }),
    )
    .route(
        "/docs/swagger-ui-bundle.js",
        crate::get().to(|| async { asset("text/javascript; charset=utf-8", JS) }),
    )
    .route(
        "/docs/init.js",
        crate::get().to(|| async { asset("text/javascript; charset=utf-8", INIT.as_bytes()) }),
    );
}

/// The page's Content-Security-Policy: its own scripts only (the page starts Swagger UI from a
/// file, not inline), styles of its own and those Swagger UI sets on its elements, no framing.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' \
    'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

async fn serve_document(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(document(state.base()))
}

const CSS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui.css");
const JS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js");
const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>shortlink API</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
"##;
const INIT: &str = r##"window.ui = SwaggerUIBundle({
  url: "/api/v1/openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
  deepLinking: true,
});
"##;

fn asset(content_type: &'static str, body: &'static [u8]) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");

    fn document() -> Value {
        super::document(&BaseUrl::parse("http://127.0.0.1:8080").unwrap())
    }

    #[test]
    fn destinations_on_the_own_domain_are_excluded_by_pattern() {
        let pattern = own_domain_pattern(&BaseUrl::parse("https://Sho.rt:8443").unwrap());
        assert_eq!(
            pattern,
            "^[hH][tT][tT][pP][sS]?://[sS][hH][oO]\\.[rR][tT]\\.?(:[0-9]*)?([/?#]|$)"
        );
        let pattern = own_domain_pattern(&BaseUrl::parse("http://[::1]:8080").unwrap());
        assert_eq!(
            pattern,
            "^[hH][tT][tT][pP][sS]?://\\[::1\\]\\.?(:[0-9]*)?([/?#]|$)"
        );
    }

    /// A value matches exactly one schema of a `oneOf`: each is of another type, or requires a
    /// property the others do not have (a time series bucket matched a breakdown entry too, whose
    /// `key` was optional).
    #[test]
    fn the_schemas_of_each_one_of_are_told_apart() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        fn named<'a>(schemas: &'a Value, r: &'a Value) -> &'a Value {
            match r["$ref"].as_str() {
                Some(name) => &schemas[name.trim_start_matches("#/components/schemas/")],
                None => r,
            }
        }
        let mut checked = 0;
        for (name, schema) in schemas.as_object().unwrap() {
            let Some(alternatives) = schema["oneOf"].as_array() else {
                continue;
            };
            for (i, a) in alternatives.iter().enumerate() {
                for (j, b) in alternatives.iter().enumerate().filter(|(j, _)| *j != i) {
                    let (a, b) = (named(schemas, a), named(schemas, b));
                    let required = a["required"].as_array().into_iter().flatten();
                    let told_apart = a["type"] != b["type"]
                        || required
                            .filter_map(Value::as_str)
                            .any(|field| b["properties"].get(field).is_none());
                    assert!(
                        told_apart,
                        "{name}: alternative {i} also matches {j}'s values"
                    );
                }
            }
            checked += 1;
        }
        assert!(checked > 0);
    }

    /// The patterns the document states for option fields accept what the domain's rules accept,
    /// and nothing else, on the characters where they could part: spaces of every kind, controls,
    /// line breaks, U+FEFF.
    #[test]
    fn the_documented_patterns_are_the_rules() {
        use shortlink_domain::{Preview, Tag};
        let doc = document();
        let props = &doc["components"]["schemas"]["CreateLinkRequest"]["properties"];
        let pattern = |p: &Value| regex::Regex::new(p.as_str().unwrap()).unwrap();
        let (tag, title, description) = (
            pattern(&props["tags"]["items"]["pattern"]),
            pattern(&props["title"]["pattern"]),
            pattern(&props["description"]["pattern"]),
        );
        let odd = [
            " ", "\u{a0}", "\u{85}", "\u{2003}", "\u{3000}", "\u{feff}", "\u{200b}", "\t", "\n",
            "\r", "\u{1}", "\u{7f}", "\u{9f}", "a", "é",
        ];
        let mut samples: Vec<String> = Vec::new();
        for a in odd {
            samples.push(a.to_owned());
            for b in odd {
                samples.push(format!("{a}x{b}"));
                samples.push(format!("{a}{b}"));
            }
        }
        for s in &samples {
            assert_eq!(tag.is_match(s), Tag::parse(s).is_ok(), "tag {s:?}");
            assert_eq!(title.is_match(s), Preview::title(s).is_ok(), "title {s:?}");
            assert_eq!(
                description.is_match(s),
                Preview::description(s).is_ok(),
                "description {s:?}"
            );
        }
    }

    /// The limits the attributes state as numbers are the domain's and the API's constants.
    #[test]
    fn the_documented_limits_are_the_rules() {
        use shortlink_domain::{
            MAX_DESCRIPTION_LEN, MAX_MAX_CLICKS, MAX_PASSWORD_LEN, MAX_SLUG_LEN, MAX_TAGS,
            MAX_TITLE_LEN,
        };
        let doc = document();
        for schema in ["CreateLinkRequest", "UpdateLinkRequest"] {
            let props = &doc["components"]["schemas"][schema]["properties"];
            let limits = [
                (&props["title"]["maxLength"], json!(MAX_TITLE_LEN)),
                (
                    &props["description"]["maxLength"],
                    json!(MAX_DESCRIPTION_LEN),
                ),
                (&props["password"]["maxLength"], json!(MAX_PASSWORD_LEN)),
                (&props["maxClicks"]["maximum"], json!(MAX_MAX_CLICKS)),
                (&props["tags"]["maxItems"], json!(MAX_TAGS)),
                (&props["tags"]["items"]["maxLength"], json!(MAX_TAG_LEN)),
                (
                    &props["customSlug"]["pattern"],
                    json!(format!("^[A-Za-z0-9_-]{{1,{MAX_SLUG_LEN}}}$")),
                ),
            ];
            for (documented, rule) in limits {
                assert_eq!(documented, &rule, "{schema}");
            }
        }
        let link_parts = doc["components"]["schemas"]["LinkView"]["allOf"]
            .as_array()
            .unwrap();
        let short_code = (link_parts.iter())
            .find_map(|part| part["properties"].get("shortCode"))
            .unwrap();
        assert_eq!(
            short_code["pattern"],
            json!(format!("^[A-Za-z0-9_-]{{1,{MAX_SLUG_LEN}}}$"))
        );
        let key = json!(format!("^[!-~]{{1,{}}}$", crate::idempotency::MAX_KEY_LEN));
        for path in ["/api/v1/links", "/api/v1/links/bulk", "/api/v1/webhooks"] {
            let params = doc["paths"][path]["post"]["parameters"].as_array().unwrap();
            let header = params
                .iter()
                .find(|p| p["name"] == "Idempotency-Key")
                .unwrap();
            assert_eq!(header["schema"]["pattern"], key, "{path}");
            let created = &doc["paths"][path]["post"]["responses"]["200"]["headers"];
            assert!(created.get("Idempotent-Replayed").is_some(), "{path}");
        }
        let listed = &doc["paths"]["/api/v1/links"]["get"]["responses"]["200"]["headers"];
        assert!(listed.get("Idempotent-Replayed").is_none());

        // The query parameters' bounds.
        let param = |path: &str, name: &str| {
            let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
            let found = params.iter().find(|p| p["name"] == name);
            found.unwrap_or_else(|| panic!("{path} {name}"))["schema"].clone()
        };
        use crate::extract::{MAX_FILTER_CHARS, MAX_PAGE_LIMIT};
        for path in [
            "/api/v1/links",
            "/api/v1/analytics",
            "/api/v1/webhooks/{id}/deliveries",
        ] {
            assert_eq!(
                param(path, "limit")["maximum"],
                json!(MAX_PAGE_LIMIT),
                "{path}"
            );
        }
        assert_eq!(
            param("/api/v1/links", "tag")["maxLength"],
            json!(MAX_TAG_LEN)
        );
        assert_eq!(
            param("/api/v1/links", "search")["maxLength"],
            json!(MAX_FILTER_CHARS)
        );
        for filter in ["city", "browser", "os", "referrer"] {
            assert_eq!(
                param("/api/v1/analytics", filter)["maxLength"],
                json!(MAX_FILTER_CHARS),
                "{filter}"
            );
        }
        let size = param("/api/v1/qr", "size");
        assert_eq!(size["minimum"], json!(shortlink_qr::MIN_SIZE));
        assert_eq!(size["maximum"], json!(shortlink_qr::MAX_SIZE));
        assert_eq!(
            param("/api/v1/qr", "margin")["maximum"],
            json!(shortlink_qr::MAX_MARGIN)
        );
    }

    /// CI fails when `docs/openapi.json` differs from what the server serves. To refresh it:
    /// `UPDATE_OPENAPI=1 cargo test -p shortlink-http openapi`.
    #[test]
    fn the_checked_in_document_is_current() {
        let current = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(CHECKED_IN, &current).unwrap();
        }
        let checked_in = std::fs::read_to_string(CHECKED_IN).unwrap_or_default();
        assert!(
            checked_in == current,
            "docs/openapi.json is stale; run `UPDATE_OPENAPI=1 cargo test -p shortlink-http openapi`"
        );
    }

    #[test]
    fn every_operation_is_secured_and_documents_its_errors() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().unwrap();
        assert!(paths.contains_key("/api/v1/links/bulk") && paths.contains_key("/api/v1/qr"));
        for (path, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                assert_eq!(op["security"][0]["bearer"], json!([]), "{method} {path}");
                for status in ["200", "400", "401", "429", "500", "503"] {
                    assert!(
                        op["responses"].get(status).is_some(),
                        "{method} {path} documents {status}"
                    );
                }
            }
        }
        assert!(doc["webhooks"]["link.clicked"]["post"].is_object());
        assert!(doc["components"]["schemas"]["LinkView"].is_object());
    }

    /// The documented event schemas list exactly the keys `Event` serialises.
    #[test]
    fn event_schemas_match_the_events() {
        use shortlink_domain::{Event, LinkId};
        let view = LinkView {
            id: LinkId::generate(),
            domain: "sho.rt".into(),
            short_code: "a".into(),
            short_url: "https://sho.rt/a".into(),
            destination: "https://example.com/".into(),
            clicks: 0,
            created_at: Timestamp::now(),
            options: Default::default(),
        };
        let click = ClickInfo::bare(Timestamp::now());
        let doc = document();
        for (event, schema) in [
            (Event::link_created(view.clone()), "LinkCreatedEvent"),
            (
                Event::link_updated(view.clone(), Timestamp::now()),
                "LinkUpdatedEvent",
            ),
            (
                Event::link_deleted(view.clone(), Timestamp::now()),
                "LinkDeletedEvent",
            ),
            (Event::link_clicked(view, click), "LinkClickedEvent"),
        ] {
            let body: Value = serde_json::from_str(&event.to_json()).unwrap();
            let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            let props = &doc["components"]["schemas"][schema]["properties"];
            let mut documented: Vec<&String> = props.as_object().unwrap().keys().collect();
            keys.sort();
            documented.sort();
            assert_eq!(keys, documented, "{schema}");
        }
    }
}
