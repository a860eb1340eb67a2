//! Workspaces: the tenants. Keys, links and webhooks belong to exactly one.

use crate::{Timestamp, WorkspaceId};

/// The plan rate when none is given: 100 requests per second.
pub const DEFAULT_RATE_LIMIT: u32 = 100;
const MAX_RATE_LIMIT: u32 = 1_000_000;

/// A rate outside 1..=1,000,000 requests per second.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate limit must be between 1 and {MAX_RATE_LIMIT} requests per second")]
pub struct RateLimitError;

/// A workspace plan's request rate, in requests per second (also the burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit(u32);

impl RateLimit {
    /// Validates a requests-per-second figure.
    pub fn new(per_second: u32) -> Result<Self, RateLimitError> {
        if (1..=MAX_RATE_LIMIT).contains(&per_second) {
            Ok(Self(per_second))
        } else {
            Err(RateLimitError)
        }
    }

    /// Requests per second.
    pub fn per_second(self) -> u32 {
        self.0
    }
}

impl Default for RateLimit {
    fn default() -> Self {
        Self(DEFAULT_RATE_LIMIT)
    }
}

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `ws_<ulid>`.
    pub id: WorkspaceId,
    /// Unique human name, used by the CLI.
    pub name: String,
    /// The plan's request rate.
    pub rate_limit: RateLimit,
    /// When it was created.
    pub created_at: Timestamp,
}

impl Workspace {
    /// A new workspace, not yet stored (the store checks its name with
    /// [`Workspace::validate_name`]).
    pub fn new(name: impl Into<String>, rate_limit: RateLimit) -> Workspace {
        Workspace {
            id: WorkspaceId::generate(),
            name: name.into(),
            rate_limit,
            created_at: Timestamp::now(),
        }
    }

    /// Checks a workspace name: 1 to 64 characters of `[A-Za-z0-9_.-]`, not shaped like an id
    /// (the CLI accepts either a name or an id, so the two must never be confused).
    pub fn validate_name(name: &str) -> Result<(), &'static str> {
        if name.is_empty() || name.len() > 64 {
            return Err("workspace name must be 1 to 64 characters");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            return Err("workspace name may contain only letters, digits, '.', '-' and '_'");
        }
        if name.starts_with(WorkspaceId::PREFIX) {
            return Err("workspace name must not start with 'ws_'");
        }
        Ok(())
    }
}
