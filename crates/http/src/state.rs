//! What every handler shares.

use std::sync::Arc;

use shortlink_domain::BaseUrl;
use shortlink_service::Service;
use shortlink_storage::Store;

use crate::auth::KeyCache;
use crate::ratelimit::{AuthFailureGuard, RateLimiter};

/// Settings the routes need beyond the service's. Whether webhooks may target loopback and
/// private addresses is the service's (`ServiceSettings::webhooks.allow_private`), which both
/// the registration of an endpoint and its deliveries go by. [`HttpSettings::default`] has the
/// server's defaults; set the fields that differ:
///
/// ```
/// let settings = shortlink_http::HttpSettings {
///     auth_failures_per_minute: 50,
///     ..shortlink_http::HttpSettings::default()
/// };
/// # assert!(settings.redis_url.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Failed authentications allowed per client address per minute.
    pub auth_failures_per_minute: u32,
    /// Where `/` sends visitors instead of serving the dashboard (`--root-redirect`).
    pub root_redirect: Option<crate::routes::dashboard::RootRedirect>,
    /// How long a request body may take to arrive whole
    /// ([`crate::extract::REQUEST_BODY_TIMEOUT`] by default); then 408 `REQUEST_TIMEOUT`.
    pub request_body_timeout: std::time::Duration,
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxies`); none by default.
    pub trusted_proxies: shortlink_analytics::TrustedProxies,
    /// Where the rate limits shared by every instance live (`--redis-url`); none by default.
    pub redis_url: Option<String>,
}

impl Default for HttpSettings {
    /// The server's defaults: [`crate::ratelimit::AUTH_FAILURES_PER_MINUTE`], the dashboard at `/`,
    /// [`crate::extract::REQUEST_BODY_TIMEOUT`], no trusted proxy, rate limits per instance.
    fn default() -> Self {
        Self {
            auth_failures_per_minute: crate::ratelimit::AUTH_FAILURES_PER_MINUTE,
            root_redirect: None,
            request_body_timeout: crate::extract::REQUEST_BODY_TIMEOUT,
            trusted_proxies: Default::default(),
            redis_url: None,
        }
    }
}

/// The state behind every route, built once by the server and shared by all workers.
pub struct AppState {
    /// The use cases: the redirect's lookup, click counting, link creation and changes.
    pub service: Service,
    /// The service's store, for the plain reads and writes the routes make themselves
    /// (workspaces, keys, webhooks, link reads).
    pub store: Store,
    /// Settings.
    pub settings: HttpSettings,
    /// Per-workspace rate limit.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Failed authentications per client address.
    pub auth_failures: AuthFailureGuard,
    /// Recently authenticated keys.
    pub keys: KeyCache,
}

impl AppState {
    /// State over `service`: the key cache, and the rate limiter, shared through Redis when
    /// `settings.redis_url` is set (the binary checks the URL before; one this cannot use
    /// limits per instance, with an error in the log), else in-process.
    pub fn new(service: Service, settings: HttpSettings) -> Self {
        let rate_limiter: Arc<dyn RateLimiter> = match &settings.redis_url {
            Some(url) => match crate::ratelimit::RedisRateLimiter::new(url) {
                Ok(shared) => Arc::new(shared),
                Err(e) => {
                    tracing::error!(error = %e, "the Redis URL is not usable: rate limits are per instance");
                    Arc::new(crate::ratelimit::LocalRateLimiter::default())
                }
            },
            None => Arc::new(crate::ratelimit::LocalRateLimiter::default()),
        };
        let keys = KeyCache::default();
        let stale = keys.clone();
        // A key revoked (or a rate changed) on another instance stops working here at once.
        service.observe_key_changes(std::sync::Arc::new(move || stale.clear()));
        Self {
            store: service.store().clone(),
            service,
            auth_failures: AuthFailureGuard::new(settings.auth_failures_per_minute),
            settings,
            rate_limiter,
            keys,
        }
    }

    /// The base URL.
    pub fn base(&self) -> &BaseUrl {
        self.service.base_url()
    }

    /// The short domain (`host[:port]`).
    pub fn domain(&self) -> &str {
        self.service.domain()
    }
}
