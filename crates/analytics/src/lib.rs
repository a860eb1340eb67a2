#![doc = include_str!("../README.md")]

mod buckets;
mod geoip;
mod referrer;
mod trusted_proxies;
mod user_agent;
mod visitor;

pub use buckets::{
    BucketError, DateError, Interval, MAX_BUCKETS, bucket_start, buckets, latest_ms, parse_date,
    time_zone,
};
pub use geoip::{GeoIp, GeoIpError, Place};
pub use jiff::{Zoned, tz::TimeZone};
pub use referrer::{
    DIRECT, MAX_REFERRER_HOST, MAX_REFERRER_URL, Referrer, referrer, referrer_host,
};
pub use trusted_proxies::{TrustedProxies, TrustedProxiesError};
pub use user_agent::{Agent, Device, UserAgents};
pub use visitor::VisitorKey;
