//! Requests refused before routing, sent by hand over TCP to the real binary: what they are
//! answered, and that none of them is logged above warn.

use std::time::Duration;

use shortlink_storage::testing::TestDatabase;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::Server;

/// Longer than actix's client request timeout (5 s), with room for a loaded machine.
const ANSWER_DEADLINE: Duration = Duration::from_secs(20);

/// Writes `head` (the server may stop reading part way), then reads the answer until the server
/// closes: (status, body).
async fn exchange(server: &Server, head: &str) -> (u16, String) {
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address)
        .await
        .expect("the server accepts connections");
    // A server that answered early and closed makes this fail; its answer is what counts.
    let _ = stream.write_all(head.as_bytes()).await;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(ANSWER_DEADLINE, stream.read_to_end(&mut buf))
        .await
        .expect("the server answers and closes in time");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    (status, body.to_owned())
}

#[tokio::test]
async fn oversized_and_unfinished_heads_are_answered_and_logged_at_warn_at_most() {
    let db = TestDatabase::sqlite();
    let server = Server::start(&db.url, &[]).await;

    let long_uri = format!(
        "GET /api/v1/links?x={} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    let (status, body) = exchange(&server, &long_uri).await;
    assert_eq!(status, 414, "{body}");
    assert!(body.contains("\"URI_TOO_LONG\""), "{body}");

    let big_header = format!(
        "GET /api/v1/links HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "b".repeat(70 * 1024)
    );
    let (status, body) = exchange(&server, &big_header).await;
    assert_eq!(status, 431, "{body}");
    assert!(body.contains("\"HEADERS_TOO_LARGE\""), "{body}");

    // Past actix's own 128 KiB head buffer: still 431.
    let huge_header = format!(
        "GET /api/v1/links HTTP/1.1\r\nHost: a\r\nX-Huge: {}\r\n\r\n",
        "c".repeat(200 * 1024)
    );
    let (status, _) = exchange(&server, &huge_header).await;
    assert_eq!(status, 431);

    // Headers that never finish.
    let (status, _) = exchange(&server, "GET /api/v1/links HTTP/1.1\r\nHost: a\r\n").await;
    assert_eq!(status, 408);

    let log = server.stderr();
    assert!(log.contains("request head refused"), "{log}");
    let loud: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(loud.is_empty(), "logged above warn: {loud:#?}");
}
