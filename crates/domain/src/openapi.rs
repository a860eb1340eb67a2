//! Helpers for the hand-written OpenAPI schemas of types that serialise as plain strings.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};

pub(crate) fn string_schema(
    description: &str,
    pattern: Option<&str>,
    format: Option<KnownFormat>,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .pattern(pattern)
        .format(format.map(SchemaFormat::KnownFormat))
        .into()
}
