//! A minimal HTTP/1.1 client connection on hyper: one TCP connection, kept alive, one request at
//! a time, redirects never followed. The load generator opens one per simulated client.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// A request that takes longer than this fails instead of stalling the run.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Browser-like, so that shortlink counts the redirect as a click (bots are not counted).
pub const USER_AGENT: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120 Safari/537.36";

/// One keep-alive connection to a server on this machine.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    driver: JoinHandle<()>,
}

impl Connection {
    /// Connects to `addr` (a loopback address) and completes the HTTP/1 handshake.
    pub async fn open(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connecting to {addr} timed out"))?
            .with_context(|| format!("could not connect to {addr}"))?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            // The connection ends when the sender is dropped or the server closes it; either
            // way the next `send` reports it.
            let _ = conn.await;
        });
        Ok(Self {
            sender,
            host: HeaderValue::from_str(&addr.to_string())?,
            driver,
        })
    }

    /// Sends one request and reads the whole response body.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        json: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let (status, _, body) = self.exchange(method, path, bearer, json).await?;
        Ok((status, body))
    }

    /// GETs `path` (a short code) and returns the status and the `Location` header, if any.
    pub async fn redirect(&mut self, path: &str) -> anyhow::Result<(StatusCode, Option<String>)> {
        let (status, headers, _) = self.exchange(Method::GET, path, None, None).await?;
        let location = headers
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        Ok((status, location))
    }

    /// Sends one request and reads the whole response.
    async fn exchange(
        &mut self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        json: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, HeaderMap, Bytes)> {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.host.clone())
            .header(header::USER_AGENT, USER_AGENT);
        if let Some(key) = bearer {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let body = match json {
            Some(json) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                json
            }
            None => Bytes::new(),
        };
        let request = builder.body(Full::new(body))?;
        tokio::time::timeout(REQUEST_TIMEOUT, self.round_trip(request))
            .await
            .context("request timed out")?
    }

    async fn round_trip(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<(StatusCode, HeaderMap, Bytes)> {
        self.sender.ready().await?;
        let (parts, body) = self.sender.send_request(request).await?.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok((parts.status, parts.headers, body))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
