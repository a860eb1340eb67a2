//! The routes, one module per resource.

pub mod health;
pub mod links;
pub mod redirect;
pub mod webhooks;
