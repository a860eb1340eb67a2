//! What a click says about its visitor, worked out from the request without storing it: the
//! client address behind trusted proxies ([`TrustedProxies`]), its country and city
//! ([`GeoIp`]), the device, browser and OS families of its User-Agent ([`UserAgents`]), a
//! daily-rotating keyed visitor hash ([`VisitorKey`]), and the referrer's host ([`referrer`]).
//!
//! No I/O but opening the GeoIP file, and no web framework: the server enriches clicks in its
//! flusher, off the request path, and a Rust program embedding the service does the same.

mod buckets;
mod client;
mod geoip;
mod referrer;
mod user_agent;
mod visitor;

pub use buckets::{
    BucketError, DateError, Interval, MAX_BUCKETS, bucket_start, buckets, latest_ms, parse_date,
    time_zone,
};
pub use client::{TrustedProxies, TrustedProxiesError};
pub use geoip::{GeoIp, GeoIpError, Place};
pub use jiff::{Zoned, tz::TimeZone};
pub use referrer::{DIRECT, MAX_REFERRER_URL, Referrer, referrer, referrer_host};
pub use user_agent::{Agent, Device, UserAgents};
pub use visitor::VisitorKey;
