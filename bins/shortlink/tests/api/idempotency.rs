//! `Idempotency-Key` on the three creating POSTs: a retry with the same key and body answers the
//! first answer again and creates nothing; another body is refused; a key whose first request
//! still runs is in use; keys are per workspace and lapse after 24 hours.

use reqwest::{Method, Response};
use serde_json::{Value, json};
use shortlink_storage::{
    ClaimOutcome, IdempotencyClaim, LinkCompletion, NewLink, PlacedCompletion, StorageError,
    StoredResponse,
};

use crate::helpers::{TestApp, assert_error, assert_invalid, header, on_both_backends, text};

on_both_backends!(
    a_retry_answers_the_first_answer_and_creates_nothing,
    another_body_under_the_same_key_is_refused,
    concurrent_retries_create_once,
    a_key_whose_request_runs_is_in_use,
    keys_are_per_workspace,
    a_refused_request_claims_nothing,
    a_conflict_is_recorded_and_replayed,
    bulk_and_webhook_creations_replay,
    a_key_lapses_after_a_day,
    a_creation_whose_claim_was_taken_over_is_not_written,
    a_body_with_a_password_is_not_kept_as_a_fast_hash,
);

const KEY: &str = "5f1c2a8e-8f0b-4a57-9d1e-3c1b2f0d7a11";

async fn post_with_key(app: &TestApp, path: &str, key: &str, body: &Value) -> Response {
    app.api(Method::POST, path)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("the server answers")
}

async fn status_and_body(res: Response) -> (u16, bool, String) {
    let replayed = header(res.headers(), "idempotent-replayed") == Some("true");
    (
        res.status().as_u16(),
        replayed,
        res.text().await.expect("the body is text"),
    )
}

async fn link_count(app: &TestApp) -> usize {
    let page: Value = app
        .get("/links?limit=100")
        .await
        .json()
        .await
        .expect("the body is JSON");
    page["data"]["items"]
        .as_array()
        .expect("items is an array")
        .len()
}

/// `KEY` claimed for a `POST /links` of `body` by another request (`token`), which has not
/// answered yet.
async fn claim_held_elsewhere(app: &TestApp, body: &[u8], token: &str) -> IdempotencyClaim {
    let claim = IdempotencyClaim {
        workspace_id: app.tenant.workspace.id,
        key: KEY.into(),
        fingerprint: shortlink_http::idempotency::fingerprint("/api/v1/links", body),
        token: token.into(),
    };
    assert_eq!(
        app.store
            .claim_idempotency_key(&claim)
            .await
            .expect("the claim is stored"),
        ClaimOutcome::Claimed
    );
    claim
}

async fn a_retry_answers_the_first_answer_and_creates_nothing(app: TestApp) {
    let body = json!({ "destination": "https://example.com/once" });
    let first = status_and_body(post_with_key(&app, "/links", KEY, &body).await).await;
    assert_eq!((first.0, first.1), (200, false), "{}", first.2);
    let again = status_and_body(post_with_key(&app, "/links", KEY, &body).await).await;
    assert_eq!(again, (200, true, first.2.clone()));
    // The same route spelt otherwise is the same request.
    let encoded = status_and_body(post_with_key(&app, "/%6cinks", KEY, &body).await).await;
    assert_eq!(encoded, (200, true, first.2.clone()));
    assert_eq!(link_count(&app).await, 1);
    // Without the key, the same body creates another link.
    app.create_link(&body).await;
    assert_eq!(link_count(&app).await, 2);
}

async fn another_body_under_the_same_key_is_refused(app: TestApp) {
    let first = json!({ "destination": "https://example.com/a" });
    let res = post_with_key(&app, "/links", KEY, &first).await;
    assert_eq!(res.status(), 200);
    let other = json!({ "destination": "https://example.com/b" });
    let res = post_with_key(&app, "/links", KEY, &other).await;
    assert_error(res, 422, "IDEMPOTENCY_KEY_REUSED").await;
    // The same key on another creating route is another request too.
    let res = post_with_key(&app, "/links/bulk", KEY, &json!([first])).await;
    assert_error(res, 422, "IDEMPOTENCY_KEY_REUSED").await;
    assert_eq!(link_count(&app).await, 1);
}

async fn concurrent_retries_create_once(app: TestApp) {
    let body = json!({ "destination": "https://example.com/race" });
    let answers =
        futures_util::future::join_all((0..12).map(|_| async {
            status_and_body(post_with_key(&app, "/links", KEY, &body).await).await
        }))
        .await;
    let created: Vec<&(u16, bool, String)> = answers.iter().filter(|a| a.0 == 200).collect();
    assert!(!created.is_empty(), "{answers:?}");
    for answer in &answers {
        match answer.0 {
            200 => assert_eq!(answer.2, created[0].2, "every success is the same answer"),
            409 => assert!(answer.2.contains("IDEMPOTENCY_KEY_IN_USE"), "{}", answer.2),
            _ => panic!("unexpected answer {answer:?}"),
        }
    }
    assert_eq!(created.iter().filter(|a| !a.1).count(), 1, "{answers:?}");
    assert_eq!(link_count(&app).await, 1);
}

