//! The storage error type, [`StorageError`], returned by every fallible call of the crate. A
//! caller tells three kinds apart: a conflict it can report to a client
//! ([`StorageError::AlreadyExists`], [`StorageError::ClaimLost`]), a passing unavailability that the same call may get past
//! later ([`StorageError::is_unavailable`]), and everything else, which no retry mends (a bug,
//! a malformed database, a bad configuration).

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// What went wrong in storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A unique value (workspace name) is taken.
    #[error("{0} already exists")]
    AlreadyExists(&'static str),
    /// The database could not be reached, a connection broke, a lock or pool wait timed out,
    /// or another server holds the SQLite file (its lock is taken until that server stops): the
    /// same call may succeed later.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A query failed for another reason.
    #[error("database error: {0}")]
    Query(DieselError),
    /// What the database holds breaks this crate's rules: a stored value that does not parse (the
    /// database was written by something else), a click journal row that does not decode, or no
    /// free generated short code after every retry.
    #[error("stored data is malformed: {0}")]
    Corrupt(&'static str),
    /// A call broke the API's contract (a bug in the caller, or a name the domain's rules
    /// refuse, in the rule's words), and nothing was written.
    #[error("invalid call: {0}")]
    Invalid(&'static str),
    /// A creation's idempotency claim was taken over by another request (it ran past
    /// [`crate::ABANDONED_CLAIM`]): the creation is not written, so the key's request creates
    /// once.
    #[error("the idempotency key's claim was taken over by another request")]
    ClaimLost,
    /// The database URL is not one this crate speaks.
    #[error("unsupported database URL '{0}': use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    /// The database URL names an in-memory SQLite database, in any of its spellings, or a
    /// temporary one (a `file:` URI with no path): a store holds several connections, and each
    /// would open a database of its own, gone when it closes.
    #[error(
        "an in-memory or temporary SQLite database ('{0}') is not supported: each connection \
         would see a database of its own; give a file path (sqlite://PATH)"
    )]
    InMemory(String),
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
/// connection or statement timeout under this kind: all pass by themselves. So does a full disk,
/// once space is made (SQLite's `SQLITE_FULL`; PostgreSQL's "could not extend file … No space
/// left on device"): the write is refused whole, and the same call succeeds then. And so does a
/// missing table, the schema of a database recreated empty under a running server (`/readyz`
/// says so too): it passes once the database is migrated again.
fn is_connection_failure(message: &str) -> bool {
    const PASSING: [&str; 7] = [
        "database is locked",
        "connection closed",
        "terminating connection",
        "canceling statement due to statement timeout",
        "the database system is",
        "database or disk is full",
        "No space left on device",
    ];
    PASSING.iter().any(|p| message.contains(p)) || is_missing_table(message)
}

/// PostgreSQL's `relation "links" does not exist`, SQLite's `no such table: links`.
fn is_missing_table(message: &str) -> bool {
    message.starts_with("no such table: ")
        || (message.starts_with("relation \"") && message.ends_with("\" does not exist"))
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for StorageError {
    fn from(e: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        StorageError::Unavailable(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passing_failures_are_unavailability_and_the_rest_are_not() {
        let error = |message: &str| {
            let info = Box::new(message.to_owned());
            StorageError::from(DieselError::DatabaseError(DatabaseErrorKind::Unknown, info))
        };
        for passing in [
            "database is locked",
            "database or disk is full",
            "could not extend file \"base/16384/16385\": No space left on device",
            "no such table: links",
            "relation \"links\" does not exist",
        ] {
            assert!(error(passing).is_unavailable(), "{passing}");
        }
        for bug in [
            "column \"nme\" does not exist",
            "no such column: nme",
            "near \"SELCT\": syntax error",
        ] {
            assert!(!error(bug).is_unavailable(), "{bug}");
        }
    }
}
