//! POST `/api/v1/links/bulk`: items succeed or fail on their own, answered in order; the batch as
//! a whole is checked only for its shape and size.

use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_error, assert_invalid, assert_ok, keys, on_both_backends, text,
};

on_both_backends!(mixed_items_are_answered_one_by_one_in_order);

async fn mixed_items_are_answered_one_by_one_in_order(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/", "customSlug": "taken" }))
        .await;
    let items = json!([
        { "destination": "https://example.com/0" },
        { "destination": "javascript:alert(1)" },
        { "destination": "https://example.com/2", "customSlug": "twice" },
        { "destination": "https://example.com/3", "customSlug": "twice" },
        { "destination": "https://example.com/4", "customslug": "typo" },
        { "destination": "https://example.com/5", "customSlug": "taken" },
        { "destination": "https://example.com/6", "customSlug": "api" },
        { "customSlug": "no-destination" },
        { "destination": "https://example.com/8", "customSlug": "fine-8" },
    ]);
    let results = assert_ok(app.post_json("/links/bulk", &items).await).await;
    let results = results.as_array().expect("data is an array");
    assert_eq!(results.len(), 9);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i, "{result}");
    }

    let link = |i: usize| {
        assert_eq!(keys(&results[i]), ["index", "link"], "{}", results[i]);
        &results[i]["link"]
    };
    let error = |i: usize, code: &str, fields: &[&str]| {
        assert_eq!(keys(&results[i]), ["error", "index"], "{}", results[i]);
        let error = &results[i]["error"];
        assert_eq!(error["code"], code, "{error}");
        assert!(!text(&error["message"]).is_empty());
        let named: Vec<&str> = error
            .get("details")
            .and_then(Value::as_array)
            .map(|d| d.iter().map(|d| text(&d["field"])).collect())
            .unwrap_or_default();
        assert_eq!(named, fields, "{error}");
        if fields.is_empty() {
            assert_eq!(keys(error), ["code", "message"]);
        }
    };

    assert_eq!(link(0)["destination"], "https://example.com/0");
    assert_eq!(text(&link(0)["shortCode"]).len(), 7);
    error(1, "VALIDATION_FAILED", &["destination"]);
    assert_eq!(link(2)["shortCode"], "twice");
    assert_eq!(link(2)["destination"], "https://example.com/2");
    error(3, "SLUG_CONFLICT", &[]);
    error(4, "VALIDATION_FAILED", &["customslug"]);
    error(5, "SLUG_CONFLICT", &[]);
    error(6, "VALIDATION_FAILED", &["customSlug"]);
    error(7, "VALIDATION_FAILED", &["destination"]);
    assert_eq!(link(8)["shortCode"], "fine-8");

    // What was created is really there, and nothing else.
    for i in [0, 2, 8] {
        let created = link(i);
        let read = assert_ok(app.get(&format!("/links/{}", text(&created["id"]))).await).await;
        assert_eq!(&read, created);
    }
    let all = assert_ok(app.get("/links?limit=100").await).await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        crate::helpers::header(app.visit("twice").await.headers(), "location"),
        Some("https://example.com/2")
    );
}

#[tokio::test]
async fn a_full_batch_of_one_hundred_is_accepted() {
    let app = TestApp::spawn().await;
    let items: Vec<Value> = (0..100)
        .map(|i| json!({ "destination": format!("https://example.com/{i}") }))
        .collect();
    let results = assert_ok(app.post_json("/links/bulk", &json!(items)).await).await;
    let results = results.as_array().expect("data is an array");
    assert_eq!(results.len(), 100);
    assert!(results.iter().all(|r| r.get("link").is_some()));
}

#[tokio::test]
async fn empty_oversized_and_non_array_batches_are_rejected_whole() {
    let app = TestApp::spawn().await;
    let item = json!({ "destination": "https://example.com/" });
    let too_many = Value::Array(vec![item.clone(); 101]);
    for body in [
        json!([]),
        too_many,
        item.clone(),
        json!("text"),
        json!(null),
    ] {
        let res = app.post_json("/links/bulk", &body).await;
        assert_error(res, 400, "VALIDATION_FAILED").await;
    }
    let res = app.post_json("/links", &json!([item])).await;
    assert_error(res, 400, "VALIDATION_FAILED").await;

    // An item that is not an object at all makes the batch malformed (a documented decision),
    // named by its index.
    let res = app
        .post_json("/links/bulk", &json!([item, "not an object", item]))
        .await;
    assert_invalid(res, &["[1]"]).await;

    // Nothing was created by any of them.
    let all = assert_ok(app.get("/links").await).await;
    assert_eq!(all["items"], json!([]));
}
