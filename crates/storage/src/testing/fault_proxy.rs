//! A TCP proxy under a test's control, put between a server and its database to make the
//! network fail the ways real ones do: freeze (connections stay open and nothing passes, as when
//! a link or a firewall drops packets), refuse new connections, or reset every connection.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwards everything.
    None,
    /// Forwards nothing, in either direction, and accepts new connections without forwarding
    /// them: every connection hangs, none is closed.
    Freeze,
    /// Closes new connections at once; existing ones keep working.
    Refuse,
    /// Closes every connection, new and existing.
    Reset,
}

/// A running proxy; it stops when dropped.
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    fault: Arc<watch::Sender<Fault>>,
    accept: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy to `upstream`, forwarding.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the proxy binds a port");
        let addr = listener.local_addr().expect("the proxy has an address");
        let (fault, _) = watch::channel(Fault::None);
        let fault = Arc::new(fault);
        let accept = tokio::spawn({
            let fault = fault.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let mode = fault.subscribe();
                    tokio::spawn(async move {
                        if matches!(*mode.borrow(), Fault::Refuse | Fault::Reset) {
                            return;
                        }
                        let Ok(server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::join!(
                            pump(client_read, server_write, mode.clone()),
                            pump(server_read, client_write, mode),
                        );
                    });
                }
            }
        });
        Self {
            addr,
            fault,
            accept,
        }
    }

    /// A proxy for the server a PostgreSQL URL names, and that URL pointed at the proxy.
    pub async fn for_postgres(url: &str) -> (Self, String) {
        let rest = url
            .split_once("://")
            .map(|(_, rest)| rest)
            .expect("a postgres:// URL");
        let (auth, host_and_path) = rest.rsplit_once('@').unwrap_or(("", rest));
        let (host_port, path) = host_and_path.split_once('/').unwrap_or((host_and_path, ""));
        let host_port = if host_port.contains(':') {
            host_port.to_owned()
        } else {
            format!("{host_port}:5432")
        };
        let upstream = tokio::net::lookup_host(&host_port)
            .await
            .expect("the database's host resolves")
            .next()
            .expect("the database's host has an address");
        let proxy = Self::start(upstream).await;
        let at = if auth.is_empty() {
            String::new()
        } else {
            format!("{auth}@")
        };
        let url = format!("postgres://{at}{}/{path}", proxy.addr);
        (proxy, url)
    }

    /// Sets what happens to traffic from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.fault.send_replace(Fault::Reset);
    }
}

/// Copies one direction while the fault allows: holds whatever it read while frozen, and drops
/// both halves on a reset.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut fault: watch::Receiver<Fault>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !flowing(&mut fault).await {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = fault.changed() => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if !flowing(&mut fault).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits while frozen; false once the connection is to be reset.
async fn flowing(fault: &mut watch::Receiver<Fault>) -> bool {
    match fault.wait_for(|f| *f != Fault::Freeze).await {
        Ok(f) => *f != Fault::Reset,
        Err(_) => false,
    }
}
