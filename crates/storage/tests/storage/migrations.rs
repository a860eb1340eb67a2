//! Upgrades keep what earlier schemas held: a database written by the first release's schema
//! is migrated by `Store::migrate` with every link and every counted click intact.

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use shortlink_domain::{LinkId, LinkRef, WorkspaceId};
use shortlink_storage::{ClickBatch, DatabaseKind, LinkClicks};

use crate::{TestDatabase, base, create, new_link};

const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

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
        match db.kind {
            DatabaseKind::Sqlite => {
                let path = db.url.trim_start_matches("sqlite://").to_owned();
                tokio::task::spawn_blocking(move || {
                    let mut conn = SqliteConnection::establish(&path).unwrap();
                    conn.run_next_migration(SQLITE).unwrap();
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
                    conn.run_next_migration(POSTGRES).unwrap();
                    conn.batch_execute(&seed).unwrap();
                })
                .await
                .unwrap();
            }
        }

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
