//! What every handler shares.

use std::sync::Arc;

use shortlink_domain::BaseUrl;
use shortlink_storage::Store;
use shortlink_webhooks::WakeHandle;

use crate::auth::KeyCache;
use crate::cache::LinkCache;
use crate::clicks::ClickCounter;
use crate::create::LinkCreator;
use crate::ratelimit::{AuthFailureGuard, RateLimiter};

/// Settings the routes need.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// The public base of short URLs.
    pub base_url: BaseUrl,
    /// Whether webhooks may target loopback and private addresses.
    pub webhook_allow_private_targets: bool,
    /// Failed authentications allowed per client address per minute.
    pub auth_failures_per_minute: u32,
    /// Where `/` sends visitors instead of serving the dashboard (`--root-redirect`).
    pub root_redirect: Option<crate::routes::dashboard::RootRedirect>,
}

/// The state behind every route, built once by the server and shared by all workers.
pub struct AppState {
    /// Storage.
    pub store: Store,
    /// Settings.
    pub settings: HttpSettings,
    /// Code → redirect target, with negative entries.
    pub links: LinkCache,
    /// Clicks waiting to be written.
    pub clicks: Arc<ClickCounter>,
    /// Per-workspace rate limit.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Failed authentications per client address.
    pub auth_failures: AuthFailureGuard,
    /// Recently authenticated keys.
    pub keys: KeyCache,
    /// Woken after events were written to the outbox, so delivery starts at once.
    pub webhooks: WakeHandle,
    /// Single link creation, written in groups.
    pub creator: LinkCreator,
}

impl AppState {
    /// State with the in-process rate limiter and caches. Starts the link writer task, so it must
    /// be called within a tokio runtime.
    pub fn new(
        store: Store,
        settings: HttpSettings,
        clicks: Arc<ClickCounter>,
        webhooks: WakeHandle,
    ) -> Self {
        Self {
            creator: LinkCreator::spawn(store.clone(), settings.base_url.clone(), webhooks.clone()),
            store,
            auth_failures: AuthFailureGuard::new(settings.auth_failures_per_minute),
            settings,
            links: LinkCache::default(),
            clicks,
            rate_limiter: Arc::new(crate::ratelimit::LocalRateLimiter::default()),
            keys: KeyCache::default(),
            webhooks,
        }
    }

    /// The base URL.
    pub fn base(&self) -> &BaseUrl {
        &self.settings.base_url
    }

    /// The short domain (`host[:port]`).
    pub fn domain(&self) -> &str {
        self.settings.base_url.domain()
    }
}
