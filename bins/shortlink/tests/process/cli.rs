//! The administration commands: what they print, and how they fail.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{
    Api, Server, cli, eventually, is_api_key, is_id, run, run_with_env, stored_clicks,
};

#[test]
fn workspace_create_prints_its_id_and_refuses_a_taken_name() {
    let db = TestDatabase::sqlite();
    let created = cli(
        &db.url,
        &["workspace", "create", "acme", "--rate-limit", "50"],
    );
    let id = created.success().trim_end_matches('\n');
    assert!(is_id(id, "ws_"), "stdout is not one workspace id: {id:?}");
    assert!(created.stderr.is_empty(), "stderr: {}", created.stderr);

    let again = cli(&db.url, &["workspace", "create", "acme"]);
    let message = again.one_line_error();
    assert!(message.contains("acme"), "{message}");

    let list = cli(&db.url, &["workspace", "list"]);
    let lines: Vec<&str> = list.success().lines().collect();
    assert_eq!(lines.len(), 1, "one workspace, one line: {lines:?}");
    assert!(lines[0].contains(id), "{}", lines[0]);
    assert!(lines[0].contains("acme"), "{}", lines[0]);
    assert!(
        lines[0].contains("50"),
        "the rate limit is listed: {}",
        lines[0]
    );
}

#[test]
fn workspace_create_refuses_a_bad_name_and_a_bad_rate_in_one_line() {
    let db = TestDatabase::sqlite();
    cli(&db.url, &["workspace", "create", "two words"]).one_line_error();
    for rate in ["0", "1000001", "99999999999"] {
        let out = cli(
            &db.url,
            &["workspace", "create", "acme", "--rate-limit", rate],
        );
        let message = out.one_line_error();
        assert!(message.contains("between 1 and 1000000"), "{message}");
    }
    assert_eq!(cli(&db.url, &["workspace", "list"]).success(), "");
}

#[test]
fn key_create_prints_the_key_alone_and_key_list_never_shows_it() {
    let db = TestDatabase::sqlite();
    let ws = cli(&db.url, &["workspace", "create", "acme"])
        .success()
        .trim()
        .to_owned();

    let created = cli(&db.url, &["key", "create", "--workspace", "acme"]);
    let stdout = created.success();
    let key = stdout.strip_suffix('\n').unwrap_or(stdout);
    assert!(
        is_api_key(key),
        "stdout must be the key alone (sk_ + 40 base62): {stdout:?}"
    );
    assert!(created.stderr.is_empty(), "stderr: {}", created.stderr);

    // By id as well as by name, with a label.
    let by_id = cli(
        &db.url,
        &["key", "create", "--workspace", &ws, "--name", "ci"],
    );
    let second = by_id.success().trim().to_owned();
    assert!(is_api_key(&second), "{second}");
    assert_ne!(key, second);

    let list = cli(&db.url, &["key", "list", "--workspace", "acme"]);
    let listed = list.success();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    for line in &lines {
        assert!(
            is_id(line.split('\t').next().unwrap_or(""), "key_"),
            "{line}"
        );
    }
    assert!(listed.contains("ci"), "the label is listed: {listed}");
    for secret in [key, second.as_str()] {
        assert!(
            !listed.contains(secret),
            "key list shows a secret: {listed}"
        );
        // Not even the part after a short display prefix.
        assert!(
            !listed.contains(&secret[12..]),
            "key list shows a secret: {listed}"
        );
    }
    assert_eq!(
        cli(&db.url, &["key", "list", "--workspace", &ws]).success(),
        listed,
        "listing by id and by name agree"
    );
}

#[test]
fn commands_on_an_unknown_workspace_or_key_fail_in_one_line() {
    let db = TestDatabase::sqlite();
    cli(&db.url, &["migrate"]).success();
    let message = cli(&db.url, &["key", "create", "--workspace", "nope"])
        .one_line_error()
        .to_owned();
    assert!(message.contains("nope"), "{message}");
    cli(&db.url, &["key", "list", "--workspace", "nope"]).one_line_error();
    cli(&db.url, &["key", "revoke", "not-a-key-id"]).one_line_error();
    cli(
        &db.url,
        &["key", "revoke", "key_01ARZ3NDEKTSV4RRFFQ69G5FAV"],
    )
    .one_line_error();
}

#[test]
fn an_unreachable_database_fails_in_one_line() {
    let out = cli("postgres://nobody@127.0.0.1:1/x", &["migrate"]);
    out.one_line_error();
}

#[test]
fn an_unsupported_database_url_fails_in_one_line() {
    let out = cli("mysql://x", &["migrate"]);
    let message = out.one_line_error();
    assert!(message.contains("mysql://x"), "{message}");
    // The server too refuses it before doing anything.
    cli("mysql://x", &["serve", "--listen", "127.0.0.1:0"]).one_line_error();
}