async fn a_key_whose_request_runs_is_in_use(app: TestApp) {
    let body = json!({ "destination": "https://example.com/slow" });
    let bytes = serde_json::to_vec(&body).expect("JSON serialises");
    // What a request still running on another instance holds: a claim with no answer yet.
    let claim = claim_held_elsewhere(&app, &bytes, "another-request").await;
    let send = || {
        app.api(Method::POST, "/links")
            .header("Idempotency-Key", KEY)
            .header("Content-Type", "application/json")
            .body(bytes.clone())
            .send()
    };
    assert_error(
        send().await.expect("the server answers"),
        409,
        "IDEMPOTENCY_KEY_IN_USE",
    )
    .await;
    assert_eq!(link_count(&app).await, 0);
    // Given back (its creation failed), the key runs the retry.
    app.store
        .release_idempotency_key(&claim)
        .await
        .expect("the claim is released");
    assert_eq!(send().await.expect("the server answers").status(), 200);
    assert_eq!(link_count(&app).await, 1);
}

async fn keys_are_per_workspace(app: TestApp) {
    let other = app.new_tenant("other", 100).await;
    let body = json!({ "destination": "https://example.com/shared-key" });
    let mine = status_and_body(post_with_key(&app, "/links", KEY, &body).await).await;
    let theirs = app
        .api_as(&other.key, Method::POST, "/links")
        .header("Idempotency-Key", KEY)
        .json(&body)
        .send()
        .await
        .expect("the server answers");
    let theirs = status_and_body(theirs).await;
    assert_eq!((mine.0, theirs.0, theirs.1), (200, 200, false));
    assert_ne!(mine.2, theirs.2, "each workspace got its own link");
}

async fn a_refused_request_claims_nothing(app: TestApp) {
    let bad = json!({ "destination": "javascript:alert(1)" });
    assert_invalid(
        post_with_key(&app, "/links", KEY, &bad).await,
        &["destination"],
    )
    .await;
    // The corrected request, under the same key, runs.
    let good = json!({ "destination": "https://example.com/fixed" });
    let res = post_with_key(&app, "/links", KEY, &good).await;
    assert_eq!(res.status(), 200);
    // A malformed key is refused, naming the header, and creates nothing.
    for key in ["", "has space", &"k".repeat(256), "é"] {
        let res = app
            .api(Method::POST, "/links")
            .header("Idempotency-Key", key.as_bytes())
            .json(&good)
            .send()
            .await
            .expect("the server answers");
        assert_invalid(res, &["Idempotency-Key"]).await;
    }
    assert_eq!(link_count(&app).await, 1);
}

async fn a_conflict_is_recorded_and_replayed(app: TestApp) {
    let taken = app
        .create_link(&json!({ "destination": "https://example.com/", "customSlug": "taken" }))
        .await;
    let body = json!({ "destination": "https://example.com/mine", "customSlug": "taken" });
    let first = post_with_key(&app, "/links", KEY, &body).await;
    let first = assert_error(first, 409, "SLUG_CONFLICT").await;
    // The slug is free now, but the key's answer was the conflict: a retry gets it again.
    let id = text(&taken["id"]);
    assert_eq!(app.delete(&format!("/links/{id}")).await.status(), 200);
    let again = post_with_key(&app, "/links", KEY, &body).await;
    assert_eq!(header(again.headers(), "idempotent-replayed"), Some("true"));
    assert_eq!(assert_error(again, 409, "SLUG_CONFLICT").await, first);
    assert_eq!(link_count(&app).await, 0);
}

async fn bulk_and_webhook_creations_replay(app: TestApp) {
    let items = json!([
        { "destination": "https://example.com/1" },
        { "destination": "not a url" },
        { "destination": "https://example.com/3" },
    ]);
    let first = status_and_body(post_with_key(&app, "/links/bulk", KEY, &items).await).await;
    assert_eq!((first.0, first.1), (200, false));
    let again = status_and_body(post_with_key(&app, "/links/bulk", KEY, &items).await).await;
    assert_eq!(again, (200, true, first.2));
    assert_eq!(link_count(&app).await, 2);

    let hook = json!({ "targetUrl": app.url("/healthz"), "events": ["link.created"] });
    let first = status_and_body(post_with_key(&app, "/webhooks", "hook-1", &hook).await).await;
    assert_eq!((first.0, first.1), (200, false), "{}", first.2);
    let again = status_and_body(post_with_key(&app, "/webhooks", "hook-1", &hook).await).await;
    // The replay shows the same secret: a client that lost the first answer can still sign.
    assert_eq!(again, (200, true, first.2));
    let hooks: Value = app
        .get("/webhooks")
        .await
        .json()
        .await
        .expect("the body is JSON");
    assert_eq!(hooks["data"].as_array().expect("data is an array").len(), 1);
}

