//! The few calls of shortlink's API the bench makes: create links (one or a bulk batch), read
//! a link's click counter, ask the analytics and read an export.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::http::{Connection, REQUEST_TIMEOUT};

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

/// The clicks of an analytics answer: `groupBy=count`'s totals, a time series' bucket, a
/// breakdown's group (their other fields are not needed here).
#[derive(Deserialize)]
pub struct Counted {
    /// Clicks counted.
    pub clicks: u64,
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
        let link: LinkOut = self
            .get_data(&format!("/api/v1/links/{code}"), REQUEST_TIMEOUT)
            .await?;
        Ok(link.clicks)
    }

    /// GET `/api/v1/analytics?{query}`, waiting up to `timeout` (a query over millions of events
    /// may be slow): the answer's `data`.
    pub async fn analytics<T: DeserializeOwned>(
        &mut self,
        query: &str,
        timeout: Duration,
    ) -> anyhow::Result<T> {
        self.get_data(&format!("/api/v1/analytics?{query}"), timeout)
            .await
    }

    /// GET `/api/v1/analytics/export?{query}`: the body as it is streamed, to be read by the
    /// caller. Fails on an answer other than 200.
    pub async fn export(&mut self, query: &str) -> anyhow::Result<Incoming> {
        let path = format!("/api/v1/analytics/export?{query}");
        let (status, body) = self.conn.get_streamed(&path, Some(&self.key)).await?;
        if status != StatusCode::OK {
            bail!("GET {path} answered {status}");
        }
        Ok(body)
    }

    /// GETs `path` with the key, waiting up to `timeout`, and returns the envelope's `data`.
    /// Fails on an answer other than 200, naming its status and body.
    async fn get_data<T: DeserializeOwned>(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> anyhow::Result<T> {
        let (status, body) = self
            .conn
            .get_within(path, Some(&self.key), timeout)
            .await
            .with_context(|| format!("GET {path}"))?;
        if status != StatusCode::OK {
            bail!(
                "GET {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        let Envelope { data } = serde_json::from_slice::<Envelope<T>>(&body)
            .with_context(|| format!("unexpected response to GET {path}"))?;
        Ok(data)
    }
}
