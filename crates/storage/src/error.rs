//! The storage error type. Callers see three things: a conflict they can report to a client,
//! an unavailable database (503, retried later), or anything else (a bug: 500).

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// What went wrong in storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A unique value (workspace name) is taken.
    #[error("{0} already exists")]
    AlreadyExists(&'static str),
    /// The database could not be reached, or a connection broke; the same call may succeed later.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A query failed for another reason.
    #[error("database error: {0}")]
    Query(DieselError),
    /// A stored value did not parse: the database was written by something else.
    #[error("stored data is malformed: {0}")]
    Corrupt(&'static str),
    /// The database URL is not one this crate speaks.
    #[error("unsupported database URL '{0}': use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    /// Running migrations failed.
    #[error("migrations failed: {0}")]
    Migration(String),
}

impl StorageError {
    /// Whether this is a passing unavailability rather than a bug.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StorageError::Unavailable(_))
    }
}

impl From<DieselError> for StorageError {
    fn from(e: DieselError) -> Self {
        match &e {
            DieselError::DatabaseError(DatabaseErrorKind::ClosedConnection, _)
            | DieselError::BrokenTransactionManager => StorageError::Unavailable(e.to_string()),
            DieselError::DatabaseError(DatabaseErrorKind::Unknown, info)
                if is_connection_failure(info.message()) =>
            {
                StorageError::Unavailable(e.to_string())
            }
            _ => StorageError::Query(e),
        }
    }
}

/// SQLite reports a locked database after its busy timeout, PostgreSQL a terminated
/// connection or statement timeout under this kind: all pass by themselves.
fn is_connection_failure(message: &str) -> bool {
    const PASSING: [&str; 5] = [
        "database is locked",
        "connection closed",
        "terminating connection",
        "canceling statement due to statement timeout",
        "the database system is",
    ];
    PASSING.iter().any(|p| message.contains(p))
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for StorageError {
    fn from(e: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        StorageError::Unavailable(e.to_string())
    }
}
