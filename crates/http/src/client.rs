//! The client address of a request: its TCP peer, or what a trusted proxy says it forwarded
//! (`--trusted-proxies`; the rule is `shortlink_analytics::TrustedProxies`). Used by analytics,
//! the failed-authentication budget and password attempts alike.

use std::net::{IpAddr, Ipv4Addr};

use actix_web::HttpRequest;

use crate::state::AppState;

/// The client address of `req` as the server's settings say to judge it.
pub fn client_address(state: &AppState, req: &HttpRequest) -> IpAddr {
    let peer = req
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
    let trusted = &state.settings.trusted_proxies;
    if trusted.is_empty() {
        return peer;
    }
    let forwarded = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok());
    trusted.client_address(peer, forwarded)
}
