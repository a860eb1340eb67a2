//! POST `/api/v1/links/bulk`: items succeed or fail on their own, answered in order; the batch as
//! a whole is checked only for its shape and size.

use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_error, assert_invalid, assert_ok, keys, on_both_backends, text,
};

on_both_backends!(
    mixed_items_are_answered_one_by_one_in_order,
    concurrent_batches_share_transactions_and_a_slug_goes_to_one,
);

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

/// Concurrent creations are written in shared transactions; each batch is still answered in its
/// own order, and a custom slug several batches ask for goes to exactly one of them.
async fn concurrent_batches_share_transactions_and_a_slug_goes_to_one(app: TestApp) {
    let batch = |b: usize| {
        let items: Vec<Value> = (0..50)
            .map(|i| match i {
                25 => json!({ "destination": format!("https://example.com/{b}/{i}"), "customSlug": "shared" }),
                _ => json!({ "destination": format!("https://example.com/{b}/{i}") }),
            })
            .collect();
        json!(items)
    };
    let batches: Vec<Value> = (0..8).map(batch).collect();
    let single = json!({ "destination": "https://example.com/single", "customSlug": "shared" });
    let (results, single) = tokio::join!(
        futures_util::future::join_all(batches.iter().map(|b| app.post_json("/links/bulk", b))),
        app.post_json("/links", &single)
    );
    let mut shared_created = usize::from(single.status() == 200);
    for (b, res) in results.into_iter().enumerate() {
        let data = assert_ok(res).await;
        let items = data.as_array().expect("data is an array");
        assert_eq!(items.len(), 50);
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item["index"], i);
            if i == 25 && item.get("error").is_some() {
                assert_eq!(item["error"]["code"], "SLUG_CONFLICT", "{item}");
                continue;
            }
            let destination = format!("https://example.com/{b}/{i}");
            assert_eq!(item["link"]["destination"], destination, "{item}");
            shared_created += usize::from(i == 25);
        }
    }
    assert_eq!(shared_created, 1, "one creation gets the slug");
    let shared = assert_ok(app.get("/links/shared").await).await;
    assert!(text(&shared["destination"]).starts_with("https://example.com/"));
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

/// Each item is read as a single creation's body is: a key given twice fails that item (JSON
/// parsers disagree on which value wins), and whitespace around items is only whitespace.
#[tokio::test]
async fn an_item_naming_a_field_twice_fails_on_its_own() {
    let app = TestApp::spawn().await;
    let body = "[\n  {\"destination\": \"https://example.com/1\", \"destination\": \"https://example.com/2\"},\n  \
                {\"destination\": \"https://example.com/3\"}\n]";
    let res = crate::helpers::send(
        app.api(reqwest::Method::POST, "/links/bulk")
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    let results = assert_ok(res).await;
    assert_eq!(
        results[0]["error"]["code"], "VALIDATION_FAILED",
        "{results}"
    );
    assert!(
        text(&results[0]["error"]["message"]).contains("duplicate field `destination`"),
        "{results}"
    );
    assert_eq!(results[1]["link"]["destination"], "https://example.com/3");
    let all = assert_ok(app.get("/links").await).await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(1));
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
