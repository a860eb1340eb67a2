//! Fresh, isolated databases for tests: a temporary SQLite file, and a new PostgreSQL database
//! on the server `TEST_POSTGRES_URL` names. Each is removed when dropped, so tests run in
//! parallel and leave nothing behind.

pub mod fault_proxy;

use std::io::Write;
use std::path::PathBuf;

use crate::Store;
use crate::model::{DatabaseKind, PoolOptions};

/// The variable that names the PostgreSQL server tests may create databases on.
pub const TEST_POSTGRES_URL: &str = "TEST_POSTGRES_URL";

/// On SQLite, the recent links whose codes a creation folds into the code index.
pub const CODE_FOLD_AT: usize = crate::sqlite::CODE_FOLD_AT;

/// A database that exists for one test.
#[derive(Debug)]
pub struct TestDatabase {
    /// Its URL, for `Store::connect` or the server's `--database-url`.
    pub url: String,
    /// Which backend it is.
    pub kind: DatabaseKind,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    Files(PathBuf),
    Database {
        admin_url: String,
        name: String,
    },
    /// Another handle owns the database.
    Nothing,
}

impl TestDatabase {
    /// Another handle on the same database, which removes nothing when dropped (the first one
    /// does): for a second server on it.
    pub fn shared(&self) -> Self {
        Self {
            url: self.url.clone(),
            kind: self.kind,
            cleanup: Cleanup::Nothing,
        }
    }

    /// A new SQLite file in the temporary directory.
    pub fn sqlite() -> Self {
        let path = std::env::temp_dir().join(format!(
            "shortlink-test-{}.db",
            ulid::Ulid::new().to_string().to_lowercase()
        ));
        Self {
            url: format!("sqlite://{}", path.display()),
            kind: DatabaseKind::Sqlite,
            cleanup: Cleanup::Files(path),
        }
    }

    /// A new database on `TEST_POSTGRES_URL`, or `None` (after saying so on the terminal, by
    /// test name) when the variable is not set. Panics when it is set but the server cannot be
    /// reached: CI sets it, and there an unreachable server must fail the run, not skip.
    pub async fn postgres(test: &str) -> Option<Self> {
        Self::postgres_with(test, "").await
    }

    /// [`TestDatabase::postgres`], created with `options` after `CREATE DATABASE name` (a
    /// collation, say).
    pub async fn postgres_with(test: &str, options: &str) -> Option<Self> {
        let Ok(admin_url) = std::env::var(TEST_POSTGRES_URL) else {
            // Written to the process's stderr directly, past the test harness's capture, so a
            // skip is never silent.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED on PostgreSQL ({TEST_POSTGRES_URL} unset): {test}"
            );
            return None;
        };
        let name = format!(
            "shortlink_test_{}",
            ulid::Ulid::new().to_string().to_lowercase()
        );
        admin(&admin_url, &format!("CREATE DATABASE {name} {options}")).await;
        let url = with_database(&admin_url, &name);
        Some(Self {
            url,
            kind: DatabaseKind::Postgres,
            cleanup: Cleanup::Database { admin_url, name },
        })
    }

    /// SQLite always, and PostgreSQL when configured: what a storage test runs against.
    pub async fn all(test: &str) -> Vec<Self> {
        let mut dbs = vec![Self::sqlite()];
        dbs.extend(Self::postgres(test).await);
        dbs
    }

    /// Runs SQL statements on the database on a connection of their own, as another program
    /// would (to damage or change it under a running server).
    pub async fn execute(&self, sql: &str) {
        match self.kind {
            DatabaseKind::Postgres => admin(&self.url, sql).await,
            DatabaseKind::Sqlite => {
                use diesel::Connection;
                use diesel::connection::SimpleConnection;
                let (path, sql) = (
                    self.url.trim_start_matches("sqlite://").to_owned(),
                    sql.to_owned(),
                );
                tokio::task::spawn_blocking(move || {
                    let mut conn = diesel::SqliteConnection::establish(&path)
                        .unwrap_or_else(|e| panic!("cannot open the test database: {e}"));
                    // The server may be writing: wait for its lock as the server itself would.
                    conn.batch_execute("PRAGMA busy_timeout = 5000")
                        .unwrap_or_else(|e| panic!("cannot set a busy timeout: {e}"));
                    conn.batch_execute(&sql)
                        .unwrap_or_else(|e| panic!("`{sql}` failed: {e}"));
                })
                .await
                .expect("the statement's task ran");
            }
        }
    }

    /// A migrated [`Store`] on this database, with a small pool.
    pub async fn store(&self) -> Store {
        let store = Store::connect(&self.url, PoolOptions { max_connections: 4 })
            .expect("test database URL is valid");
        store
            .migrate()
            .await
            .expect("migrations apply to a fresh test database");
        store
    }
}

fn with_database(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (admin_url, String::new()),
    };
    let server = match base.rsplit_once('/') {
        Some((server, _db)) if server.contains("//") && !server.ends_with('/') => server,
        _ => base.trim_end_matches('/'),
    };
    format!("{server}/{name}{query}")
}

async fn admin(admin_url: &str, sql: &str) {
    use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
    let mut conn = AsyncPgConnection::establish(admin_url)
        .await
        .unwrap_or_else(|e| {
            panic!("{TEST_POSTGRES_URL} is set but PostgreSQL is unreachable: {e}")
        });
    conn.batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("`{sql}` failed: {e}"));
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Files(path) => {
                for suffix in ["", "-wal", "-shm", ".lock"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(p);
                }
            }
            Cleanup::Nothing => {}
            Cleanup::Database { admin_url, name } => {
                let (admin_url, sql) = (
                    admin_url.clone(),
                    format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
                );
                // Drop cannot await, and may run inside a runtime: use a thread with its own.
                let _ = std::thread::spawn(move || {
                    if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        rt.block_on(admin(&admin_url, &sql));
                    }
                })
                .join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_only_the_database_name() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@h/db?sslmode=disable", "t1"),
            "postgres://u@h/t1?sslmode=disable"
        );
    }
}
