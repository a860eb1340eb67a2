//! `/healthz` and `/readyz`, and 503 SERVICE_UNAVAILABLE while the database is unreachable, with
//! recovery once it is back.

use std::path::PathBuf;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use serde_json::json;
use shortlink_storage::testing::{TEST_POSTGRES_URL, TestDatabase};

use crate::helpers::{
    DEADLINE, Setup, TestApp, assert_error, assert_ok, header, on_both_backends, poll, send,
};

#[tokio::test]
async fn health_and_readiness_answer_in_the_envelope() {
    let app = TestApp::spawn().await;
    let health = assert_ok(send(app.client.get(app.url("/healthz"))).await).await;
    assert_eq!(health["status"], "ok");
    let ready = assert_ok(send(app.client.get(app.url("/readyz"))).await).await;
    assert_eq!(ready["status"], "ok");
    // Neither needs a key, nor counts against a rate.
    for _ in 0..3 {
        let res = send(app.client.get(app.url("/readyz"))).await;
        assert!(res.headers().get("ratelimit-limit").is_none());
        assert_ok(res).await;
    }
}

/// On SQLite the database is "unreachable" when its file cannot be opened: it is moved away and
/// a directory takes its place. Connections are opened lazily and the server has opened no
/// reader yet, so the probe and the key lookup must open one, and fail.
#[tokio::test]
async fn an_unopenable_sqlite_file_is_503_until_it_is_back() {
    let setup = Setup {
        check_key: false,
        ..Setup::default()
    };
    let app = TestApp::spawn_with(TestDatabase::sqlite(), setup).await;
    let path = PathBuf::from(
        app.db
            .url
            .strip_prefix("sqlite://")
            .expect("a SQLite test database"),
    );
    let away = path.with_extension("away");
    std::fs::rename(&path, &away).expect("the database file moves");
    std::fs::create_dir(&path).expect("a directory takes its place");

    let ready = send(app.client.get(app.url("/readyz"))).await;
    let error = assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    assert!(!error.to_string().contains(path.to_str().unwrap_or("-")));
    let api = app.get("/links").await;
    assert_error(api, 503, "SERVICE_UNAVAILABLE").await;
    // The liveness probe does not depend on the database.
    assert_ok(send(app.client.get(app.url("/healthz"))).await).await;

    std::fs::remove_dir(&path).expect("the directory goes");
    std::fs::rename(&away, &path).expect("the database file is back");
    assert_ok(send(app.client.get(app.url("/readyz"))).await).await;
    assert_ok(app.get("/links").await).await;
}

/// A SQLite file deleted under the server: its connections would go on writing into the deleted
/// file, lost at the next start, so it is not ready (the API itself goes on serving).
#[tokio::test]
async fn a_sqlite_file_deleted_under_the_server_is_not_ready() {
    let app = TestApp::spawn_with(TestDatabase::sqlite(), Setup::default()).await;
    assert_ok(send(app.client.get(app.url("/readyz"))).await).await;
    let path = app
        .db
        .url
        .strip_prefix("sqlite://")
        .expect("a SQLite test database")
        .to_owned();
    std::fs::remove_file(&path).expect("the database file is deleted");

    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    // A new, empty file in its place is not the server's either.
    std::fs::write(&path, b"").expect("an empty file takes its place");
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
}

