//! A PostgreSQL server that cannot be reached: every way the store connects (its start's
//! migrations, the pool, the change listener) says why, as the driver knows it, and where it
//! tried, and the failure stays a passing unavailability.

use shortlink_storage::{PoolOptions, Store, StoreOptions};

/// A port of 127.0.0.1 where nothing listens: bound, then let go.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_names_its_cause_and_where_it_was_tried() {
    let port = closed_port();
    let url = format!("postgres://shortlink:hunter2@127.0.0.1:{port}/x");
    let opened = Store::open(&url, StoreOptions::default())
        .await
        .expect_err("nothing listens");
    let store = Store::connect(&url, PoolOptions::default()).expect("connections are lazy");
    let pooled = store.list_workspaces().await.expect_err("nothing listens");
    let listener = store
        .listen_for_changes()
        .await
        .expect_err("nothing listens");
    for (what, error) in [
        ("the start", opened),
        ("a pooled call", pooled),
        ("the change listener", listener),
    ] {
        assert!(error.is_unavailable(), "{what}: {error:?}");
        let message = error.to_string();
        assert!(message.contains("Connection refused"), "{what}: {message}");
        assert!(
            message.contains(&format!("127.0.0.1:{port}")),
            "{what}: {message}"
        );
        assert!(!message.contains("hunter2"), "{what}: {message}");
    }
}
