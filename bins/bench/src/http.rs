//! A minimal HTTP/1.1 client connection on hyper: one TCP connection, kept alive, one request at
//! a time, redirects never followed. The load generator opens one per simulated client.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
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
        let (status, _, body) = self
            .exchange(method, path, bearer, json, REQUEST_TIMEOUT)
            .await?;
        Ok((status, body))
    }

    /// GETs `path` and reads the whole response body, waiting up to `timeout` instead of
    /// [`REQUEST_TIMEOUT`]: for answers that are slow on purpose of the case (an analytics query
    /// over millions of events).
    pub async fn get_within(
        &mut self,
        path: &str,
        bearer: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let (status, _, body) = self
            .exchange(Method::GET, path, bearer, None, timeout)
            .await?;
        Ok((status, body))
    }

    /// GETs `path` and returns the status and the body as it arrives, for the caller to read
    /// frame by frame: an answer streamed for longer than one request may take (an export of a
    /// million rows), and larger than worth holding. Only the head must come within
    /// [`REQUEST_TIMEOUT`].
    pub async fn get_streamed(
        &mut self,
        path: &str,
        bearer: Option<&str>,
    ) -> anyhow::Result<(StatusCode, Incoming)> {
        let request = self.request(Method::GET, path, bearer, None)?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.head(request))
            .await
            .context("request timed out")??;
        Ok((response.status(), response.into_body()))
    }

    /// GETs `path` (a short code) and returns the status and the `Location` header, if any.
    pub async fn redirect(&mut self, path: &str) -> anyhow::Result<(StatusCode, Option<String>)> {
        let (status, headers, _) = self
            .exchange(Method::GET, path, None, None, REQUEST_TIMEOUT)
            .await?;
        let location = headers
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        Ok((status, location))
    }

    /// Sends one request and reads the whole response, within `timeout`.
    async fn exchange(
        &mut self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        json: Option<Bytes>,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, HeaderMap, Bytes)> {
        let request = self.request(method, path, bearer, json)?;
        tokio::time::timeout(timeout, async {
            let (parts, body) = self.head(request).await?.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok((parts.status, parts.headers, body))
        })
        .await
        .context("request timed out")?
    }

    /// One request to this connection's server.
    fn request(
        &self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        json: Option<Bytes>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
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
        Ok(builder.body(Full::new(body))?)
    }

    /// Sends `request` and waits for the response's head; its body is the caller's to read.
    async fn head(&mut self, request: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        self.sender.ready().await?;
        Ok(self.sender.send_request(request).await?)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
