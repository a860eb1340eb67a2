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

#[test]
fn a_root_redirect_that_is_not_a_web_url_fails_in_one_line() {
    let out = run_with_env(
        &["serve"],
        &[("SHORTLINK_ROOT_REDIRECT", "ftp://example.com/")],
    );
    let error = out.one_line_error();
    assert!(
        error.contains("root redirect must be an absolute http or https URL"),
        "{error}"
    );
}
