//! `/api/v1/links`: create, read, change, delete, list; scoped to the key's workspace. Each test
//! runs on SQLite and, when configured, on PostgreSQL.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{
    LINK_FIELDS, TestApp, assert_error, assert_has_fields, assert_ok, assert_timestamp, header,
    on_both_backends, send, text,
};

on_both_backends!(
    create_returns_the_whole_link,
    custom_slugs_are_kept_exactly_and_case_sensitive,
    get_by_id_and_by_short_code,
    patch_changes_where_the_redirect_goes_at_once,
    delete_makes_the_redirect_404_at_once,
    a_deleted_link_keeps_the_clicks_of_its_last_moments,
    list_is_newest_first_and_pages_cover_every_link_once,
    other_workspaces_cannot_see_or_touch_a_link,
    a_taken_slug_is_a_conflict_in_any_workspace,
    concurrent_creations_share_transactions_without_losing_conflicts,
);

async fn create_returns_the_whole_link(app: TestApp) {
    let link = app
        .create_link(&json!({ "destination": "https://example.com/page?a=1" }))
        .await;

    assert_has_fields(&link, &LINK_FIELDS);
    let id = text(&link["id"]);
    assert!(id.starts_with("link_"), "{id}");
    assert_eq!(id.len(), "link_".len() + 26, "{id}");
    assert!(id[5..].chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
    assert_eq!(link["domain"], app.domain);
    let code = text(&link["shortCode"]);
    assert_eq!(code.len(), 7, "generated slugs have 7 characters: {code}");
    assert!(code.chars().all(|c| c.is_ascii_alphanumeric()), "{code}");
    assert_eq!(link["shortUrl"], format!("{}/{code}", app.address));
    assert_eq!(link["destination"], "https://example.com/page?a=1");
    assert_eq!(link["clicks"], 0);
    assert_timestamp(text(&link["createdAt"]));
}

async fn custom_slugs_are_kept_exactly_and_case_sensitive(app: TestApp) {
    let longest = "s".repeat(64);
    for slug in ["Promo_2026-x", "promo_2026-x", "a", longest.as_str()] {
        let destination = format!("https://example.com/{slug}");
        let link = app
            .create_link(&json!({ "destination": destination, "customSlug": slug }))
            .await;
        assert_eq!(link["shortCode"], slug);
        assert_eq!(link["shortUrl"], format!("{}/{slug}", app.address));
    }
    for slug in ["Promo_2026-x", "promo_2026-x"] {
        let res = app.visit(slug).await;
        assert_eq!(res.status(), 302);
        let want = format!("https://example.com/{slug}");
        assert_eq!(header(res.headers(), "location"), Some(want.as_str()));
    }
    assert_eq!(app.visit("PROMO_2026-X").await.status(), 404);
}

async fn get_by_id_and_by_short_code(app: TestApp) {
    let created = app
        .create_link(&json!({ "destination": "https://example.com/a" }))
        .await;
    let by_id = assert_ok(app.get(&format!("/links/{}", text(&created["id"]))).await).await;
    let by_code = assert_ok(
        app.get(&format!("/links/{}", text(&created["shortCode"])))
            .await,
    )
    .await;
    assert_eq!(by_id, created);
    assert_eq!(by_code, created);
}

async fn patch_changes_where_the_redirect_goes_at_once(app: TestApp) {
    let code = app.create_code("https://example.com/old").await;
    // Warm the redirect's cache, so the change must invalidate it.
    let before = app.visit(&code).await;
    assert_eq!(
        header(before.headers(), "location"),
        Some("https://example.com/old")
    );

    let patched = assert_ok(
        app.patch_json(
            &format!("/links/{code}"),
            &json!({ "destination": "https://example.org/new" }),
        )
        .await,
    )
    .await;
    assert_eq!(patched["destination"], "https://example.org/new");
    assert_eq!(patched["shortCode"], code.as_str());

    let after = app.visit(&code).await;
    assert_eq!(after.status(), 302);
    assert_eq!(
        header(after.headers(), "location"),
        Some("https://example.org/new")
    );
    let read = assert_ok(app.get(&format!("/links/{code}")).await).await;
    assert_eq!(read["destination"], "https://example.org/new");

    // PATCH by id works the same, and validates like creation.
    let id = text(&read["id"]).to_owned();
    let bad = app
        .patch_json(
            &format!("/links/{id}"),
            &json!({ "destination": "ftp://x" }),
        )
        .await;
    crate::helpers::assert_invalid(bad, &["destination"]).await;
    // A link always has a destination and a code: null is refused, not read as "unchanged".
    let cleared = app
        .patch_json(
            &format!("/links/{id}"),
            &json!({ "destination": null, "customSlug": null }),
        )
        .await;
    crate::helpers::assert_invalid(cleared, &["destination", "customSlug"]).await;
    let by_id = assert_ok(
        app.patch_json(
            &format!("/links/{id}"),
            &json!({ "destination": "https://example.net/" }),
        )
        .await,
    )
    .await;
    assert_eq!(by_id["destination"], "https://example.net/");
}

async fn delete_makes_the_redirect_404_at_once(app: TestApp) {
    let code = app.create_code("https://example.com/gone").await;
    assert_eq!(app.visit(&code).await.status(), 302);

    let deleted = assert_ok(app.delete(&format!("/links/{code}")).await).await;
    assert_eq!(deleted["shortCode"], code.as_str());

    assert_eq!(app.visit(&code).await.status(), 404);
    assert_error(app.get(&format!("/links/{code}")).await, 404, "NOT_FOUND").await;
    assert_error(
        app.delete(&format!("/links/{code}")).await,
        404,
        "NOT_FOUND",
    )
    .await;
}

async fn a_deleted_link_keeps_the_clicks_of_its_last_moments(app: TestApp) {
    let code = app.create_code("https://example.com/last").await;
    for _ in 0..3 {
        assert_eq!(app.visit(&code).await.status(), 302);
    }

    // At once: the clicks are still in memory, not yet written by a flush.
    let deleted = assert_ok(app.delete(&format!("/links/{code}")).await).await;
    assert_eq!(deleted["clicks"], 3, "{deleted}");
}

async fn list_is_newest_first_and_pages_cover_every_link_once(app: TestApp) {
    let mut created = Vec::new();
    for i in 0..23 {
        let link = app
            .create_link(&json!({ "destination": format!("https://example.com/{i}") }))
            .await;
        created.push(text(&link["id"]).to_owned());
    }
    created.reverse();

    let first = assert_ok(app.get("/links").await).await;
    assert_has_fields(&first, &["items", "nextCursor"]);
    assert_eq!(
        first["items"].as_array().map(Vec::len),
        Some(20),
        "default limit"
    );

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/links?limit=5&cursor={c}"),
            None => "/links?limit=5".to_owned(),
        };
        let page = assert_ok(app.get(&path).await).await;
        let items = page["items"].as_array().expect("items is an array");
        assert!(items.len() <= 5);
        seen.extend(items.iter().map(|l| text(&l["id"]).to_owned()));
        pages += 1;
        match &page["nextCursor"] {
            Value::Null => break,
            next => cursor = Some(text(next).to_owned()),
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(pages, 5);
    assert_eq!(seen, created, "newest first, every link exactly once");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 23);
}

