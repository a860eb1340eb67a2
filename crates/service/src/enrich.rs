//! Turning what the redirect saw of a click ([`Visit`]) into what the click's events say of
//! it ([`ClickInfo`] and a visitor hash): GeoIP, User-Agent families, referrer host, daily
//! visitor hash. Runs in the flusher, off the request path.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use shortlink_analytics::{GeoIp, UserAgents, VisitorKey, referrer};
use shortlink_domain::{ClickInfo, TargetOs, Visit};
use shortlink_storage::{ClickEvent, StorageError, Store};

/// What enriching needs: the GeoIP database (optional), the User-Agent parser and its cache,
/// and the visitor key (read from the database once).
pub(crate) struct Enricher {
    geoip: Option<Arc<GeoIp>>,
    agents: UserAgents,
    key: OnceLock<VisitorKey>,
}

impl Enricher {
    pub fn new(geoip: Option<Arc<GeoIp>>) -> Self {
        Self {
            geoip,
            agents: UserAgents::default(),
            key: OnceLock::new(),
        }
    }

    /// Reads the visitor key's secret from the database, once.
    pub async fn ready(&self, store: &Store) -> Result<(), StorageError> {
        if self.key.get().is_none() {
            let secret = store.analytics_secret().await?;
            let _ = self.key.set(VisitorKey::new(secret.into_bytes()));
        }
        Ok(())
    }

    /// The system of the visitor with `agent`, where a link can send it elsewhere.
    pub fn target_os(&self, agent: Option<&str>) -> Option<TargetOs> {
        match self.agents.parse(agent).os? {
            "iOS" => Some(TargetOs::Ios),
            "Android" => Some(TargetOs::Android),
            _ => None,
        }
    }

    /// The country of `address`, when there is a GeoIP database and it knows.
    pub fn country(&self, address: IpAddr) -> Option<String> {
        self.geoip.as_ref()?.locate(address).country
    }

    /// The events of one visit. [`Enricher::ready`] must have succeeded.
    pub fn event(&self, visit: &Visit) -> ClickEvent {
        let agent = self.agents.parse(visit.user_agent.as_deref());
        let place = match (&self.geoip, visit.address) {
            (Some(geoip), Some(address)) => geoip.locate(address),
            _ => Default::default(),
        };
        let referrer = referrer(visit.referrer.as_deref());
        let visitor = match self.key.get() {
            Some(key) => key.visitor(
                visit.timestamp.unix_millis(),
                visit.address,
                visit.user_agent.as_deref().unwrap_or_default(),
            ),
            None => 0,
        };
        ClickEvent {
            click: ClickInfo {
                timestamp: visit.timestamp,
                country: place.country,
                city: place.city,
                device: agent.device.as_str().to_owned(),
                browser: agent.browser.map(str::to_owned),
                os: agent.os.map(str::to_owned),
                referrer: referrer.host,
                referrer_url: referrer.url,
                user_agent: visit.user_agent.clone(),
            },
            visitor,
        }
    }
}