async fn postgres_admin(sql: &str) {
    let url = std::env::var(TEST_POSTGRES_URL).expect("only run with PostgreSQL configured");
    let mut conn = AsyncPgConnection::establish(&url)
        .await
        .expect("PostgreSQL answers");
    conn.batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// On PostgreSQL: the server's database is dropped under it (its connections terminated), then
/// created again, empty, then migrated.
#[tokio::test]
async fn a_dropped_postgres_database_is_503_until_it_is_back() {
    let test = concat!(
        module_path!(),
        "::a_dropped_postgres_database_is_503_until_it_is_back"
    );
    let Some(app) = TestApp::spawn_on_postgres(test).await else {
        return;
    };
    let code = app.create_code("https://example.com/").await;
    // The creation's announcement comes back to this instance too and empties the code's cache
    // entry: the visit that caches it must come after (see the frozen network's test below).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(app.visit(&code).await.status(), 302);
    assert_ok(app.get("/links").await).await;
    let name = app
        .db
        .url
        .rsplit('/')
        .next()
        .and_then(|s| s.split('?').next())
        .expect("the URL names its database")
        .to_owned();

    postgres_admin(&format!("DROP DATABASE {name} WITH (FORCE)")).await;
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    // The key is still cached, so the request reaches the database, which is gone.
    assert_error(app.get("/links").await, 503, "SERVICE_UNAVAILABLE").await;
    assert_error(
        app.post_json("/links", &json!({ "destination": "https://example.com/" }))
            .await,
        503,
        "SERVICE_UNAVAILABLE",
    )
    .await;
    // A cached redirect keeps working.
    assert_eq!(app.visit(&code).await.status(), 302);
    // A code this instance has not seen cannot be looked up: a page says so, not the envelope.
    let visit = app.visit("never-seen").await;
    assert_eq!(visit.status(), 503);
    assert_eq!(
        header(visit.headers(), "content-type"),
        Some("text/html; charset=utf-8")
    );
    let page = visit.text().await.unwrap_or_default();
    assert!(
        page.contains("<h1>Service Unavailable</h1>")
            && page.contains("The service is temporarily unavailable; retry shortly."),
        "{page}"
    );

    // Created again, it answers but is empty: not the schema this build serves, so not ready
    // (every request would fail on a missing table).
    postgres_admin(&format!("CREATE DATABASE {name}")).await;
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    // The API says the same, not a 500 for a missing table.
    assert_error(app.get("/links").await, 503, "SERVICE_UNAVAILABLE").await;
    // Migrated (`shortlink migrate`, or another instance starting), it is ready again.
    app.db.store().await;
    let recovered = poll(DEADLINE, || async {
        let res = send(app.client.get(app.url("/readyz"))).await;
        (res.status() == 200).then_some(res)
    })
    .await
    .expect("readiness recovers by itself");
    assert_ok(recovered).await;
}

on_both_backends!(readiness_needs_the_schema_this_build_expects);

/// A database that answers but whose schema is not this build's (recreated empty, or migrated
/// by another build) is not ready: every request would fail.
async fn readiness_needs_the_schema_this_build_expects(app: TestApp) {
    assert_ok(send(app.client.get(app.url("/readyz"))).await).await;
    app.db
        .execute(
            "DELETE FROM __diesel_schema_migrations \
             WHERE version = (SELECT max(version) FROM __diesel_schema_migrations)",
        )
        .await;
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    app.db
        .execute("DROP TABLE __diesel_schema_migrations")
        .await;
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
}

/// The network to PostgreSQL freezes (connections stay open, nothing passes): API requests answer
/// 503 within the documented 6 s instead of hanging, a link seen before keeps redirecting, and
/// everything recovers when the network does.
#[tokio::test]
async fn a_frozen_postgres_network_is_503_within_six_seconds() {
    use shortlink_storage::testing::fault_proxy::{Fault, FaultProxy};
    let test = concat!(module_path!(), "::a_frozen_postgres_network");
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let (proxy, url) = FaultProxy::for_postgres(&db.url).await;
    let app = TestApp::spawn_reaching(db, &url, Setup::default()).await;
    let code = app.create_code("https://example.com/frozen").await;
    // The creation's announcement comes back to this instance too and empties the code's cache
    // entry; the visit that caches it must come after (on a loaded machine it once came first,
    // and the frozen network then found no entry to answer from).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(app.visit(&code).await.status(), 302);

    proxy.set(Fault::Freeze);
    let bound = std::time::Duration::from_secs(6);
    for path in ["/links", "/webhooks"] {
        let started = std::time::Instant::now();
        assert_error(app.get(path).await, 503, "SERVICE_UNAVAILABLE").await;
        assert!(started.elapsed() < bound, "{path}: {:?}", started.elapsed());
    }
    let started = std::time::Instant::now();
    let ready = send(app.client.get(app.url("/readyz"))).await;
    assert_error(ready, 503, "SERVICE_UNAVAILABLE").await;
    assert!(
        started.elapsed() < bound,
        "/readyz: {:?}",
        started.elapsed()
    );
    assert_eq!(app.visit(&code).await.status(), 302, "a link seen before");

    proxy.set(Fault::None);
    let back = poll(DEADLINE * 2, async || {
        (app.get("/links").await.status() == 200).then_some(())
    })
    .await;
    assert!(
        back.is_some(),
        "the API answers again once the network does"
    );
}
