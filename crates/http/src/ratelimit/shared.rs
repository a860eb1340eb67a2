//! The workspace rate limit and the failed-authentication budget, shared by every instance
//! through Redis (`--redis-url`): the same GCRA as [`LocalRateLimiter`], its state one key per
//! workspace (or per client address), checked and updated by one Lua script, so one round trip
//! per request decides for all instances together (Redis's own clock keeps the instances' clocks
//! out of it). While Redis does not answer, each instance limits on its own, says so once in the
//! log and in `/readyz`, and tries Redis again a second later.
//!
//! A failed authentication is counted in Redis; the one that spends an address's budget blocks
//! the address on the instance that saw it, and every later failure from it, on any instance,
//! is over the budget too and blocks it there. So the instances together allow the budget, not
//! the budget each.

use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use shortlink_domain::{RateLimit, WorkspaceId};
use tokio::sync::OnceCell;

use super::{
    AuthFailureGuard, Decision, DecisionFuture, FailureFuture, LocalRateLimiter, RateLimiter,
    SharingFuture,
};

/// GCRA with a burst of one window's rate. KEYS[1]: the limited key; ARGV[1]: its rate per
/// window; ARGV[2]: the window in milliseconds. Answers {allowed (0|1), remaining, reset_ms,
/// retry_after_ms}.
const GCRA: &str = r"
local rate = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local period = tolerance / rate
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + period
local ahead = new_tat - now
if ahead > tolerance then
  return {0, 0, math.ceil(tat - now), math.ceil(ahead - tolerance)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil(tolerance) + 1000)
return {1, math.floor((tolerance - ahead) / period), math.ceil(ahead), 0}
";

/// How long a check waits for Redis before this instance decides alone.
const ANSWER_WITHIN: Duration = Duration::from_millis(250);

/// How long after a failure requests skip Redis.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The rate limiter of several instances.
pub struct RedisRateLimiter {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    /// The runtime the connection is made on (the one the limiter was made on).
    runtime: Option<tokio::runtime::Handle>,
    script: redis::Script,
    local: LocalRateLimiter,
    since: Instant,
    /// Milliseconds after `since` until which checks skip Redis.
    skip_until: AtomicU64,
    /// Whether the last check reached Redis (for `/readyz` and the log's one line per change).
    shared: AtomicBool,
}

