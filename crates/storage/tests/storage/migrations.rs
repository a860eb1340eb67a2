//! Upgrades keep what earlier schemas held: a database written by an earlier schema is migrated
//! by `Store::migrate` with every link, code, row number and counted click intact.

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use shortlink_domain::{LinkId, LinkRef, WorkspaceId};
use shortlink_storage::{ClickBatch, CounterKey, DatabaseKind, LinkClicks, Store, StoreOptions};

use crate::{TestDatabase, base, create, new_link, workspace};

const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// Applies the migrations older than `version`, then runs `seed`: the database as a release
/// before `version` left it.
async fn migrate_before(db: &TestDatabase, version: &'static str, seed: String) {
    fn older<DB: diesel::backend::Backend>(
        conn: &mut impl MigrationHarness<DB>,
        migrations: EmbeddedMigrations,
        version: &str,
    ) {
        for migration in conn.pending_migrations(migrations).unwrap() {
            // diesel gives a migration's version without the dashes of its directory name.
            if migration.name().version().to_string() >= version.replace('-', "") {
                break;
            }
            conn.run_migration(&*migration).unwrap();
        }
    }

    match db.kind {
        DatabaseKind::Sqlite => {
            let path = db.url.trim_start_matches("sqlite://").to_owned();
            tokio::task::spawn_blocking(move || {
                let mut conn = SqliteConnection::establish(&path).unwrap();
                older(&mut conn, SQLITE, version);
                conn.batch_execute(&seed).unwrap();
            })
            .await
            .unwrap();
        }
        DatabaseKind::Postgres => {
            let conn = <AsyncPgConnection as diesel_async::AsyncConnection>::establish(&db.url)
                .await
                .unwrap();
            tokio::task::spawn_blocking(move || {
                let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::from(conn);
                older(&mut conn, POSTGRES, version);
                conn.batch_execute(&seed).unwrap();
            })
            .await
            .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_and_clicks_survive_the_counter_migration() {
    for db in TestDatabase::all("migrations::links_and_clicks_survive_the_counter_migration").await
    {
        let (workspace, link) = (WorkspaceId::generate(), LinkId::generate());
        let seed = format!(
            "INSERT INTO workspaces (id, name, rate_limit, created_at) \
                 VALUES ('{workspace}', 'acme', 100, 0);
             INSERT INTO links (id, workspace_id, domain, short_code, destination, clicks, \
                 created_at, updated_at) \
                 VALUES ('{link}', '{workspace}', '{}', 'old', 'https://example.com/', 7, 0, 0);",
            base().domain()
        );
        migrate_before(&db, "2026-11-22-000001", seed).await;

        let store = db.store().await;
        let d = base().domain().to_owned();
        let old = store
            .get_link(workspace, &LinkRef::Id(link), &d)
            .await
            .unwrap()
            .expect("the link survives");
        assert_eq!((old.short_code.as_str(), old.clicks), ("old", 7));

        // Its counter still counts, and a link created afterwards starts at zero.
        let resolved = store.resolve(&d, "old").await.unwrap().unwrap();
        let batch = ClickBatch {
            links: vec![LinkClicks {
                counter: resolved.counter,
                workspace_id: workspace,
                count: 2,
                clicks: vec![],
            }],
            events: false,
        };
        store.record_clicks(batch.into(), &base()).await.unwrap();
        let ws = store.find_workspace("acme").await.unwrap().unwrap();
        let new = create(&store, new_link(&ws, Some("new"), "https://example.com/n")).await;
        let clicks = async |id| {
            store
                .get_link(workspace, &LinkRef::Id(id), &d)
                .await
                .unwrap()
                .unwrap()
                .clicks
        };
        assert_eq!((clicks(link).await, clicks(new.id).await), (9, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_and_row_numbers_survive_the_code_index_migration() {
    let test = "migrations::codes_and_row_numbers_survive_the_code_index_migration";
    for db in TestDatabase::all(test).await {
        let (workspace, kept, gone) = (
            WorkspaceId::generate(),
            LinkId::generate(),
            LinkId::generate(),
        );
        let d = base().domain().to_owned();
        // The newest link is deleted: its row number must not be given again.
        let seed = format!(
            "INSERT INTO workspaces (id, name, rate_limit, created_at) \
                 VALUES ('{workspace}', 'acme', 100, 0);
             INSERT INTO links (id, workspace_id, domain, short_code, destination, created_at, \
                 updated_at) \
                 VALUES ('{kept}', '{workspace}', '{d}', 'kept', 'https://example.com/k', 0, 0), \
                        ('{gone}', '{workspace}', '{d}', 'gone', 'https://example.com/g', 0, 0);
             DELETE FROM links WHERE id = '{gone}';"
        );
        migrate_before(&db, "2026-11-23-000001", seed).await;

        let store = db.store().await;
        let found = store
            .resolve(&d, "kept")
            .await
            .unwrap()
            .expect("found by code");
        assert_eq!(found.counter, CounterKey(1));
        assert_eq!(store.resolve(&d, "gone").await.unwrap(), None);
        let ws = store.find_workspace("acme").await.unwrap().unwrap();
        let reused = create(&store, new_link(&ws, Some("gone"), "https://example.com/n")).await;
        let found = store.resolve(&d, "gone").await.unwrap().unwrap();
        assert_eq!(found.counter, CounterKey(3), "a new row number");
        let taken = store
            .create_links(
                vec![new_link(&ws, Some("kept"), "https://example.com/")],
                &base(),
            )
            .await
            .unwrap();
        assert_eq!(taken, vec![shortlink_storage::CreateOutcome::SlugConflict]);
        store
            .delete_link(ws.id, &LinkRef::Id(reused.id), &d, &base())
            .await
            .unwrap()
            .expect("deleted");
        assert_eq!(store.resolve(&d, "gone").await.unwrap(), None);
    }
}

/// A database a newer build has migrated is refused before anything is written to it: by
/// `migrate`, and so by every command and by a server's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_a_newer_build_migrated_is_refused() {
    let test = concat!(
        module_path!(),
        "::a_database_a_newer_build_migrated_is_refused"
    );
    for db in TestDatabase::all(test).await {
        let store = db.store().await;
        let ws = workspace(&store, "kept").await;
        db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('29990101000000')")
            .await;
        let refused = store.migrate().await.unwrap_err();
        assert!(
            refused.to_string().contains("newer build")
                && refused.to_string().contains("29990101000000"),
            "{:?}: {refused}",
            db.kind
        );
        let opened = Store::open(&db.url, StoreOptions::default()).await;
        assert!(opened.is_err(), "{:?}", db.kind);
        // What the newer build wrote is as it was.
        let found = store.find_workspace("kept").await.unwrap().unwrap();
        assert_eq!(found.id, ws.id);
    }
}

/// A server takes a SQLite file's lock before it migrates: a second server on the file (an
/// older build's, in an upgrade) is refused before it changes the schema under the first.
/// Before, the schema was migrated and only then the lock found taken.
#[tokio::test]
async fn a_second_server_on_a_sqlite_file_is_refused_before_it_migrates() {
    let db = TestDatabase::sqlite();
    migrate_before(&db, "2026-11-28-000001", String::new()).await;
    let path = db.url.trim_start_matches("sqlite://");
    let held = std::fs::File::create(format!("{path}.lock")).unwrap();
    held.try_lock().unwrap();

    let server = StoreOptions {
        server: Some(shortlink_storage::ServerOptions::default()),
        ..StoreOptions::default()
    };
    let Err(refused) = Store::open(&db.url, server).await else {
        panic!("a second server is refused");
    };
    assert!(
        refused
            .to_string()
            .contains("another server is using this SQLite file"),
        "{refused}"
    );
    drop(held);
    let store = Store::connect(&db.url, shortlink_storage::PoolOptions::default()).unwrap();
    assert_eq!(
        store.migrate().await.unwrap(),
        1,
        "the refused server migrated nothing"
    );
}
