//! `/api/v1/webhooks`: registration, reading, deleting, and the deliveries list. Delivery itself
//! (signatures, retries) is tested with a real receiver elsewhere.

use reqwest::Method;
use serde_json::{Value, json};
use shortlink_storage::testing::TestDatabase;

use shortlink_domain::{EventKind, Timestamp, Webhook, WebhookId, WebhookSecret, WebhookTarget};

use crate::helpers::{
    DEADLINE, Setup, TestApp, assert_error, assert_invalid, assert_ok, keys, on_both_backends,
    poll, send, text,
};

async fn register(app: &TestApp, events: &[&str]) -> Value {
    // The server's own health check: private targets are allowed in the harness, and what the
    // target answers does not matter here.
    let target = app.url("/healthz");
    assert_ok(
        app.post_json(
            "/webhooks",
            &json!({ "targetUrl": target, "events": events }),
        )
        .await,
    )
    .await
}

#[tokio::test]
async fn registration_returns_the_secret_once() {
    let app = TestApp::spawn().await;
    let hook = register(&app, &["link.created", "link.clicked"]).await;
    let id = text(&hook["id"]);
    assert!(id.starts_with("wh_") && id.len() == 3 + 26, "{id}");
    assert_eq!(hook["targetUrl"], app.url("/healthz"));
    let mut events: Vec<&str> = hook["events"]
        .as_array()
        .expect("events is an array")
        .iter()
        .map(text)
        .collect();
    events.sort_unstable();
    assert_eq!(events, ["link.clicked", "link.created"]);
    let secret = text(&hook["secret"]);
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(secret.len() > "whsec_".len() + 40, "{secret}");
    crate::helpers::assert_timestamp(text(&hook["createdAt"]));

    let read = assert_ok(app.get(&format!("/webhooks/{id}")).await).await;
    assert!(read.get("secret").is_none(), "{read}");
    assert_eq!(read["id"], hook["id"]);
    assert_eq!(read["targetUrl"], hook["targetUrl"]);
    let list = assert_ok(app.get("/webhooks").await).await;
    let list = list.as_array().expect("data is an array");
    assert_eq!(list.len(), 1);
    assert!(list[0].get("secret").is_none(), "{}", list[0]);
    assert_eq!(list[0]["id"], hook["id"]);
    assert!(!keys(&list[0]).contains(&"secret"));
}

#[tokio::test]
async fn bad_registrations_are_400() {
    let app = TestApp::spawn().await;
    let target = app.url("/healthz");

    let res = app
        .post_json(
            "/webhooks",
            &json!({ "targetUrl": target, "events": ["link.archived"] }),
        )
        .await;
    let error = assert_invalid(res, &["events"]).await;
    assert!(
        text(&error["message"]).contains("link.created, link.clicked"),
        "{error}"
    );

    for body in [
        json!({ "targetUrl": target, "events": [] }),
        json!({ "targetUrl": target }),
        json!({ "targetUrl": target, "events": "link.created" }),
    ] {
        let res = app.post_json("/webhooks", &body).await;
        assert_invalid(res, &["events"]).await;
    }
    for target in [
        "ftp://example.com/",
        "not a url",
        "https://exa mple.com/",
        "",
    ] {
        assert_target_refused(&app, target).await;
    }
    let res = app
        .post_json(
            "/webhooks",
            &json!({ "targetUrl": target, "events": ["link.created"], "secret": "mine" }),
        )
        .await;
    assert_invalid(res, &["secret"]).await;

    let list = assert_ok(app.get("/webhooks").await).await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn private_targets_are_refused_unless_allowed() {
    let setup = Setup {
        allow_private_targets: false,
        ..Setup::default()
    };
    let app = TestApp::spawn_with(TestDatabase::sqlite(), setup).await;
    for target in [
        "http://127.0.0.1/",
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/",
        "http://0.0.0.0/",
        "https://user:pass@hooks.example.com/in",
        "https://user@hooks.example.com/in",
    ] {
        assert_target_refused(&app, target).await;
    }
    let hook = assert_ok(
        app.post_json(
            "/webhooks",
            &json!({ "targetUrl": "https://hooks.example.com/in", "events": ["link.created"] }),
        )
        .await,
    )
    .await;
    assert_eq!(hook["targetUrl"], "https://hooks.example.com/in");
}

/// An embedder says once, on the service, that webhooks may target private addresses: the
/// registration of an endpoint goes by the setting its deliveries go by.
#[actix_web::test]
async fn an_embedder_allows_private_targets_on_the_service_alone() {
    use actix_web::{App, middleware::from_fn, test};
    use shortlink_http::{AppState, HttpSettings};
    use shortlink_service::{Service, ServiceSettings};
    use shortlink_storage::{Store, StoreOptions};
    use shortlink_webhooks::WorkerConfig;

    let db = TestDatabase::sqlite();
    let store = Store::open(&db.url, StoreOptions::default())
        .await
        .expect("the test database opens");
    let settings = ServiceSettings {
        webhooks: WorkerConfig {
            allow_private: true,
            ..WorkerConfig::default()
        },
        ..ServiceSettings::new(shortlink_domain::BaseUrl::parse("https://sho.rt").expect("a base"))
    };
    let service = Service::new(store.clone(), settings).expect("the service starts");
    let workspace = shortlink_server::admin::create_workspace(&store, "acme", 100)
        .await
        .expect("the workspace is created");
    let (_, secret) = shortlink_server::admin::create_key(&store, &workspace, "tests")
        .await
        .expect("the key is created");
    let state = actix_web::web::Data::new(AppState::new(service.clone(), HttpSettings::default()));
    let app = test::init_service(
        App::new()
            .wrap(from_fn(shortlink_http::middleware::request_context))
            .configure(|cfg| shortlink_http::configure(cfg, state)),
    )
    .await;

    let request = test::TestRequest::post()
        .uri("/api/v1/webhooks")
        .insert_header(("Authorization", format!("Bearer {}", secret.expose())))
        .set_json(json!({ "targetUrl": "http://127.0.0.1:9/hook", "events": ["link.created"] }))
        .to_request();
    let res = test::call_service(&app, request).await;
    let status = res.status();
    let body: Value = test::read_body_json(res).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["targetUrl"], "http://127.0.0.1:9/hook");
    service.shutdown().await.expect("the service stops");
}

