//! The workspace rate limit shared by every instance through Redis (`--redis-url`): the same GCRA
//! as [`LocalRateLimiter`], its state one key per workspace, checked and updated by one Lua
//! script, so one round trip per request decides for all instances together (Redis's own clock
//! keeps the instances' clocks out of it). While Redis does not answer, each instance limits on
//! its own, says so once in the log and in `/readyz`, and tries Redis again a second later.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use shortlink_domain::{RateLimit, WorkspaceId};
use tokio::sync::OnceCell;

use super::{Decision, DecisionFuture, LocalRateLimiter, RateLimiter};

/// GCRA with a burst of one second's rate. KEYS[1]: the workspace's key; ARGV[1]: its rate per
/// second. Answers {allowed (0|1), remaining, reset_ms, retry_after_ms}.
const GCRA: &str = r"
local rate = tonumber(ARGV[1])
local period = 1000 / rate
local tolerance = rate * period
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
    script: redis::Script,
    local: LocalRateLimiter,
    since: Instant,
    /// Milliseconds after `since` until which checks skip Redis.
    skip_until: AtomicU64,
    /// Whether the last check reached Redis (for `/readyz` and the log's one line per change).
    shared: AtomicBool,
}

impl RedisRateLimiter {
    /// A limiter on the Redis at `url`; it connects on first use and reconnects by itself.
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            client: redis::Client::open(url)?,
            connection: OnceCell::new(),
            script: redis::Script::new(GCRA),
            local: LocalRateLimiter::default(),
            since: Instant::now(),
            skip_until: AtomicU64::new(0),
            shared: AtomicBool::new(true),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn shared_decision(
        &self,
        workspace: WorkspaceId,
        per_second: u32,
    ) -> Result<Decision, String> {
        let connect = self
            .connection
            .get_or_try_init(|| ConnectionManager::new(self.client.clone()));
        let mut connection = tokio::time::timeout(ANSWER_WITHIN, connect)
            .await
            .map_err(|_| "no connection in time".to_owned())?
            .map_err(|e| e.to_string())?
            .clone();
        let key = format!("shortlink:ratelimit:{workspace}");
        let mut invocation = self.script.key(key);
        invocation.arg(per_second);
        let run = invocation.invoke_async(&mut connection);
        let (allowed, remaining, reset_ms, retry_ms): (i64, i64, i64, i64) =
            tokio::time::timeout(ANSWER_WITHIN, run)
                .await
                .map_err(|_| "no answer in time".to_owned())?
                .map_err(|e| e.to_string())?;
        let seconds = |ms: i64| u64::try_from(ms).unwrap_or(0).div_ceil(1000);
        Ok(Decision {
            allowed: allowed == 1,
            limit: per_second,
            remaining: u32::try_from(remaining).unwrap_or(0),
            reset: seconds(reset_ms),
            retry_after: if allowed == 1 {
                0
            } else {
                seconds(retry_ms).max(1)
            },
        })
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

impl RateLimiter for RedisRateLimiter {
    fn check(&self, workspace: WorkspaceId, rate: RateLimit) -> DecisionFuture<'_> {
        Box::pin(async move {
            if self.now() >= self.skip_until.load(Ordering::Relaxed) {
                match self.shared_decision(workspace, rate.per_second()).await {
                    Ok(decision) => {
                        self.note(true, None);
                        return decision;
                    }
                    Err(why) => {
                        let until = self.now() + RETRY_AFTER.as_millis() as u64;
                        self.skip_until.store(until, Ordering::Relaxed);
                        self.note(false, Some(&why));
                    }
                }
            }
            self.local.check(workspace, rate).await
        })
    }

    fn sharing(&self) -> Option<bool> {
        Some(self.shared.load(Ordering::Relaxed))
    }
}
