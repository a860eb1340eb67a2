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
