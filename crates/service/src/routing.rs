//! Where the redirect of a link with rules (expiry, click limit, password, preview, targeting)
//! sends one visitor: [`Service::route`], and [`Service::unlock`] for its password. A plain link
//! needs none of this: its redirect follows the destination.

use std::net::IpAddr;

use shortlink_domain::{Destination, Password, RedirectRules, RedirectType};
use shortlink_storage::RedirectTarget;

use crate::{Service, ServiceError, passwords};

/// What the redirect knows of the visitor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Visitor<'a> {
    /// The `User-Agent` header.
    pub user_agent: Option<&'a str>,
    /// The client address (behind trusted proxies).
    pub address: Option<IpAddr>,
    /// A known bot or link-preview crawler.
    pub crawler: bool,
    /// Whether this visit counts as a click (a browser's GET).
    pub counts: bool,
    /// Whether the visitor gave the link's password with this request.
    pub unlocked: bool,
}

/// How the redirect answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The link is expired (by time or by clicks): to the link's `expiredUrl`, or the 410 page.
    Expired(Option<Destination>),
    /// The password form.
    Password,
    /// The link preview page, for a crawler.
    Preview,
    /// The redirect.
    Redirect {
        /// Where to, for this visitor.
        to: Destination,
        /// With which status.
        status: RedirectType,
        /// Whether the caller records the visit as a click (its place under `maxClicks` is
        /// taken already).
        counted: bool,
    },
}

/// What became of a password attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlock {
    /// Right: the redirect follows.
    Right,
    /// Wrong; counted against the link's and the address's budgets.
    Wrong,
    /// A budget is spent: not even checked. Try again after this long.
    TooMany(std::time::Duration),
    /// The link is expired: it asks for no password (the redirect answers its expiry).
    Expired,
}

impl Service {
    /// Where the redirect of `link` (whose rules are `rules`) sends `visitor`. Expiry comes
    /// first (by time, then by clicks), then the password, then a crawler's preview; a counted
    /// visit then takes its place under the click limit; then targeting: the visitor's system,
    /// else their country.
    pub async fn route(
        &self,
        link: &RedirectTarget,
        rules: &RedirectRules,
        visitor: &Visitor<'_>,
    ) -> Result<Route, ServiceError> {
        let expired = || Ok(Route::Expired(rules.expired_url.clone()));
        if self.expired(link, rules).await? {
            return expired();
        }
        if rules.password.is_some() && !visitor.unlocked {
            return Ok(Route::Password);
        }
        if visitor.crawler && rules.preview.is_set() {
            return Ok(Route::Preview);
        }
        if let Some(max) = rules.max_clicks.map(|m| m.get())
            && visitor.counts
            && !self
                .click_counter()
                .clicks_left(self.click_context(), link, max, true)
                .await?
        {
            return expired();
        }
        let enricher = self.enricher();
        let os = match rules.targets_devices() {
            true => enricher.target_os(visitor.user_agent),
            false => None,
        };
        let country = match (rules.targets_countries(), visitor.address) {
            (true, Some(address)) => enricher.country(address),
            _ => None,
        };
        Ok(Route::Redirect {
            to: (rules.destination_for(&link.destination, os, country.as_deref())).clone(),
            status: rules.redirect_type,
            counted: visitor.counts,
        })
    }

    /// Whether `link` is expired, by time or by its clicks (without taking a click's place).
    async fn expired(
        &self,
        link: &RedirectTarget,
        rules: &RedirectRules,
    ) -> Result<bool, ServiceError> {
        if rules.expired_at(self.now()) {
            return Ok(true);
        }
        let Some(max) = rules.max_clicks.map(|m| m.get()) else {
            return Ok(false);
        };
        let left = self
            .click_counter()
            .clicks_left(self.click_context(), link, max, false)
            .await?;
        Ok(!left)
    }

    /// Checks a password given for `link` by a client at `address`, within the budgets of
    /// wrong attempts (see [`crate::ATTEMPTS_PER_ADDRESS`]); hashing runs off the async workers.
    /// An expired link checks nothing: its password would open nothing.
    pub async fn unlock(
        &self,
        link: &RedirectTarget,
        rules: &RedirectRules,
        address: Option<IpAddr>,
        attempt: String,
    ) -> Result<Unlock, ServiceError> {
        let Some(hash) = rules.password.clone() else {
            return Ok(Unlock::Right);
        };
        if self.expired(link, rules).await? {
            return Ok(Unlock::Expired);
        }
        let attempts = self.wrong_attempts();
        let check = match attempts.take(link.counter, address).await {
            Ok(check) => check,
            Err(wait) => return Ok(Unlock::TooMany(wait)),
        };
        let right = passwords::verify(hash, attempt).await;
        check.settle(right);
        Ok(if right { Unlock::Right } else { Unlock::Wrong })
    }

    /// Hashes a link's password for storage (Argon2id, off the async workers).
    pub async fn hash_password(
        &self,
        password: Password,
    ) -> Result<shortlink_domain::PasswordHash, ServiceError> {
        passwords::hash(password).await
    }

    /// `text` (a request's fingerprint that may hold a password) made as slow to guess as a
    /// stored password (Argon2id, off the async workers), with `salt`: the same text and salt
    /// give the same bytes.
    pub async fn stretch(&self, text: Vec<u8>, salt: [u8; 16]) -> Result<[u8; 32], ServiceError> {
        passwords::stretch(text, salt).await
    }
}
