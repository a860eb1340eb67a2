//! Finding links by their code. On SQLite the code index (`link_codes`) is written in sorted
//! batches, and the codes of the newest links are held in memory until then; on PostgreSQL it is
//! a view of `links`. Either way a code is never given twice, a deleted link's code is free
//! again, and every store finds every link by its code.

use std::time::{Duration, Instant};

use diesel::{Connection, RunQueryDsl, SqliteConnection};
use shortlink_domain::{Link, LinkPatch, LinkRef, Slug, Workspace};
use shortlink_storage::testing::CODE_FOLD_AT;
use shortlink_storage::{CLICK_FOLD_INTERVAL, CreateOutcome, LinkUpdate, NewLink, Store};

use crate::{TestDatabase, base, create, each_backend, new_link, set_up_as_server, workspace};

async fn outcome(store: &Store, link: NewLink) -> CreateOutcome {
    store
        .create_links(vec![link], &base())
        .await
        .unwrap()
        .pop()
        .unwrap()
}

async fn by_code(store: &Store, ws: &Workspace, code: &str) -> Option<Link> {
    store
        .get_link(ws.id, &LinkRef::Code(code.into()), base().domain())
        .await
        .unwrap()
}

/// Finds `link` by its code every way a store can: the API's read, the redirect's lookup, and on
/// SQLite the redirect's synchronous lookup.
async fn assert_found(store: &Store, ws: &Workspace, link: &Link) {
    let code = link.short_code.as_str();
    let found = by_code(store, ws, code).await;
    assert_eq!(
        found.as_ref().map(|l| l.id),
        Some(link.id),
        "{code} by code"
    );
    let resolved = store.resolve(base().domain(), code).await.unwrap();
    assert_eq!(
        resolved.map(|t| t.destination),
        Some(link.destination.clone())
    );
    let in_database = store.resolve_in_database(base().domain(), code).await;
    assert!(in_database.unwrap().is_some(), "{code} in the database");
}

async fn assert_gone(store: &Store, ws: &Workspace, code: &str) {
    assert_eq!(by_code(store, ws, code).await, None);
    assert_eq!(store.resolve(base().domain(), code).await.unwrap(), None);
    let in_database = store.resolve_in_database(base().domain(), code).await;
    assert_eq!(in_database.unwrap(), None);
}

/// Rows of SQLite's code index, read without any store.
fn indexed_codes(db: &TestDatabase) -> i64 {
    let mut conn = SqliteConnection::establish(db.url.trim_start_matches("sqlite://")).unwrap();
    diesel::dsl::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT count(*) FROM link_codes)",
    ))
    .get_result(&mut conn)
    .unwrap()
}

each_backend!(
    a_code_is_taken_until_its_link_is_deleted_folded_or_not,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        let d = base().domain().to_owned();
        for fold in [false, true] {
            let link = create(
                &store,
                new_link(&acme, Some("spring"), "https://example.com/"),
            )
            .await;
            if fold {
                store.fold_codes().await.unwrap();
            }
            assert_found(&store, &acme, &link).await;
            let again = new_link(&acme, Some("spring"), "https://example.com/again");
            assert_eq!(outcome(&store, again).await, CreateOutcome::SlugConflict);

            store
                .delete_link(acme.id, &LinkRef::Code("spring".into()), &d, &base())
                .await
                .unwrap()
                .expect("deleted by its code");
            assert_gone(&store, &acme, "spring").await;
        }
        let last = create(
            &store,
            new_link(&acme, Some("spring"), "https://example.com/last"),
        )
        .await;
        assert_found(&store, &acme, &last).await;
    }
);

/// Gives the link with `from` the code `to`: the link after, or `None` when `to` is taken.
async fn rename(store: &Store, ws: &Workspace, from: &str, to: &str) -> Option<Link> {
    let patch = LinkPatch {
        slug: Some(Slug::parse(to).unwrap()),
        ..LinkPatch::default()
    };
    let (from, base) = (LinkRef::Code(from.into()), base());
    let update = store.update_link(ws.id, &from, base.domain(), &patch, &base);
    match update.await.unwrap().expect("the link exists") {
        LinkUpdate::Changed { after, .. } => Some(*after),
        LinkUpdate::SlugConflict => None,
    }
}

each_backend!(
    a_new_code_frees_the_old_one_folded_or_not,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        create(
            &store,
            new_link(&acme, Some("taken"), "https://example.com/t"),
        )
        .await;
        for fold in [false, true] {
            create(&store, new_link(&acme, Some("old"), "https://example.com/")).await;
            if fold {
                store.fold_codes().await.unwrap();
            }
            assert_eq!(rename(&store, &acme, "old", "taken").await, None, "taken");
            let renamed = rename(&store, &acme, "old", "new").await.expect("renamed");
            assert_found(&store, &acme, &renamed).await;
            assert_gone(&store, &acme, "old").await;
            // The old code is free, the new one taken; a fold after the change keeps them so.
            let again = create(
                &store,
                new_link(&acme, Some("old"), "https://example.com/2"),
            )
            .await;
            store.fold_codes().await.unwrap();
            assert_found(&store, &acme, &again).await;
            assert_found(&store, &acme, &renamed).await;
            let clash = new_link(&acme, Some("new"), "https://example.com/3");
            assert_eq!(outcome(&store, clash).await, CreateOutcome::SlugConflict);
            for code in ["old", "new"] {
                store
                    .delete_link(
                        acme.id,
                        &LinkRef::Code(code.into()),
                        base().domain(),
                        &base(),
                    )
                    .await
                    .unwrap()
                    .expect("deleted");
                assert_gone(&store, &acme, code).await;
            }
        }
    }
);

