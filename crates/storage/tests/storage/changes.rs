use std::time::{Duration, Instant};

use shortlink_storage::testing::fault_proxy::{Fault, FaultProxy};
use shortlink_storage::{ANSWER_WITHIN, LISTENER_QUIET_FOR, PoolOptions, Store};

use crate::TestDatabase;

/// A listener whose connection stops answering without being closed (a failover, a dropped
/// route) reports it lost after its quiet period and a bound, rather than after the system's TCP
/// keepalive (two hours by default), so the caches fall back to short lifetimes meanwhile.
#[tokio::test]
async fn a_listener_whose_connection_stops_answering_reports_it_lost() {
    let test = "a_listener_whose_connection_stops_answering_reports_it_lost";
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    db.store().await;
    let (proxy, url) = FaultProxy::for_postgres(&db.url).await;
    let store = Store::connect(&url, PoolOptions { max_connections: 2 }).unwrap();
    let mut listener = store.listen_for_changes().await.unwrap().unwrap();
    proxy.set(Fault::Freeze);
    let started = Instant::now();
    let bound = LISTENER_QUIET_FOR + ANSWER_WITHIN + Duration::from_secs(2);
    let next = tokio::time::timeout(bound, listener.next()).await;
    assert!(
        matches!(next, Ok(None)),
        "still listening after {:?}",
        started.elapsed()
    );
}
