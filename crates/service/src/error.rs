//! The service's error type. Which to use where: every fallible call of [`crate::Service`]
//! returns [`ServiceError`]; storage errors become its `Storage` variant, and a server maps it
//! (in `shortlink-http`, in the one table of its `ApiError`) to what a client sees.

use std::sync::Arc;

use shortlink_storage::StorageError;

/// What went wrong in a use case.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Storage failed: unavailable for now ([`ServiceError::is_unavailable`]), or a bug or a
    /// malformed database. Shared, because one failed group commit answers every request of its
    /// group.
    #[error(transparent)]
    Storage(Arc<StorageError>),
    /// The service's link writer has stopped: the runtime that started it is shutting down.
    #[error("the link writer stopped")]
    Stopped,
    /// A time series cannot be bucketed: too many buckets, or a range the calendar does not
    /// handle ([`crate::Service::time_series`]).
    #[error(transparent)]
    Buckets(#[from] shortlink_analytics::BucketError),
    /// [`crate::Service::new`] was called outside a tokio runtime, which its link writer runs
    /// on.
    #[error("the service must be built within a tokio runtime")]
    NoRuntime,
    /// [`crate::Service::run`] was called while it already runs, or after it ran.
    #[error("the service's background tasks run once")]
    AlreadyRunning,
    /// The webhook delivery worker could not be made: its HTTP client, or its settings.
    #[error(transparent)]
    Webhooks(#[from] shortlink_webhooks::WorkerError),
    /// Some clicks could not be written before the service stopped (the database stayed
    /// unavailable for the whole drain timeout); they are lost.
    #[error("some clicks could not be written before stopping")]
    ClicksNotWritten,
    /// Work handed to a thread of its own failed (a bug): hashing a password.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    /// Whether this is a passing unavailability of the database rather than a bug.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ServiceError::Storage(e) if e.is_unavailable())
    }
}

impl From<StorageError> for ServiceError {
    fn from(e: StorageError) -> Self {
        ServiceError::Storage(Arc::new(e))
    }
}