each_backend!(
    a_batch_conflicts_with_recent_folded_and_earlier_codes,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        create(
            &store,
            new_link(&acme, Some("folded"), "https://example.com/"),
        )
        .await;
        store.fold_codes().await.unwrap();
        create(
            &store,
            new_link(&acme, Some("recent"), "https://example.com/"),
        )
        .await;

        let batch = ["folded", "recent", "fresh", "fresh"]
            .map(|code| new_link(&acme, Some(code), "https://example.com/b"));
        let outcomes = store.create_links(batch.into(), &base()).await.unwrap();
        let created: Vec<bool> = outcomes
            .iter()
            .map(|o| matches!(o, CreateOutcome::Created(_)))
            .collect();
        assert_eq!(created, [false, false, true, false]);
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_sharing_a_file_find_and_respect_each_others_recent_codes() {
    let db = TestDatabase::sqlite();
    let server = db.store().await;
    assert!(
        server
            .start_click_journal(CLICK_FOLD_INTERVAL)
            .await
            .unwrap()
    );
    let other = db.store().await;
    let acme = workspace(&server, "acme").await;

    let a = create(&server, new_link(&acme, Some("a"), "https://example.com/a")).await;
    assert_found(&other, &acme, &a).await;
    let taken = new_link(&acme, Some("a"), "https://example.com/other");
    assert_eq!(outcome(&other, taken).await, CreateOutcome::SlugConflict);

    let b = create(&other, new_link(&acme, Some("b"), "https://example.com/b")).await;
    let taken = new_link(&acme, Some("b"), "https://example.com/server");
    assert_eq!(outcome(&server, taken).await, CreateOutcome::SlugConflict);
    assert_found(&server, &acme, &b).await;

    server.fold_codes().await.unwrap();
    for link in [&a, &b] {
        assert_found(&other, &acme, link).await;
        assert_found(&server, &acme, link).await;
    }
    assert_eq!(indexed_codes(&db), 2);
}

/// The server's redirect index answers for codes only until another connection writes to the
/// file: a link another store created, and folded into the code index, is one the index never
/// saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redirect_index_stops_answering_for_codes_once_another_store_writes() {
    let db = TestDatabase::sqlite();
    let server = db.store().await;
    set_up_as_server(&server).await;
    let acme = workspace(&server, "acme").await;
    create(
        &server,
        new_link(&acme, Some("mine"), "https://example.com/"),
    )
    .await;

    let other = db.store().await;
    let theirs = create(
        &other,
        new_link(&acme, Some("theirs"), "https://example.com/t"),
    )
    .await;
    other.fold_codes().await.unwrap();
    assert_eq!(indexed_codes(&db), 2, "the other store folded every code");
    assert_eq!(
        server.resolve_in_memory(base().domain(), "theirs"),
        Some(None),
        "the index never saw it"
    );

    for code in ["theirs", "mine"] {
        let taken = new_link(&acme, Some(code), "https://example.com/again");
        assert_eq!(
            outcome(&server, taken).await,
            CreateOutcome::SlugConflict,
            "{code}"
        );
    }
    assert_found(&other, &acme, &theirs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_a_store_did_not_fold_are_folded_by_the_next_start() {
    let db = TestDatabase::sqlite();
    let first = db.store().await;
    let acme = workspace(&first, "acme").await;
    let link = create(
        &first,
        new_link(&acme, Some("kept"), "https://example.com/"),
    )
    .await;
    drop(first);
    assert_eq!(indexed_codes(&db), 0, "not folded yet");

    let next = db.store().await;
    assert_eq!(indexed_codes(&db), 1);
    assert_found(&next, &acme, &link).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_fold_once_enough_codes_wait() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let mut first = None;
    for _ in 0..CODE_FOLD_AT.div_ceil(1000) {
        let batch = (0..1000)
            .map(|_| new_link(&acme, None, "https://example.com/"))
            .collect();
        let outcomes = store.create_links(batch, &base()).await.unwrap();
        if let Some(CreateOutcome::Created(link)) = outcomes.into_iter().next() {
            first.get_or_insert(link);
        }
    }
    // The fold runs beside the creation that made it due.
    let deadline = Instant::now() + Duration::from_secs(10);
    while indexed_codes(&db) < CODE_FOLD_AT as i64 {
        assert!(
            Instant::now() < deadline,
            "no fold after {CODE_FOLD_AT} links"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_found(&store, &acme, &first.unwrap()).await;
}