/// Each of a store's pooled connections would open an in-memory database of its own (the
/// server failed on the first reader's empty one): every command refuses one at once, saying why
/// and what to give instead.
#[test]
fn an_in_memory_sqlite_database_is_refused_in_one_line() {
    for (url, args) in [
        ("sqlite::memory:", &["serve", "--listen", "127.0.0.1:0"][..]),
        ("sqlite://:memory:", &["serve", "--listen", "127.0.0.1:0"]),
        ("sqlite://file::memory:", &["migrate"]),
        (
            "sqlite://file:x?mode=memory",
            &["workspace", "create", "acme"],
        ),
        (":memory:", &["workspace", "list"]),
    ] {
        let message = cli(url, args).one_line_error().to_owned();
        assert!(
            message.contains("in-memory or temporary SQLite database") && message.contains(url),
            "{url} {args:?}: {message}"
        );
        assert!(
            message.contains("sqlite://PATH") && !message.contains("makes one"),
            "{url} {args:?}: {message}"
        );
    }
}

#[test]
fn a_bad_serve_flag_fails_in_one_line_before_making_a_database() {
    let db = TestDatabase::sqlite();
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let message = cli(&db.url, &["serve", "--listen", "not-an-address"])
        .one_line_error()
        .to_owned();
    assert!(message.contains("not-an-address"), "{message}");
    for url in ["http://x", "redis://127.0.0.1:6379/abc"] {
        let args = ["serve", "--listen", "127.0.0.1:0", "--redis-url", url];
        let message = cli(&db.url, &args).one_line_error().to_owned();
        assert!(message.contains("--redis-url"), "{message}");
    }
    let args = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--geoip-db",
        "/nonexistent.mmdb",
    ];
    let message = cli(&db.url, &args).one_line_error().to_owned();
    assert!(message.contains("GeoIP"), "{message}");
    assert!(!std::path::Path::new(&path).exists(), "no database made");
}

/// A start that fails after the database was made (here the metrics listener's address is
/// taken) makes no first-run key: a key made then would never be shown, the next start finding
/// a workspace and printing no banner.
#[tokio::test]
async fn a_start_that_fails_leaves_the_first_run_key_to_the_next() {
    let db = TestDatabase::sqlite();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let args = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &taken,
    ];
    cli(&db.url, &args).one_line_error();
    let listed = cli(&db.url, &["workspace", "list"]);
    assert!(!listed.success().contains("default"), "{}", listed.stdout);

    let server = Server::start_command(None, &db.url, &[]).await;
    let key = server.first_run_key().await;
    assert!(is_api_key(&key), "the banner's key: {key}");
    server.signal("TERM");
}

#[test]
fn the_database_url_flag_may_come_before_the_subcommand() {
    let db = TestDatabase::sqlite();
    let out = run(&["--database-url", &db.url, "migrate"]);
    out.success();
    let out = run(&[
        "--database-url",
        "postgres://nobody@127.0.0.1:1/x",
        "migrate",
    ]);
    out.one_line_error();
    let out = run(&["--database-url", "mysql://x", "migrate"]);
    out.one_line_error();
}

/// A command that reads or changes what a database holds, given a SQLite path where there is
/// none (a typo), says so and makes no file; those that make a database make it.
#[test]
fn only_the_commands_that_make_a_database_make_its_file() {
    let db = TestDatabase::sqlite();
    let path = db.url.trim_start_matches("sqlite://");
    for args in [
        &["workspace", "list"][..],
        &["key", "list", "--workspace", "default"],
        &["workspace", "update", "default", "--rate-limit", "5"],
    ] {
        let message = cli(&db.url, args).one_line_error().to_owned();
        assert!(
            message.contains("no SQLite database at"),
            "{args:?}: {message}"
        );
        assert!(!std::path::Path::new(path).exists(), "{args:?} made {path}");
    }
    cli(&db.url, &["workspace", "create", "acme"]).success();
    assert!(
        cli(&db.url, &["workspace", "list"])
            .success()
            .contains("acme")
    );
}

#[test]
fn migrate_twice_succeeds() {
    let db = TestDatabase::sqlite();
    cli(&db.url, &["migrate"]).success();
    cli(&db.url, &["migrate"]).success();
    // The migrated database is usable by the other commands.
    cli(&db.url, &["workspace", "create", "acme"]).success();
    cli(&db.url, &["migrate"]).success();
}

