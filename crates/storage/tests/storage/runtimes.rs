//! A store is used from runtimes other than the one that opened it: each HTTP worker runs one of
//! its own, which ends when the server stops, while the stop's last writes (pending clicks, the
//! records of webhook attempts) still go through the store.

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

use crate::TestDatabase;

/// A call in flight on a connection that a call on another runtime made goes on when that
/// runtime ends: PostgreSQL's connection is driven by a task, which must not be one of the
/// runtime that ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_outlives_the_runtime_that_made_its_connection() {
    let test = concat!(module_path!(), "::outlives");
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let store = db.store().await;

    // A runtime of its own, as an HTTP worker's, makes every connection the pool holds, then
    // waits to be told to end.
    let (made, connections_made) = tokio::sync::oneshot::channel();
    let (end, told_to_end) = tokio::sync::oneshot::channel::<()>();
    let worker = store.clone();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (a, b, c, d) = tokio::join!(
                worker.check_ready(),
                worker.check_ready(),
                worker.check_ready(),
                worker.check_ready()
            );
            for answer in [a, b, c, d] {
                answer.unwrap();
            }
            made.send(()).unwrap();
            let _ = told_to_end.await;
        });
    });
    connections_made.await.unwrap();

    // A call that waits on a lock, on one of those connections; the runtime ends meanwhile.
    let mut admin = AsyncPgConnection::establish(&db.url).await.unwrap();
    admin
        .batch_execute("BEGIN; LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let call = tokio::spawn({
        let store = store.clone();
        async move { store.list_workspaces().await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    end.send(()).unwrap();
    thread.join().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    admin.batch_execute("COMMIT").await.unwrap();

    let answer = call.await.unwrap();
    assert!(answer.is_ok(), "{answer:?}");
}
