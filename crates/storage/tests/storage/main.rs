//! The storage suite: every test runs against SQLite, and against PostgreSQL when
//! `TEST_POSTGRES_URL` is set, each on a database of its own.
#![expect(
    clippy::unwrap_used,
    reason = "a test fails by panicking, and helpers are part of tests"
)]

mod changes;
mod click_journal;
mod deliveries;
mod link_codes;
mod links;
mod log_file;
mod migrations;
mod partitions;
mod redirect_index;
mod rollups;
mod runtimes;
mod unreachable;
mod workspaces;

use std::time::Duration;

use shortlink_domain::{
    ApiKey, ApiKeyId, ApiKeySecret, BaseUrl, Destination, LinkPatch, LinkRef, RateLimit, Slug,
    Timestamp, Workspace, WorkspaceId,
};
pub(crate) use shortlink_storage::LinkFilter;
pub(crate) use shortlink_storage::testing::TestDatabase;
use shortlink_storage::{CreateOutcome, LinkUpdate, NewLink, Store};

/// Runs `body` once per configured backend with a fresh migrated store. A test marked
/// `as_server` runs once more on SQLite with the store set up as the server sets it up: the click
/// journal on (`Store::start_click_journal`) and the redirect index loaded, which then answers
/// for codes (`Store::load_redirect_index`).
macro_rules! each_backend {
    ($name:ident, |$store:ident| $body:block) => {
        $crate::each_backend!(@runs $name, false, |$store| $body);
    };
    ($name:ident, as_server, |$store:ident| $body:block) => {
        $crate::each_backend!(@runs $name, true, |$store| $body);
    };
    (@runs $name:ident, $as_server:expr, |$store:ident| $body:block) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let test = concat!(module_path!(), "::", stringify!($name));
            let server = $as_server.then(|| ($crate::TestDatabase::sqlite(), true));
            let plain = $crate::TestDatabase::all(test).await.into_iter().map(|db| (db, false));
            for (db, as_server) in server.into_iter().chain(plain) {
                let $store = db.store().await;
                if as_server {
                    $crate::set_up_as_server(&$store).await;
                }
                let run = async { $body };
                run.await;
                drop(db);
            }
        }
    };
}
pub(crate) use each_backend;

/// Sets a SQLite store up as the server does: the click journal on, the redirect index loaded.
pub(crate) async fn set_up_as_server(store: &Store) {
    let journal = store.start_click_journal(shortlink_storage::CLICK_FOLD_INTERVAL);
    assert!(journal.await.unwrap());
    assert!(store.load_redirect_index(1 << 20).await.unwrap());
}

pub(crate) fn base() -> BaseUrl {
    BaseUrl::parse("https://sho.rt").unwrap()
}

pub(crate) async fn workspace(store: &Store, name: &str) -> Workspace {
    let ws = Workspace {
        id: WorkspaceId::generate(),
        name: name.to_owned(),
        rate_limit: RateLimit::default(),
        created_at: Timestamp::now(),
    };
    store.create_workspace(&ws).await.unwrap();
    ws
}

pub(crate) async fn api_key(store: &Store, ws: &Workspace) -> (ApiKey, ApiKeySecret) {
    let secret = ApiKeySecret::generate();
    let key = ApiKey {
        id: ApiKeyId::generate(),
        workspace_id: ws.id,
        name: "test".into(),
        prefix: secret.display_prefix(),
        created_at: Timestamp::now(),
        revoked_at: None,
    };
    store.create_api_key(&key, &secret.hash()).await.unwrap();
    (key, secret)
}

pub(crate) fn new_link(ws: &Workspace, slug: Option<&str>, dest: &str) -> NewLink {
    NewLink {
        id: shortlink_domain::LinkId::generate(),
        workspace_id: ws.id,
        domain: base().domain().to_owned(),
        slug: slug.map(|s| Slug::parse(s).unwrap()),
        destination: Destination::parse(dest, &base()).unwrap(),
        created_at: Timestamp::now(),
        options: Default::default(),
    }
}

/// Points a link elsewhere (a change of its destination alone): the link after, or `None`.
pub(crate) async fn update_destination(
    store: &Store,
    workspace: WorkspaceId,
    link: &LinkRef,
    domain: &str,
    destination: &Destination,
) -> Result<Option<shortlink_domain::Link>, shortlink_storage::StorageError> {
    let patch = LinkPatch {
        destination: Some(destination.clone()),
        ..LinkPatch::default()
    };
    let changed = store
        .update_link(workspace, link, domain, &patch, &base())
        .await?;
    Ok(changed.map(|update| match update {
        LinkUpdate::Changed { after, .. } => *after,
        LinkUpdate::SlugConflict => panic!("no code was changed"),
    }))
}

pub(crate) async fn create(store: &Store, link: NewLink) -> shortlink_domain::Link {
    match store.create_links(vec![link], &base()).await.unwrap().pop() {
        Some(CreateOutcome::Created(link)) => link,
        other => panic!("expected a created link, got {other:?}"),
    }
}

/// Another connection to a SQLite file takes its write lock, writes, and commits `after` later;
/// returns once it holds the lock, with the thread to join.
pub(crate) fn write_elsewhere(db: &TestDatabase, after: Duration) -> std::thread::JoinHandle<()> {
    use diesel::{Connection, SqliteConnection, connection::SimpleConnection};

    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let (locked, is_locked) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        let mut conn = SqliteConnection::establish(&path).unwrap();
        let id = WorkspaceId::generate();
        conn.batch_execute(&format!(
            "PRAGMA busy_timeout = 5000; BEGIN IMMEDIATE; \
             INSERT INTO workspaces (id, name, rate_limit, created_at) \
             VALUES ('{id}', '{id}', 1, 0);"
        ))
        .unwrap();
        locked.send(()).unwrap();
        std::thread::sleep(after);
        conn.batch_execute("COMMIT").unwrap();
    });
    is_locked.recv().unwrap();
    other
}