async fn a_key_lapses_after_a_day(app: TestApp) {
    let res = post_with_key(
        &app,
        "/links",
        KEY,
        &json!({ "destination": "https://example.com/old" }),
    )
    .await;
    assert_eq!(res.status(), 200);
    let day_and_a_minute = (24 * 60 + 1) * 60 * 1000;
    app.db
        .execute(&format!(
            "UPDATE idempotency_keys SET created_at = created_at - {day_and_a_minute}"
        ))
        .await;
    // Past its lifetime the key is free: another body under it creates.
    let res = post_with_key(
        &app,
        "/links",
        KEY,
        &json!({ "destination": "https://example.com/new" }),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(link_count(&app).await, 2);
    assert_eq!(
        app.store
            .forget_idempotency_keys()
            .await
            .expect("lapsed keys are deleted"),
        0,
        "the new claim is young"
    );
}

/// A request whose creation stalled past `ABANDONED_CLAIM` (five minutes) lost its key to a
/// retry, which created the link; when the stalled creation reaches the database at last, it is
/// not written: one link for one key, and the key keeps the retry's answer.
async fn a_creation_whose_claim_was_taken_over_is_not_written(app: TestApp) {
    let body = json!({ "destination": "https://example.com/stalled" });
    let bytes = serde_json::to_vec(&body).expect("JSON serialises");
    let stalled = claim_held_elsewhere(&app, &bytes, "stalled-request").await;
    let six_minutes = 6 * 60 * 1000;
    app.db
        .execute(&format!(
            "UPDATE idempotency_keys SET created_at = created_at - {six_minutes}"
        ))
        .await;
    let retry = status_and_body(post_with_key(&app, "/links", KEY, &body).await).await;
    assert_eq!(
        (retry.0, retry.1),
        (200, false),
        "the retry took the key over"
    );

    let base = shortlink_domain::BaseUrl::parse(&app.address).expect("a base URL");
    let link = NewLink {
        id: shortlink_domain::LinkId::generate(),
        workspace_id: app.tenant.workspace.id,
        domain: app.domain.clone(),
        slug: None,
        destination: shortlink_domain::Destination::parse("https://example.com/stalled", &base)
            .expect("a destination"),
        created_at: shortlink_domain::Timestamp::now(),
        options: Default::default(),
    };
    let completion = PlacedCompletion {
        links: 0..1,
        completion: LinkCompletion {
            claim: stalled,
            render: std::sync::Arc::new(|_| StoredResponse {
                status: 200,
                body: "the stalled answer".into(),
            }),
        },
    };
    let written = app
        .store
        .create_links_completing(vec![link], &base, vec![completion])
        .await;
    assert!(
        matches!(written, Err(StorageError::ClaimLost)),
        "{written:?}"
    );
    assert_eq!(link_count(&app).await, 1);
    let again = status_and_body(post_with_key(&app, "/links", KEY, &body).await).await;
    assert_eq!(again, (200, true, retry.2));
}

async fn a_body_with_a_password_is_not_kept_as_a_fast_hash(app: TestApp) {
    let body = json!({ "destination": "https://example.com/locked", "password": "Sup3rSecret" });
    let bytes = serde_json::to_vec(&body).expect("JSON serialises");
    let send = |bytes: Vec<u8>| {
        app.api(Method::POST, "/links")
            .header("Idempotency-Key", KEY)
            .header("Content-Type", "application/json")
            .body(bytes)
            .send()
    };
    let first = status_and_body(send(bytes.clone()).await.expect("answered")).await;
    assert_eq!((first.0, first.1), (200, false), "{}", first.2);

    // The key's row does not hold the body's SHA-256, which a million guesses a second would
    // turn back into the password: a claim with it is another request's.
    let fast = IdempotencyClaim {
        workspace_id: app.tenant.workspace.id,
        key: KEY.into(),
        fingerprint: shortlink_http::idempotency::fingerprint("/api/v1/links", &bytes),
        token: "a guess".into(),
    };
    let outcome = app.store.claim_idempotency_key(&fast).await;
    assert_eq!(outcome.expect("answered"), ClaimOutcome::Reused);

    // What it holds still tells a retry from another body.
    let again = status_and_body(send(bytes).await.expect("answered")).await;
    assert_eq!(again, (200, true, first.2));
    let other = json!({ "destination": "https://example.com/locked", "password": "Sup3rSecreT" });
    let res = send(serde_json::to_vec(&other).expect("JSON serialises")).await;
    assert_error(res.expect("answered"), 422, "IDEMPOTENCY_KEY_REUSED").await;
    assert_eq!(link_count(&app).await, 1);
}
