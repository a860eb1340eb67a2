//! Following changes made on other instances sharing a PostgreSQL database: every change to a
//! link or a key is announced at its commit (`storage::Change`), and a listener on a connection
//! of its own drops what the caches knew of it, so every instance follows within a moment.
//! While the listener is down, cached links answer for at most a second
//! ([`crate::cache::SHORT_TTL`]); when it is back, the caches start empty (what they learned
//! meanwhile may be stale). SQLite has one server, which makes every change itself: nothing to
//! follow.

use std::sync::Arc;
use std::time::Duration;

use shortlink_storage::Change;

use crate::cache::LinkCache;
use shortlink_domain::ThrottledLog;

/// Told when keys or workspaces changed (a key revoked, a rate changed): whatever a server
/// cached of keys is stale.
pub type KeyObserver = Arc<dyn Fn() + Send + Sync>;

/// How long to wait before connecting the listener again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Applies changes heard from the store to the caches, until `stop`.
pub(crate) async fn follow_changes(
    store: shortlink_storage::Store,
    domain: String,
    cache: &LinkCache,
    keys: impl Fn(),
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let failures = ThrottledLog::new(Duration::from_secs(60));
    // Whether the log said the channel was lost or would not come up: its return is then worth a
    // line too.
    let mut missing = false;
    loop {
        match store.listen_for_changes().await {
            Ok(None) => return,
            Ok(Some(mut listener)) => {
                cache.clear();
                cache.set_short(false);
                keys();
                if missing {
                    tracing::info!(
                        "the channel that announces changes made on other instances is back"
                    );
                } else {
                    tracing::debug!("hearing changes made by other instances");
                }
                loop {
                    tokio::select! {
                        changes = listener.next() => match changes {
                            Some(changes) => apply(&changes, &domain, cache, &keys),
                            None => break,
                        },
                        () = &mut stop => return,
                    }
                }
                cache.set_short(true);
                missing = true;
                tracing::warn!(
                    "lost the channel that announces changes made on other instances: cached \
                     links answer for at most a second until it is back"
                );
            }
            Err(e) => {
                missing = true;
                cache.set_short(true);
                if let Some(repeated) = failures.occurred(std::time::Instant::now()) {
                    tracing::warn!(error = %e, retries = repeated.times, "cannot listen for changes made on other instances; retrying");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RECONNECT_AFTER) => {}
            () = &mut stop => return,
        }
    }
}

fn apply(changes: &[Change], domain: &str, cache: &LinkCache, keys: &impl Fn()) {
    for change in changes {
        match change {
            Change::Link { domain: d, code } if d == domain => cache.invalidate(code),
            Change::Link { .. } => {}
            Change::Keys => keys(),
        }
    }
}