#[tokio::test]
async fn deleted_and_other_workspaces_webhooks_are_404() {
    let app = TestApp::spawn().await;
    let hook = register(&app, &["link.created"]).await;
    let path = format!("/webhooks/{}", text(&hook["id"]));

    let other = app.new_tenant("other", 100).await;
    for (method, path) in [
        (Method::GET, path.clone()),
        (Method::DELETE, path.clone()),
        (Method::GET, format!("{path}/deliveries")),
    ] {
        let res = send(app.api_as(&other.key, method, &path)).await;
        assert_error(res, 404, "NOT_FOUND").await;
    }
    let theirs = assert_ok(send(app.api_as(&other.key, Method::GET, "/webhooks")).await).await;
    assert_eq!(theirs, json!([]));

    let deleted = assert_ok(app.delete(&path).await).await;
    assert_eq!(deleted["id"], hook["id"]);
    assert!(deleted.get("secret").is_none());
    assert_error(app.get(&path).await, 404, "NOT_FOUND").await;
    assert_error(app.delete(&path).await, 404, "NOT_FOUND").await;
    assert_error(
        app.get(&format!("{path}/deliveries")).await,
        404,
        "NOT_FOUND",
    )
    .await;
    assert_eq!(assert_ok(app.get("/webhooks").await).await, json!([]));

    for unknown in ["wh_01JD0000000000000000000000", "nope"] {
        let res = app.get(&format!("/webhooks/{unknown}")).await;
        assert_error(res, 404, "NOT_FOUND").await;
    }
}

#[tokio::test]
async fn a_created_link_shows_up_as_a_delivery() {
    let app = TestApp::spawn().await;
    let hook = register(&app, &["link.created"]).await;
    let path = format!("/webhooks/{}/deliveries", text(&hook["id"]));
    assert_eq!(
        assert_ok(app.get(&path).await).await,
        json!({ "items": [], "nextCursor": null })
    );

    app.create_code("https://example.com/").await;
    let deliveries = poll(DEADLINE, || async {
        let page = assert_ok(app.get(&path).await).await;
        (page["items"].as_array().is_some_and(|l| !l.is_empty())).then_some(page)
    })
    .await
    .expect("the delivery is listed");
    assert_eq!(deliveries["nextCursor"], Value::Null);
    let deliveries = deliveries["items"].as_array().expect("items is an array");
    assert_eq!(deliveries.len(), 1);
    let delivery = &deliveries[0];
    assert!(text(&delivery["eventId"]).starts_with("msg_"), "{delivery}");
    assert_eq!(delivery["type"], "link.created");
    let state = text(&delivery["state"]);
    assert!(state == "pending" || state == "delivered", "{delivery}");
    assert!(delivery["attempts"].as_i64().is_some(), "{delivery}");
    crate::helpers::assert_timestamp(text(&delivery["createdAt"]));
    for field in ["lastStatusCode", "lastError", "updatedAt"] {
        assert!(delivery.get(field).is_some(), "{field}: {delivery}");
    }
}

/// Registering `target` for `link.created` is refused, naming `targetUrl`.
async fn assert_target_refused(app: &TestApp, target: &str) {
    let res = app
        .post_json(
            "/webhooks",
            &json!({ "targetUrl": target, "events": ["link.created"] }),
        )
        .await;
    assert_invalid(res, &["targetUrl"]).await;
}

on_both_backends!(stored_credentials_in_a_target_are_never_shown);

