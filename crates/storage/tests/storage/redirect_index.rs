//! The redirect index: every link's redirect target in memory (SQLite), kept in step with every
//! change the store makes.

use shortlink_domain::{Destination, LinkRef};
use shortlink_storage::{CreateOutcome, DatabaseKind, Store};

use crate::{TestDatabase, base, create, each_backend, new_link, update_destination, workspace};

/// What the index answers for `code` equals what the database answers.
async fn assert_index_agrees(store: &Store, code: &str) {
    let base = base();
    let in_memory = store.resolve_in_memory(base.domain(), code);
    let in_database = store
        .resolve_in_database(base.domain(), code)
        .await
        .unwrap();
    assert_eq!(in_memory, Some(in_database), "code {code}");
}

each_backend!(the_redirect_index_follows_every_change, |store| {
    let acme = workspace(&store, "acme").await;
    let d = base().domain().to_owned();
    create(
        &store,
        new_link(&acme, Some("before"), "https://example.com/1"),
    )
    .await;

    let loaded = store.load_redirect_index(1 << 20).await.unwrap();
    if store.kind() == DatabaseKind::Postgres {
        // Other instances change the same links: no index.
        assert!(!loaded);
        assert_eq!(store.resolve_in_memory(&d, "before"), None);
        return;
    }
    assert!(loaded);
    assert_index_agrees(&store, "before").await;
    assert_eq!(store.resolve_in_memory(&d, "unknown"), Some(None));
    assert_eq!(
        store.resolve_in_memory("elsewhere.rt", "before"),
        Some(None)
    );

    // Created afterwards, singly and in bulk with generated codes.
    create(
        &store,
        new_link(&acme, Some("after"), "https://example.com/2"),
    )
    .await;
    let bulk = (0..3)
        .map(|i| new_link(&acme, None, &format!("https://example.com/bulk/{i}")))
        .collect();
    for outcome in store.create_links(bulk, &base()).await.unwrap() {
        let CreateOutcome::Created(link) = outcome else {
            panic!("created");
        };
        assert_index_agrees(&store, link.short_code.as_str()).await;
    }
    assert_index_agrees(&store, "after").await;

    // A taken slug changes nothing.
    let taken = store
        .create_links(
            vec![new_link(&acme, Some("after"), "https://example.com/other")],
            &base(),
        )
        .await
        .unwrap();
    assert_eq!(taken, vec![CreateOutcome::SlugConflict]);
    assert_index_agrees(&store, "after").await;

    // Changed, then deleted.
    let moved = Destination::parse("https://example.com/moved", &base()).unwrap();
    let code = LinkRef::Code("before".into());
    update_destination(&store, acme.id, &code, &d, &moved)
        .await
        .unwrap()
        .unwrap();
    assert_index_agrees(&store, "before").await;
    assert_eq!(
        store
            .resolve_in_memory(&d, "before")
            .flatten()
            .map(|t| t.destination),
        Some(moved)
    );
    store
        .delete_link(acme.id, &code, &d, &base())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.resolve_in_memory(&d, "before"), Some(None));
    assert_index_agrees(&store, "after").await;
});

#[tokio::test]
async fn links_past_the_budget_leave_no_index() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let d = base().domain().to_owned();
    create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;

    // At load: nothing is half-loaded.
    assert!(!store.load_redirect_index(16).await.unwrap());
    assert_eq!(store.resolve_in_memory(&d, "a"), None);

    // Later: the link that does not fit drops the index, and the database answers as before.
    assert!(store.load_redirect_index(4096).await.unwrap());
    let long = format!("https://example.com/{}", "x".repeat(4096));
    create(&store, new_link(&acme, Some("long"), &long)).await;
    assert_eq!(store.resolve_in_memory(&d, "a"), None);
    assert_eq!(store.resolve_in_memory(&d, "long"), None);
    assert!(store.resolve(&d, "long").await.unwrap().is_some());
}