async fn other_workspaces_cannot_see_or_touch_a_link(app: TestApp) {
    let link = app
        .create_link(&json!({ "destination": "https://example.com/private" }))
        .await;
    let (id, code) = (text(&link["id"]), text(&link["shortCode"]));
    let other = app.new_tenant("other", 100).await;
    assert_ok(
        send(
            app.api_as(&other.key, Method::POST, "/links")
                .json(&json!({ "destination": "https://example.com/b" })),
        )
        .await,
    )
    .await;

    for r in [id, code] {
        let path = format!("/links/{r}");
        for request in [
            app.api_as(&other.key, Method::GET, &path),
            app.api_as(&other.key, Method::PATCH, &path)
                .json(&json!({ "destination": "https://evil.example/" })),
            app.api_as(&other.key, Method::DELETE, &path),
            app.api_as(&other.key, Method::GET, &format!("/qr?shortCode={r}")),
        ] {
            assert_error(send(request).await, 404, "NOT_FOUND").await;
        }
    }
    let list = assert_ok(send(app.api_as(&other.key, Method::GET, "/links")).await).await;
    let items = list["items"].as_array().expect("items is an array");
    assert_eq!(items.len(), 1);
    assert_ne!(items[0]["id"], link["id"]);

    // Untouched for its owner.
    assert_eq!(
        assert_ok(app.get(&format!("/links/{code}")).await).await,
        link
    );
    assert_eq!(
        header(app.visit(code).await.headers(), "location"),
        Some("https://example.com/private")
    );
}

async fn a_taken_slug_is_a_conflict_in_any_workspace(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/", "customSlug": "launch" }))
        .await;
    let again = app
        .post_json(
            "/links",
            &json!({ "destination": "https://example.org/", "customSlug": "launch" }),
        )
        .await;
    assert_error(again, 409, "SLUG_CONFLICT").await;

    let other = app.new_tenant("other", 100).await;
    let elsewhere = send(
        app.api_as(&other.key, Method::POST, "/links")
            .json(&json!({ "destination": "https://example.org/", "customSlug": "launch" })),
    )
    .await;
    let error = assert_error(elsewhere, 409, "SLUG_CONFLICT").await;
    assert!(text(&error["message"]).contains("launch"), "{error}");

    // The first owner's link is unchanged.
    assert_eq!(
        header(app.visit("launch").await.headers(), "location"),
        Some("https://example.com/")
    );
}

/// Concurrent creations are written in groups; a slug wanted by many at once goes to exactly one
/// of them, and every other creation in the same groups still succeeds.
async fn concurrent_creations_share_transactions_without_losing_conflicts(app: TestApp) {
    let app = std::sync::Arc::new(app);
    let requests = (0..40).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let slug = if i % 2 == 0 {
                "contested".to_owned()
            } else {
                format!("own-{i}")
            };
            let body =
                json!({ "destination": format!("https://example.com/{i}"), "customSlug": slug });
            app.post_json("/links", &body).await.status().as_u16()
        })
    });
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.expect("the request task ran to completion"));
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        21,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        19,
        "{statuses:?}"
    );
    let page = assert_ok(app.get("/links?limit=100").await).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(21));
}
