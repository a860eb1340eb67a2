//! The few calls of shortlink's API the bench makes: create links (one or a bulk batch) and read
//! a link's click counter.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};

use crate::http::Connection;

/// Most links in one bulk request (the API's bound).
pub const BULK_BATCH: usize = 100;

/// One API connection, authenticated with a key.
pub struct ApiClient {
    conn: Connection,
    key: String,
}

#[derive(Serialize)]
struct CreateLink<'a> {
    destination: &'a str,
}

#[derive(Deserialize)]
struct Envelope<T> {
    data: T,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LinkOut {
    short_code: String,
    clicks: u64,
}

#[derive(Deserialize)]
struct BulkItem {
    link: Option<LinkOut>,
    error: Option<serde_json::Value>,
}

impl ApiClient {
    /// Opens a connection to the server at `addr`, to use with API key `key`.
    pub async fn open(addr: SocketAddr, key: &str) -> anyhow::Result<Self> {
        Ok(Self {
            conn: Connection::open(addr).await?,
            key: key.to_owned(),
        })
    }

    /// POSTs `body` as JSON to `path` with the key.
    async fn post(
        &mut self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let body = Bytes::from(serde_json::to_vec(body)?);
        self.conn
            .send(Method::POST, path, Some(&self.key), Some(body))
            .await
    }

    /// POST `/api/v1/links`: true when the link was created.
    pub async fn create_one(&mut self, destination: &str) -> anyhow::Result<bool> {
        let (status, _) = self
            .post("/api/v1/links", &CreateLink { destination })
            .await?;
        Ok(status == StatusCode::OK)
    }

    /// POST `/api/v1/links/bulk`: the short codes of the links created, in input order. Fails
    /// when the request or any item fails.
    pub async fn create_bulk(&mut self, destinations: &[String]) -> anyhow::Result<Vec<String>> {
        let items: Vec<CreateLink<'_>> = destinations
            .iter()
            .map(|d| CreateLink { destination: d })
            .collect();
        let (status, body) = self.post("/api/v1/links/bulk", &items).await?;
        if status != StatusCode::OK {
            bail!(
                "bulk creation answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        let Envelope { data } = serde_json::from_slice::<Envelope<Vec<BulkItem>>>(&body)
            .context("unexpected bulk response")?;
        data.into_iter()
            .map(|item| match (item.link, item.error) {
                (Some(link), _) => Ok(link.short_code),
                (None, error) => bail!("a bulk item failed: {error:?}"),
            })
            .collect()
    }

    /// POST `/api/v1/webhooks`: an endpoint at `target` for `event` (`link.created`, …).
    pub async fn create_webhook(&mut self, target: &str, event: &str) -> anyhow::Result<()> {
        let body = serde_json::json!({"targetUrl": target, "events": [event]});
        let (status, body) = self.post("/api/v1/webhooks", &body).await?;
        if status != StatusCode::OK {
            bail!(
                "webhook creation answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }

    /// PATCH `/api/v1/links/{code}` with `changes`.
    pub async fn change(&mut self, code: &str, changes: &serde_json::Value) -> anyhow::Result<()> {
        let path = format!("/api/v1/links/{code}");
        let body = Bytes::from(serde_json::to_vec(changes)?);
        let (status, body) = self
            .conn
            .send(Method::PATCH, &path, Some(&self.key), Some(body))
            .await?;
        if status != StatusCode::OK {
            bail!(
                "PATCH {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }

    /// GET `/api/v1/links/{code}`: the link's click counter.
    pub async fn clicks(&mut self, code: &str) -> anyhow::Result<u64> {
        let path = format!("/api/v1/links/{code}");
        let (status, body) = self
            .conn
            .send(Method::GET, &path, Some(&self.key), None)
            .await?;
        if status != StatusCode::OK {
            bail!("GET {path} answered {status}");
        }
        let Envelope { data } = serde_json::from_slice::<Envelope<LinkOut>>(&body)
            .with_context(|| format!("unexpected response to GET {path}"))?;
        Ok(data.clicks)
    }
}
