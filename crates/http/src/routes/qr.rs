//! `GET /api/v1/qr`: a link's QR code as SVG or PNG (or, with `Accept: application/json`, the
//! Link with the image as a data URI).

use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Data;
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use shortlink_domain::LinkView;
use shortlink_qr::{Color, Level, Options, QrError};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Authenticated;
use crate::envelope::{Envelope, ok};
use crate::error::ApiError;
use crate::extract::QueryParams;
use crate::negotiation::{matches_etag, prefers_json_to_image};
use crate::state::AppState;

/// Kept, but asked again each time: a link's short URL changes with its slug (the dashboard asks
/// by link id), and the `ETag` makes asking again a 304 while it has not. Private because the
/// request is authenticated.
const CACHE_CONTROL: &str = "private, no-cache";

/// The query. Every parameter is read as text so each is checked, and named, on its own; the
/// documented types are what is accepted.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct QrQuery {
    /// The link's short code or id.
    #[param(required = true, value_type = String, min_length = 1)]
    short_code: Option<String>,
    /// `svg` (default) or `png`, case-insensitive.
    #[param(value_type = Option<String>, pattern = "^([sS][vV][gG]|[pP][nN][gG])$")]
    format: Option<String>,
    /// Pixels across, 64 to 4096 (default 512).
    #[param(value_type = Option<u32>, minimum = 64, maximum = 4096)]
    size: Option<String>,
    /// Quiet zone in modules, 0 to 16 (default 4).
    #[param(value_type = Option<u32>, minimum = 0, maximum = 16)]
    margin: Option<String>,
    /// Error correction: `L`, `M` (default), `Q` or `H`.
    #[param(value_type = Option<String>, pattern = "^[LMQHlmqh]$")]
    level: Option<String>,
    /// Foreground colour `#rrggbb` (default `#000000`).
    #[param(value_type = Option<String>, pattern = "^#[0-9A-Fa-f]{6}$")]
    fg: Option<String>,
    /// Background colour `#rrggbb` (default `#ffffff`).
    #[param(value_type = Option<String>, pattern = "^#[0-9A-Fa-f]{6}$")]
    bg: Option<String>,
}

/// The JSON answer: the Link and its image.
#[derive(Debug, Serialize, ToSchema)]
pub struct QrView {
    #[serde(flatten)]
    link: LinkView,
    /// `data:image/svg+xml;base64,…` or `data:image/png;base64,…`.
    #[schema(pattern = "^data:image/(svg\\+xml|png);base64,")]
    qr: String,
}

/// The route.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::get_only("/qr", qr));
}

fn parse<T: std::str::FromStr>(
    name: &str,
    value: Option<&str>,
    default: T,
    expected: &str,
) -> Result<T, ApiError> {
    match value {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| ApiError::field(name, format!("{name} must be {expected}"))),
    }
}

fn options(q: &QrQuery) -> Result<Options, ApiError> {
    let d = Options::default();
    let size_range = format!(
        "an integer from {} to {}",
        shortlink_qr::MIN_SIZE,
        shortlink_qr::MAX_SIZE
    );
    let margin_range = format!("an integer from 0 to {}", shortlink_qr::MAX_MARGIN);
    let opts = Options {
        format: parse("format", q.format.as_deref(), d.format, "svg or png")?,
        size: parse("size", q.size.as_deref(), d.size, &size_range)?,
        margin: parse("margin", q.margin.as_deref(), d.margin, &margin_range)?,
        level: parse::<Level>("level", q.level.as_deref(), d.level, "one of L, M, Q, H")?,
        fg: parse::<Color>("fg", q.fg.as_deref(), d.fg, "a colour of the form #rrggbb")?,
        bg: parse::<Color>("bg", q.bg.as_deref(), d.bg, "a colour of the form #rrggbb")?,
    };
    opts.validate().map_err(|e| qr_error(&e))?;
    Ok(opts)
}

/// Every QR error names the parameter to change; only an encoder failure is ours.
fn qr_error(e: &QrError) -> ApiError {
    match e {
        QrError::SizeOutOfRange { .. } | QrError::TooSmall { .. } => ApiError::field("size", e),
        QrError::MarginOutOfRange { .. } => ApiError::field("margin", e),
        QrError::SameColours => ApiError::field("bg", e),
        QrError::DataTooLong { .. } => ApiError::field("level", e),
        QrError::Encode(_) => ApiError::Internal(e.to_string()),
    }
}

/// A strong validator of the image: the encoded text and every option.
fn etag(text: &str, o: &Options) -> String {
    let key = format!(
        "{text}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        o.format,
        o.size,
        o.margin,
        o.level,
        o.fg,
        o.bg,
        env!("CARGO_PKG_VERSION")
    );
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

// Names the PNG's bytes for the OpenAPI document (a `Vec<u8>` would be an array of numbers).
/// A PNG image.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[expect(dead_code, reason = "a schema only")]
struct PngBytes(Vec<u8>);

#[utoipa::path(get, path = "/api/v1/qr", tag = "qr", params(QrQuery),
    responses(
        (status = 200, description = "The QR code of the link's shortUrl, with `ETag` and `Cache-Control`.",
            content(
                (String = "image/svg+xml"),
                (PngBytes = "image/png"),
                (Envelope<QrView> = "application/json"),
            )),
        (status = 304, description = "Not modified (`If-None-Match` matched the `ETag`)."),
    ))]
async fn qr(
    state: Data<AppState>,
    auth: Authenticated,
    req: HttpRequest,
    query: QueryParams<QrQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner()?;
    let code = query
        .short_code
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::field(
                "shortCode",
                "shortCode is required: a link's short code or id",
            )
        })?;
    let opts = options(&query)?;
    let link = state
        .store
        .get_link(auth.workspace.id, &super::link_ref(code)?, state.domain())
        .await?
        .ok_or(ApiError::NotFound("link"))?;
    let view = link.view(state.base());
    let json = prefers_json_to_image(&req, opts.format.content_type());
    let tag = etag(&view.short_url, &opts);
    if !json && matches_etag(&req, &tag) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, tag))
            .insert_header((header::VARY, "Accept"))
            .insert_header((header::CACHE_CONTROL, CACHE_CONTROL))
            .finish());
    }
    let text = view.short_url.clone();
    // A 4096-pixel PNG takes milliseconds: off the request thread.
    let image = web::block(move || shortlink_qr::render(&text, &opts))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| qr_error(&e))?;
    let content_type = opts.format.content_type();
    if json {
        let qr = format!(
            "data:{content_type};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&image)
        );
        return Ok(ok(QrView { link: view, qr }));
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(content_type)))
        .insert_header((header::ETAG, tag))
        // The same URL answers JSON to a client that asks for it: a cache keeps them apart.
        .insert_header((header::VARY, "Accept"))
        // Overrides the API scope's `no-store`: images may be cached.
        .insert_header((header::CACHE_CONTROL, CACHE_CONTROL))
        .body(image))
}