/// A database a newer build migrated has nothing for this build to apply, but this build does not
/// serve it: `migrate` says so and fails instead of calling it up to date, and so does every other
/// command, before writing anything.
#[tokio::test]
async fn migrate_on_a_newer_builds_schema_fails_naming_both_versions() {
    let db = TestDatabase::sqlite();
    cli(&db.url, &["migrate"]).success();
    db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('99990101000000')")
        .await;
    let message = cli(&db.url, &["migrate"]).one_line_error().to_owned();
    assert!(message.contains("99990101000000"), "{message}");
    assert!(message.contains("expects"), "{message}");
    let message = cli(&db.url, &["workspace", "create", "late"])
        .one_line_error()
        .to_owned();
    assert!(message.contains("newer build"), "{message}");
}

/// Only `migrate` (and `workspace create` on a new database) changes the schema: any other
/// command on an older build's schema says to migrate, and leaves it as it is, so that an
/// administrator's `key list` with the new build does not take the old servers still on the
/// database out of rotation in the middle of a rolling upgrade.
#[tokio::test]
async fn only_migrate_changes_an_older_schema() {
    let db = TestDatabase::sqlite();
    acme_with_a_key(&db);
    let newest = "(SELECT max(version) FROM __diesel_schema_migrations)";
    db.execute(&format!(
        "CREATE TABLE taken_away AS SELECT * FROM __diesel_schema_migrations WHERE version = {newest}; \
         DELETE FROM __diesel_schema_migrations WHERE version = {newest}"
    ))
    .await;
    for args in [
        &["key", "list", "--workspace", "acme"][..],
        &["workspace", "list"],
        &["workspace", "create", "late"],
        &["workspace", "update", "acme", "--rate-limit", "5"],
    ] {
        let message = cli(&db.url, args).one_line_error().to_owned();
        assert!(
            message.contains("this build expects")
                && message.contains("run `shortlink migrate` first"),
            "{args:?}: {message}"
        );
    }
    // Nothing was migrated (the version would be there twice): with it back, all works again.
    db.execute(
        "INSERT INTO __diesel_schema_migrations SELECT * FROM taken_away; DROP TABLE taken_away",
    )
    .await;
    assert!(
        cli(&db.url, &["workspace", "list"])
            .success()
            .contains("acme")
    );
    assert!(
        !cli(&db.url, &["workspace", "list"])
            .success()
            .contains("late")
    );
}

/// A key name with a tab and a newline, stored by a build that did not refuse them, cannot
/// forge a row of `key list`: it shows them escaped, one line per key.
#[tokio::test]
async fn a_stored_name_with_control_characters_is_listed_on_one_line() {
    let db = TestDatabase::sqlite();
    acme_with_a_key(&db);
    db.execute("UPDATE api_keys SET name = 'tab' || char(9) || 'here' || char(10) || 'key_FAKE'")
        .await;
    let out = cli(&db.url, &["key", "list", "--workspace", "acme"]);
    let listed = out.success();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains("tab\\there\\nkey_FAKE"), "{listed}");
}

#[test]
fn the_database_url_is_read_from_the_environment() {
    let db = TestDatabase::sqlite();
    let env = [("DATABASE_URL", db.url.as_str())];
    run_with_env(&["workspace", "create", "from-env"], &env).success();
    let listed = cli(&db.url, &["workspace", "list"]);
    assert!(listed.success().contains("from-env"), "{}", listed.stdout);
}