/// Targets registered before credentials were refused keep working, but the API does not show
/// their `user:password@`.
async fn stored_credentials_in_a_target_are_never_shown(app: TestApp) {
    let target = "https://user:s3cret@hooks.example.com/in?x=1";
    let hook = Webhook {
        id: WebhookId::generate(),
        workspace_id: app.tenant.workspace.id,
        target: WebhookTarget::from_trusted(target).expect("a URL"),
        events: vec![EventKind::LinkCreated],
        secret: WebhookSecret::generate(),
        created_at: Timestamp::now(),
        disabled_at: None,
        consecutive_failures: 0,
    };
    app.store
        .create_webhook(&hook)
        .await
        .expect("the webhook is stored");
    let shown = "https://hooks.example.com/in?x=1";
    let list = assert_ok(app.get("/webhooks").await).await;
    assert_eq!(list[0]["targetUrl"], shown, "{list}");
    let read = assert_ok(app.get(&format!("/webhooks/{}", hook.id)).await).await;
    assert_eq!(read["targetUrl"], shown, "{read}");
    let deleted = assert_ok(app.delete(&format!("/webhooks/{}", hook.id)).await).await;
    assert_eq!(deleted["targetUrl"], shown, "{deleted}");
}

on_both_backends!(deliveries_are_paged_filtered_and_refuse_bad_parameters);

/// `limit`, `cursor` and `state` on the deliveries list, and 400 for anything else.
async fn deliveries_are_paged_filtered_and_refuse_bad_parameters(app: TestApp) {
    // The server's own API answers 401 to deliveries, so each one fails its first attempt and
    // stays pending; 25 of them are past the default page size.
    let hook = register(&app, &["link.created"]).await;
    let path = format!("/webhooks/{}/deliveries", text(&hook["id"]));
    let bulk: Vec<Value> = (0..25)
        .map(|i| json!({ "destination": format!("https://example.com/{i}") }))
        .collect();
    assert_ok(app.post_json("/links/bulk", &json!(bulk)).await).await;
    let first = poll(DEADLINE, || async {
        let page = assert_ok(app.get(&format!("{path}?limit=100")).await).await;
        (page["items"].as_array().map(Vec::len) == Some(25)).then_some(page)
    })
    .await
    .expect("25 deliveries are listed");
    let all: Vec<String> = first["items"]
        .as_array()
        .expect("items is an array")
        .iter()
        .map(|d| text(&d["eventId"]).to_owned())
        .collect();
    assert_eq!(first["nextCursor"], Value::Null);
    let mut sorted = all.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(all, sorted, "newest first");

    // The default page is 20; pages of 7 cover every delivery once, in the same order.
    let default = assert_ok(app.get(&path).await).await;
    assert_eq!(default["items"].as_array().map(Vec::len), Some(20));
    let mut paged = Vec::new();
    let mut url = format!("{path}?limit=7");
    loop {
        let page = assert_ok(app.get(&url).await).await;
        let items = page["items"].as_array().expect("items is an array");
        assert!(items.len() <= 7, "{page}");
        paged.extend(items.iter().map(|d| text(&d["eventId"]).to_owned()));
        match page["nextCursor"].as_str() {
            Some(cursor) => url = format!("{path}?limit=7&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, all);

    // By state: none has been delivered (the target answers 401).
    let delivered = assert_ok(app.get(&format!("{path}?state=delivered")).await).await;
    assert_eq!(delivered, json!({ "items": [], "nextCursor": null }));
    let page = assert_ok(app.get(&format!("{path}?state=pending&limit=100")).await).await;
    let pending = page["items"].as_array().expect("items is an array");
    assert!(pending.iter().all(|d| d["state"] == "pending"), "{page}");

    let foreign_cursor = format!("cursor={}", all[0]);
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("state=sent", "state"),
        ("state=", "state"),
        ("cursor=bm90IG91cnM", "cursor"),
        (foreign_cursor.as_str(), "cursor"),
        ("page=2", "page"),
    ] {
        let res = app.get(&format!("{path}?{query}")).await;
        assert_invalid(res, &[field]).await;
    }
}

on_both_backends!(a_workspace_has_at_most_25_endpoints);

/// Every event goes to every endpoint subscribed: without a bound, one workspace could turn each
/// click into any number of requests to one URL.
async fn a_workspace_has_at_most_25_endpoints(app: TestApp) {
    // At once: the last places are taken by one request each, never by two.
    let attempts = futures_util::future::join_all((0..30).map(|_| async {
        let body = json!({ "targetUrl": app.url("/healthz"), "events": ["link.created"] });
        app.post_json("/webhooks", &body).await
    }))
    .await;
    let mut refused = 0;
    for res in attempts {
        if res.status() == 409 {
            let error = assert_error(res, 409, "WEBHOOK_LIMIT_REACHED").await;
            let message = text(&error["message"]);
            assert!(message.contains("at most 25"), "{message}");
            refused += 1;
        } else {
            assert_ok(res).await;
        }
    }
    assert_eq!(refused, 5);
    let list = assert_ok(app.get("/webhooks").await).await;
    let hooks = list.as_array().expect("a list");
    assert_eq!(hooks.len(), 25);

    // A place given back is taken again.
    let first = text(&hooks[0]["id"]).to_owned();
    assert_ok(app.delete(&format!("/webhooks/{first}")).await).await;
    register(&app, &["link.created"]).await;
    let body = json!({ "targetUrl": app.url("/healthz"), "events": ["link.created"] });
    let full = app.post_json("/webhooks", &body).await;
    assert_error(full, 409, "WEBHOOK_LIMIT_REACHED").await;
}
