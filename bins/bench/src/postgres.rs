//! Throw-away PostgreSQL databases for the cases measured on PostgreSQL, on the server that
//! `TEST_POSTGRES_URL` names: each created with a unique name, dropped afterwards.

use anyhow::{Context, bail};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

/// A database created for one case ([`TempDatabase::around`]).
pub struct TempDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl TempDatabase {
    /// Runs `case` on a database created for it on the server of `admin_url`, and drops the
    /// database afterwards, whether `case` succeeded or not.
    pub async fn around<T>(
        admin_url: &str,
        case: impl AsyncFnOnce(&str) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let db = Self::create(admin_url).await?;
        let result = case(&db.url).await;
        db.drop_database().await?;
        result
    }

    /// Creates `shortlink_bench_<pid>_<millis>` on the server of `admin_url`.
    async fn create(admin_url: &str) -> anyhow::Result<Self> {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis();
        let name = format!("shortlink_bench_{}_{millis}", std::process::id());
        let url = with_database(admin_url, &name)?;
        let mut conn = connect(admin_url).await?;
        conn.batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .with_context(|| format!("could not create database {name}"))?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            name,
            url,
        })
    }

    /// Drops it, disconnecting whoever is still connected.
    async fn drop_database(self) -> anyhow::Result<()> {
        let mut conn = connect(&self.admin_url).await?;
        conn.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .await
        .with_context(|| format!("could not drop database {}", self.name))
    }
}

/// Vacuums the database at `url` and gathers the planner's statistics (`VACUUM ANALYZE`): what
/// autovacuum does for a database in service, on its own after enough writes (inserts alone
/// trigger it since PostgreSQL 13). This machine's PostgreSQL runs without autovacuum, so a
/// history written just now has no statistics, and the planner, guessing, reads a workspace's
/// whole range of events for each page of an export; nor is it vacuumed, so the first reads of
/// each event page the export makes also write its rows' visibility hints.
pub async fn vacuum_analyze(url: &str) -> anyhow::Result<()> {
    connect(url)
        .await?
        .batch_execute("VACUUM ANALYZE")
        .await
        .context("VACUUM ANALYZE failed")
}

async fn connect(url: &str) -> anyhow::Result<AsyncPgConnection> {
    AsyncPgConnection::establish(url)
        .await
        .context("could not connect to TEST_POSTGRES_URL")
}

/// `url` with its database name (the path) replaced by `name`, query string kept.
fn with_database(url: &str, name: &str) -> anyhow::Result<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("TEST_POSTGRES_URL is not a postgres:// URL");
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority = before_query
        .split_once('/')
        .map_or(before_query, |(authority, _)| authority);
    let mut out = format!("{scheme}://{authority}/{name}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_database_name() -> anyhow::Result<()> {
        let cases = [
            ("postgres://u@h:5432/postgres", "postgres://u@h:5432/x"),
            ("postgres://u:p@h", "postgres://u:p@h/x"),
            (
                "postgresql://h/db?sslmode=disable",
                "postgresql://h/x?sslmode=disable",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x")?, want);
        }
        assert!(with_database("nonsense", "x").is_err());
        Ok(())
    }
}