/// The workspace `acme` at 50 requests a second, made through the CLI, and a key of it.
fn acme_with_a_key(db: &TestDatabase) -> String {
    cli(
        &db.url,
        &["workspace", "create", "acme", "--rate-limit", "50"],
    )
    .success();
    cli(&db.url, &["key", "create", "--workspace", "acme"])
        .success()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn a_revoked_key_is_refused_by_a_running_server_within_five_seconds() {
    let db = TestDatabase::sqlite();
    let key = acme_with_a_key(&db);
    let server = Server::start(&db.url, &[]).await;
    let stderr = server.stderr();
    assert!(
        !stderr.contains(&key[..12]) && !stderr.contains("first run"),
        "a database with a workspace gets no first-run banner: {stderr}"
    );
    let api = Api::new(&server, &key);
    let created = api.create_link("https://example.com/revoked").await;
    assert!(created["shortCode"].is_string(), "{created}");

    let list = cli(&db.url, &["key", "list", "--workspace", "acme"]);
    let key_id = list
        .success()
        .lines()
        .next()
        .and_then(|line| line.split('\t').next())
        .expect("one key listed")
        .to_owned();
    cli(&db.url, &["key", "revoke", &key_id]).success();
    let listed = cli(&db.url, &["key", "list", "--workspace", "acme"]);
    assert!(listed.success().contains("revoked"), "{}", listed.stdout);

    let (status, body, www) = eventually(
        "the revoked key to be refused",
        Duration::from_secs(6),
        async || {
            let res = api
                .request(Method::GET, "/links")
                .send()
                .await
                .expect("the server answers");
            if res.status() != 401 {
                assert_eq!(res.status(), 200, "before revocation takes effect");
                // Well under the workspace's 50 requests a second.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return None;
            }
            let www = res
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            Some((401, res.json::<serde_json::Value>().await.ok()?, www))
        },
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    assert_eq!(body["success"], json!(false), "{body}");
    assert_eq!(www.as_deref().map(|w| w.starts_with("Bearer")), Some(true));

    // A second revocation of the same key is an error: it is no longer active.
    cli(&db.url, &["key", "revoke", &key_id]).one_line_error();
}

#[tokio::test]
async fn a_changed_rate_reaches_a_running_server_within_five_seconds() {
    let db = TestDatabase::sqlite();
    let key = acme_with_a_key(&db);
    let server = Server::start(&db.url, &[]).await;
    let api = Api::new(&server, &key);
    let limit = async || {
        let res = api.request(Method::GET, "/links").send().await;
        let res = res.expect("the server answers");
        assert_eq!(res.status(), 200);
        let limit = res
            .headers()
            .get("ratelimit-limit")
            .map(|v| v.to_str().map(str::to_owned));
        limit.and_then(Result::ok)
    };
    assert_eq!(limit().await.as_deref(), Some("50"));

    cli(
        &db.url,
        &["workspace", "update", "nope", "--rate-limit", "7"],
    )
    .one_line_error();
    cli(
        &db.url,
        &["workspace", "update", "acme", "--rate-limit", "0"],
    )
    .one_line_error();
    let updated = cli(
        &db.url,
        &["workspace", "update", "acme", "--rate-limit", "7"],
    );
    assert!(updated.success().ends_with("\t7/s\n"), "{}", updated.stdout);
    assert!(
        cli(&db.url, &["workspace", "list"])
            .success()
            .contains("\t7/s\t")
    );

    eventually(
        "the new rate to apply",
        Duration::from_secs(6),
        async || {
            let now = limit().await;
            if now.as_deref() == Some("7") {
                return Some(());
            }
            assert_eq!(now.as_deref(), Some("50"), "before the change takes effect");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        },
    )
    .await;
}

#[tokio::test]
async fn the_click_fold_interval_is_how_soon_clicks_reach_the_file_and_zero_is_refused() {
    let db = TestDatabase::sqlite();
    let zero = cli(&db.url, &["serve", "--click-fold-seconds", "0"]);
    assert_eq!(
        zero.status.code(),
        Some(2),
        "a usage error: {}",
        zero.stderr
    );
    assert!(
        zero.stderr.contains("--click-fold-seconds") && zero.stderr.contains("1..=3600"),
        "{}",
        zero.stderr
    );

    let server = Server::start(&db.url, &["--click-fold-seconds".into(), "1".into()]).await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    let link = api.create_link("https://example.com/").await;
    let code = link["shortCode"].as_str().expect("shortCode").to_owned();
    for _ in 0..3 {
        let res = api.visit(&code, None, None).await;
        assert_eq!(res.status(), 302);
    }
    let id = link["id"].as_str().expect("id").to_owned();
    // Read the file as another process would, while the server runs: the counter there moves
    // only by a fold.
    let store = db.store().await;
    eventually(
        "the clicks folded into the file",
        Duration::from_secs(10),
        async || (stored_clicks(&store, &id).await == 3).then_some(()),
    )
    .await;
}

/// The administration commands' help lists what they take, not serve's flags; `serve --help`
/// lists those, with the variables that set them.
#[test]
fn an_admin_commands_help_lists_only_what_it_takes() {
    for args in [
        &["workspace", "--help"][..],
        &["workspace", "create", "--help"],
        &["key", "create", "--help"],
        &["migrate", "--help"],
    ] {
        let out = run(args);
        let help = out.success();
        assert!(help.contains("--database-url"), "{args:?}: {help}");
        assert!(!help.contains("--listen"), "{args:?}: {help}");
    }
    let out = run(&["key", "create", "--help"]);
    assert!(out.success().contains("--workspace"), "{}", out.stdout);
    let out = run(&["serve", "--help"]);
    let help = out.success();
    assert!(
        help.contains("--listen") && help.contains("SHORTLINK_LISTEN"),
        "{help}"
    );
}

/// serve's flags given before `serve`, where the bare `shortlink` takes them, reach the server.
#[test]
fn serve_flags_before_serve_reach_it() {
    let db = TestDatabase::sqlite();
    let args = ["--listen", "not-an-address", "serve", "--database-url"];
    let message = run(&[&args[..], &[db.url.as_str()]].concat())
        .one_line_error()
        .to_owned();
    assert!(message.contains("not-an-address"), "{message}");
}
