//! `--root-redirect`: `/` sends visitors elsewhere instead of serving the dashboard.

use reqwest::StatusCode;
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Server, client, run_with_env};

#[tokio::test]
async fn the_root_redirect_sends_the_root_elsewhere_and_leaves_the_assets() {
    let db = TestDatabase::sqlite();
    let target = "https://example.com/welcome?from=short";
    let server = Server::start(&db.url, &["--root-redirect".into(), target.into()]).await;
    let client = client();
    let res = client.get(server.url("/")).send().await.expect("an answer");
    assert_eq!(res.status(), StatusCode::FOUND);
    assert_eq!(res.headers()["location"], target);
    let css = client
        .get(server.url("/assets/app.css"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(css.status(), StatusCode::OK);
}

/// A value clap refuses: its usage error (exit 2) quoting the reason, before anything starts.
#[test]
fn a_root_redirect_that_is_not_a_web_url_is_refused_before_starting() {
    let out = run_with_env(
        &["serve"],
        &[("SHORTLINK_ROOT_REDIRECT", "ftp://example.com/")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error: invalid value 'ftp://example.com/' for '--root-redirect")
            && out
                .stderr
                .contains("the root redirect must be an absolute http or https URL"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}