impl RedisRateLimiter {
    /// A limiter on the Redis at `url`; it connects on first use and reconnects by itself. Made
    /// on a runtime, it connects on that runtime.
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            client: redis::Client::open(url)?,
            connection: OnceCell::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            script: redis::Script::new(GCRA),
            local: LocalRateLimiter::default(),
            since: Instant::now(),
            skip_until: AtomicU64::new(0),
            shared: AtomicBool::new(true),
        })
    }

    /// Whether `url` is one [`RedisRateLimiter::new`] takes (`redis://`, `rediss://`,
    /// `redis+unix://`, a database number that is a number): checked at start, so a typo stops
    /// the server rather than leaving its limits unshared.
    pub fn check_url(url: &str) -> Result<(), redis::RedisError> {
        redis::Client::open(url).map(drop)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The connection, made on first use (it reconnects by itself) on the runtime that made the
    /// limiter: a connection is driven by a task of the runtime that makes it, and one made by
    /// the first request would be an HTTP worker's, through which every other worker's checks
    /// would then pass.
    async fn connection(&self) -> Result<ConnectionManager, String> {
        let connect = self.connection.get_or_try_init(|| async {
            let manager = ConnectionManager::new_with_config(self.client.clone(), reconnecting());
            match &self.runtime {
                Some(runtime) => runtime.spawn(manager).await.map_err(|e| e.to_string())?,
                None => manager.await,
            }
            .map_err(|e| e.to_string())
        });
        Ok(tokio::time::timeout(ANSWER_WITHIN, connect)
            .await
            .map_err(|_| "no connection in time".to_owned())??
            .clone())
    }

    /// Runs the GCRA on `key`, `rate` per `window`, in Redis.
    async fn shared_decision(
        &self,
        key: String,
        rate: u32,
        window: Duration,
    ) -> Result<Decision, String> {
        let mut connection = self.connection().await?;
        let mut invocation = self.script.key(key);
        invocation.arg(rate).arg(window.as_millis() as u64);
        let run = invocation.invoke_async(&mut connection);
        let (allowed, remaining, reset_ms, retry_ms): (i64, i64, i64, i64) =
            tokio::time::timeout(ANSWER_WITHIN, run)
                .await
                .map_err(|_| "no answer in time".to_owned())?
                .map_err(|e| e.to_string())?;
        let seconds = |ms: i64| u64::try_from(ms).unwrap_or(0).div_ceil(1000);
        Ok(Decision {
            allowed: allowed == 1,
            limit: rate,
            remaining: u32::try_from(remaining).unwrap_or(0),
            reset: seconds(reset_ms),
            retry_after: if allowed == 1 {
                0
            } else {
                seconds(retry_ms).max(1)
            },
        })
    }

    /// Whether Redis answers a `PING` in time.
    async fn ping(&self) -> Result<(), String> {
        let mut connection = self.connection().await?;
        let command = redis::cmd("PING");
        let ping = command.query_async::<()>(&mut connection);
        tokio::time::timeout(ANSWER_WITHIN, ping)
            .await
            .map_err(|_| "no answer in time".to_owned())?
            .map_err(|e| e.to_string())
    }

    /// What `call` to Redis answers, unless Redis was found not to answer within the last
    /// [`RETRY_AFTER`] or does not answer now (`None`: decide on this instance).
    async fn reach<T>(&self, call: impl Future<Output = Result<T, String>>) -> Option<T> {
        if self.now() < self.skip_until.load(Ordering::Relaxed) {
            return None;
        }
        match call.await {
            Ok(answer) => {
                self.note(true, None);
                Some(answer)
            }
            Err(why) => {
                let until = self.now() + RETRY_AFTER.as_millis() as u64;
                self.skip_until.store(until, Ordering::Relaxed);
                self.note(false, Some(&why));
                None
            }
        }
    }

    fn note(&self, shared: bool, why: Option<&str>) {
        if self.shared.swap(shared, Ordering::Relaxed) != shared {
            match why {
                Some(why) => tracing::warn!(
                    error = why,
                    "Redis does not answer: rate limits are counted per instance until it does"
                ),
                None => tracing::info!("Redis answers again: rate limits are shared"),
            }
        }
    }
}

/// How the connection reconnects once Redis went away: about once a second, a few times, then
/// again on the next check's demand, so sharing resumes within a second or two of Redis coming
/// back. The crate's default waits about a second, then a minute or more between tries (its
/// factor of 100 multiplies a delay that starts at a second), and every check meanwhile waited
/// out [`ANSWER_WITHIN`] on the pending reconnection.
fn reconnecting() -> ConnectionManagerConfig {
    let delay = u64::try_from(RETRY_AFTER.as_millis()).unwrap_or(1000);
    ConnectionManagerConfig::new()
        .set_factor(1)
        .set_max_delay(delay)
        .set_number_of_retries(3)
        .set_connection_timeout(ANSWER_WITHIN)
}

impl RateLimiter for RedisRateLimiter {
    fn check(&self, workspace: WorkspaceId, rate: RateLimit) -> DecisionFuture<'_> {
        Box::pin(async move {
            let key = format!("shortlink:ratelimit:{workspace}");
            let decision = self.shared_decision(key, rate.per_second(), Duration::from_secs(1));
            match self.reach(decision).await {
                Some(decision) => decision,
                None => self.local.check(workspace, rate).await,
            }
        })
    }

    fn auth_failure<'a>(&'a self, addr: IpAddr, guard: &'a AuthFailureGuard) -> FailureFuture<'a> {
        Box::pin(async move {
            let key = format!("shortlink:authfailures:{addr}");
            let minute = Duration::from_secs(60);
            match self
                .reach(self.shared_decision(key, guard.per_minute(), minute))
                .await
            {
                Some(decision) if decision.allowed => {
                    if decision.remaining == 0 {
                        guard.spent(addr);
                    }
                    None
                }
                Some(decision) => {
                    Some(guard.block(addr, Duration::from_secs(decision.retry_after)))
                }
                None => guard.record_failure(addr),
            }
        })
    }

    /// Asks Redis (a readiness probe should not report what the last request found: before the
    /// first, nothing had been found), unless it was found not to answer within the last second.
    fn sharing(&self) -> SharingFuture<'_> {
        Box::pin(async move {
            self.reach(self.ping()).await;
            Some(self.shared.load(Ordering::Relaxed))
        })
    }
}
