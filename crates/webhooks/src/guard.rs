//! The server-side request forgery (SSRF) guard at delivery time.
//!
//! Registration already refuses targets that are IP literals or `localhost` names pointing at
//! non-public addresses, but a public-looking name can resolve to `127.0.0.1` or to a cloud
//! metadata address, today or after a DNS change. So every connection is checked again here,
//! against the addresses the name resolves to at that moment.
//!
//! Why DNS rebinding cannot slip through: the HTTP client connects to exactly the addresses this
//! resolver returns; it does not resolve the name a second time. A name that answers with a
//! public address for a check and a private one for the connection would need two lookups, and
//! there is only one.

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use shortlink_domain::is_public_ip;
use url::{Host, Url};

/// A target refused because of where it points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The name has no public address: it resolved only to non-public ones (loopback, private,
    /// link-local, …), or, with private targets refused, it did not resolve at all. The two are
    /// one answer, and which addresses is not said: the message reaches the workspace's API
    /// clients, and what the server's resolver answers for internal names (even whether it knows
    /// one) is not theirs to map.
    #[error("refused: {host} has no public address")]
    NoPublicAddress {
        /// The name that was resolved.
        host: String,
    },
    /// The URL names a non-public IP address directly.
    #[error("refused: {0} is not a public address")]
    PrivateLiteral(IpAddr),
    /// The name did not resolve to any address.
    #[error("{0} does not resolve to any address")]
    NoAddresses(String),
}

/// A [`Resolve`] implementation for reqwest that resolves with the system resolver (through
/// tokio) and keeps only public addresses, unless private targets are allowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardedResolver {
    allow_private: bool,
}

impl GuardedResolver {
    /// A resolver that drops non-public addresses; `allow_private` keeps them all (for tests and
    /// services on a private network).
    pub fn new(allow_private: bool) -> Self {
        Self { allow_private }
    }

    /// Refuses a URL whose host is a non-public IP literal. reqwest connects to IP literals
    /// without asking the resolver, so this check has to run before each request.
    pub fn check_literal(&self, url: &Url) -> Result<(), GuardError> {
        if self.allow_private {
            return Ok(());
        }
        let ip = match url.host() {
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(Host::Domain(_)) | None => return Ok(()),
        };
        if is_public_ip(ip) {
            Ok(())
        } else {
            Err(GuardError::PrivateLiteral(ip))
        }
    }

    /// Keeps the addresses a delivery may connect to, or says why there are none.
    fn filter(&self, host: &str, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, GuardError> {
        if self.allow_private {
            if resolved.is_empty() {
                return Err(GuardError::NoAddresses(host.to_owned()));
            }
            return Ok(resolved);
        }
        let public: Vec<_> = resolved
            .into_iter()
            .filter(|a| is_public_ip(a.ip()))
            .collect();
        if public.is_empty() {
            return Err(GuardError::NoPublicAddress {
                host: host.to_owned(),
            });
        }
        Ok(public)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = *self;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest replaces it with the URL's port or the scheme's default.
            let resolved: Vec<SocketAddr> = match tokio::net::lookup_host((host.as_str(), 0)).await
            {
                Ok(addrs) => addrs.collect(),
                // Said as a name with only private addresses is: otherwise the two answers tell
                // which internal names the server's resolver knows.
                Err(_) if !guard.allow_private => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            let kept = guard
                .filter(&host, resolved)
                .map_err(|e| -> Box<dyn StdError + Send + Sync> { Box::new(e) })?;
            let addrs: Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 0)
    }

    #[test]
    fn keeps_only_public_addresses() {
        let guard = GuardedResolver::new(false);
        let kept = guard
            .filter(
                "mixed.example",
                vec![addr("10.0.0.1"), addr("93.184.215.14"), addr("::1")],
            )
            .unwrap();
        assert_eq!(kept, vec![addr("93.184.215.14")]);
    }

    #[test]
    fn refuses_names_with_only_private_addresses() {
        let guard = GuardedResolver::new(false);
        let err = guard
            .filter(
                "rebind.example",
                vec![addr("127.0.0.1"), addr("169.254.169.254")],
            )
            .unwrap_err();
        assert_eq!(
            err,
            GuardError::NoPublicAddress {
                host: "rebind.example".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "refused: rebind.example has no public address"
        );
    }

    #[test]
    fn allow_private_keeps_everything() {
        let guard = GuardedResolver::new(true);
        let all = vec![addr("127.0.0.1"), addr("10.1.2.3")];
        assert_eq!(guard.filter("intranet", all.clone()).unwrap(), all);
    }

    #[test]
    fn an_empty_answer_is_an_error() {
        assert_eq!(
            GuardedResolver::new(true).filter("void.example", vec![]),
            Err(GuardError::NoAddresses("void.example".into()))
        );
        // With private targets refused, as a name with only private addresses is.
        assert_eq!(
            GuardedResolver::new(false).filter("void.example", vec![]),
            Err(GuardError::NoPublicAddress {
                host: "void.example".into()
            })
        );
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_refused_as_a_private_one_is() {
        let refused = |name: &'static str| async move {
            match GuardedResolver::new(false)
                .resolve(name.parse().unwrap())
                .await
            {
                Ok(addrs) => panic!("{name} resolved to {:?}", addrs.collect::<Vec<_>>()),
                Err(e) => e.to_string(),
            }
        };
        assert_eq!(
            refused("no-such-name.invalid").await,
            "refused: no-such-name.invalid has no public address"
        );
        assert_eq!(
            refused("localhost").await,
            "refused: localhost has no public address"
        );
    }

    #[test]
    fn checks_ip_literals() {
        let guard = GuardedResolver::new(false);
        let check = |u: &str| guard.check_literal(&Url::parse(u).unwrap());
        assert_eq!(
            check("http://127.0.0.1:8080/hook"),
            Err(GuardError::PrivateLiteral("127.0.0.1".parse().unwrap()))
        );
        assert_eq!(
            check("http://[::ffff:10.0.0.1]/"),
            Err(GuardError::PrivateLiteral(
                "::ffff:10.0.0.1".parse().unwrap()
            ))
        );
        assert_eq!(check("https://93.184.215.14/"), Ok(()));
        assert_eq!(check("https://example.com/"), Ok(()));
        let open = GuardedResolver::new(true);
        assert_eq!(
            open.check_literal(&Url::parse("http://127.0.0.1/").unwrap()),
            Ok(())
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_localhost() {
        let err = match GuardedResolver::new(false)
            .resolve("localhost".parse().unwrap())
            .await
        {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e,
        };
        assert!(
            matches!(
                err.downcast_ref::<GuardError>(),
                Some(GuardError::NoPublicAddress { host, .. }) if host == "localhost"
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_resolver_keeps_localhost_when_private_targets_are_allowed() {
        let addrs: Vec<_> = GuardedResolver::new(true)
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        assert!(!addrs.is_empty());
    }
}
