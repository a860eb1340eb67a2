//! The first start on an empty database: a workspace, a key, and a banner that shows it once.

use std::time::Duration;

use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Api, Server, api_key_in, cli, is_api_key};

#[tokio::test]
async fn the_first_start_prints_a_working_key_once_and_the_second_start_none() {
    let db = TestDatabase::sqlite();
    // The newcomer's command: no subcommand at all.
    let mut first = Server::start_command(None, &db.url, &[]).await;
    let key = first.first_run_key().await;
    assert!(is_api_key(&key), "the banner's key: {key}");
    assert!(
        !first.stdout().contains(&key),
        "the key is shown on stderr only"
    );
    let banner = first.stderr();
    assert!(
        banner.contains("first run") && banner.contains("default"),
        "the banner says what happened: {banner}"
    );
    assert!(
        banner.contains(&first.url("/api/v1/links")),
        "the banner's example calls this server: {banner}"
    );

    let link = Api::new(&first, &key)
        .create_link("https://example.com/first-run")
        .await;
    assert!(
        link["shortUrl"]
            .as_str()
            .is_some_and(|u| u.starts_with(&first.base)),
        "{link}"
    );

    let listed = cli(&db.url, &["workspace", "list"]);
    assert!(listed.success().contains("default"), "{}", listed.stdout);

    first.signal("TERM");
    let (status, _) = first.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "{status}");

    // Same database again: no banner, no new key, and the old key still works.
    let mut second = Server::start(&db.url, &[]).await;
    Api::new(&second, &key)
        .create_link("https://example.com/second-run")
        .await;
    second.signal("TERM");
    let (status, stderr) = second.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "{status}");
    assert_eq!(
        api_key_in(&stderr),
        None,
        "a second start prints a key: {stderr}"
    );
    assert!(!stderr.contains("first run"), "{stderr}");
    let keys = cli(&db.url, &["key", "list", "--workspace", "default"]);
    assert_eq!(keys.success().lines().count(), 1, "{}", keys.stdout);
}

#[tokio::test]
async fn instances_started_together_on_a_new_postgresql_database_all_serve_and_one_shows_a_key() {
    let test = concat!(module_path!(), "::instances_started_together");
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    // Each start panics if its server exits before it is ready (a lost race did: "a workspace
    // named 'default' already exists").
    let base = ["--base-url".to_owned(), "http://sho.test".to_owned()];
    let (mut a, mut b, mut c) = tokio::join!(
        Server::start(&db.url, &[]),
        Server::start(&db.url, &[]),
        Server::start(&db.url, &base),
    );
    let mut keys = Vec::new();
    for (server, base_given) in [(&mut a, false), (&mut b, false), (&mut c, true)] {
        server.signal("TERM");
        let (status, stderr) = server.wait_exit(Duration::from_secs(15)).await;
        assert!(status.success(), "{status}: {stderr}");
        keys.extend(api_key_in(&stderr));
        // On a shared database, an instance left on its own address is told so.
        let warned = stderr.contains("give every instance of one database the same --base-url");
        assert_eq!(warned, !base_given, "{stderr}");
    }
    assert_eq!(keys.len(), 1, "one banner among the three: {keys:?}");
    let listed = cli(&db.url, &["workspace", "list"]);
    assert_eq!(listed.success().lines().count(), 1, "{}", listed.stdout);
    let keys_listed = cli(&db.url, &["key", "list", "--workspace", "default"]);
    assert_eq!(
        keys_listed.success().lines().count(),
        1,
        "{}",
        keys_listed.stdout
    );
}
