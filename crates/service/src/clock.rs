//! [`Clock`]: what time it is for the rules that depend on it (a link's expiry). The system's
//! clock, except in tests, which move time on instead of sleeping.

use std::sync::Arc;

use shortlink_domain::Timestamp;

/// A source of the current time. Cheap to clone.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self(Arc::new(Timestamp::now))
    }

    /// A clock that reads `now` (a test's, which it moves on at will).
    pub fn from_fn(now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now())
    }
}
