//! The routes, one module per resource.

pub mod analytics;
pub mod dashboard;
pub mod export;
pub mod health;
pub mod link_fields;
mod link_pages;
pub mod links;
pub mod qr;
pub mod redirect;
pub mod webhooks;

use shortlink_domain::LinkRef;

use crate::error::ApiError;

/// The link a client names (by id or by short code); text that can name no link is not found.
pub(crate) fn link_ref(named: &str) -> Result<LinkRef, ApiError> {
    LinkRef::parse(named).ok_or(ApiError::NotFound("link"))
}
