//! `/api/v1/analytics/export`: the click events themselves, streamed as CSV or NDJSON, one page
//! of the store at a time, so the server's memory does not grow with the export.

use actix_web::http::header;
use actix_web::web::{self, Bytes, Data};
use actix_web::{HttpRequest, HttpResponse, Responder};
use futures_util::stream;
use serde::Deserialize;
use shortlink_storage::ExportedEvent;
use utoipa::IntoParams;

use super::analytics::{Selection, events, parse};
use crate::auth::Authenticated;
use crate::error::{ApiError, ErrorEnvelope};
use crate::state::AppState;

/// Routes under `/api/v1`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::get_only("/analytics/export", export));
}

/// Events per page of an export.
const EXPORT_PAGE: i64 = 2_000;

/// The export's columns, in order.
pub const EXPORT_COLUMNS: [&str; 10] = [
    "timestamp",
    "linkId",
    "shortCode",
    "country",
    "city",
    "device",
    "browser",
    "os",
    "referrer",
    "referrerUrl",
];

/// GET `/analytics/export`'s own parameter.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `csv` (default) or `ndjson`.
    #[param(pattern = "^(csv|ndjson)$")]
    pub format: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/analytics/export", tag = "analytics", params(ExportQuery, Selection),
    responses(
        (status = 200, description = "One row per click event, oldest first, streamed: CSV (RFC 4180, with a header row) or NDJSON. Columns: timestamp, linkId, shortCode, country, city, device, browser, os, referrer, referrerUrl.",
            content((String = "text/csv"), (String = "application/x-ndjson"))),
        (status = 404, description = "`NOT_FOUND`: `linkId` is not one of the workspace's links.", body = ErrorEnvelope),
    ))]
async fn export(
    state: Data<AppState>,
    auth: Authenticated,
    req: HttpRequest,
) -> Result<impl Responder, ApiError> {
    let (query, selection) = parse::<ExportQuery>(req.query_string(), &["format"])?;
    let csv = match query.format.as_deref().unwrap_or("csv") {
        "csv" => true,
        "ndjson" => false,
        _ => return Err(ApiError::field("format", "format must be csv or ndjson")),
    };
    let (filter, _) = events(&state, &auth, &selection).await?;
    let store = state.store.clone();
    // Each page is read when the client has taken the previous one: memory holds one page.
    let pages = stream::try_unfold(Some(None), move |after| {
        let (store, filter) = (store.clone(), filter.clone());
        async move {
            let Some(after) = after else {
                return Ok::<_, ApiError>(None);
            };
            let page = store.export_events(&filter, after, EXPORT_PAGE).await?;
            let next = (page.len() as i64 == EXPORT_PAGE).then(|| page.last().map(|e| e.position));
            let mut text = Vec::new();
            for event in &page {
                if csv {
                    csv_row(&mut text, event);
                } else {
                    ndjson_row(&mut text, event);
                }
            }
            Ok(Some((Bytes::from(text), next)))
        }
    });
    let header_row = csv.then(|| Bytes::from(format!("{}\r\n", EXPORT_COLUMNS.join(","))));
    let body = futures_util::StreamExt::chain(stream::iter(header_row.map(Ok)), pages);
    let (content_type, extension) = match csv {
        true => ("text/csv; charset=utf-8", "csv"),
        false => ("application/x-ndjson", "ndjson"),
    };
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"clicks.{extension}\""),
        ))
        .streaming(futures_util::StreamExt::map(body, |page| {
            page.map_err(actix_web::Error::from)
        })))
}

/// The cells of one event, in [`EXPORT_COLUMNS`] order (`timestamp` is its time, formatted).
fn cells<'a>(event: &'a ExportedEvent, timestamp: &'a str) -> [Option<&'a str>; 10] {
    [
        Some(timestamp),
        Some(&event.link_id),
        Some(&event.short_code),
        event.country.as_deref(),
        event.city.as_deref(),
        Some(&event.device),
        event.browser.as_deref(),
        event.os.as_deref(),
        Some(&event.referrer),
        event.referrer_url.as_deref(),
    ]
}

fn csv_row(out: &mut Vec<u8>, event: &ExportedEvent) {
    let timestamp = event.timestamp.to_string();
    for (i, cell) in cells(event, &timestamp).into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        csv_cell(out, cell.unwrap_or_default());
    }
    out.extend_from_slice(b"\r\n");
}

/// One CSV cell (RFC 4180): quoted when it holds a comma, quote or line break. A cell a
/// spreadsheet would run as a formula (starting `=`, `+`, `-` or `@`) is quoted and prefixed
/// with `'`, so it is shown as text.
pub fn csv_cell(out: &mut Vec<u8>, cell: &str) {
    let formula = cell.starts_with(['=', '+', '-', '@']);
    let quote = formula || cell.contains([',', '"', '\r', '\n']);
    if !quote {
        out.extend_from_slice(cell.as_bytes());
        return;
    }
    out.push(b'"');
    if formula {
        out.push(b'\'');
    }
    out.extend_from_slice(cell.replace('"', "\"\"").as_bytes());
    out.push(b'"');
}

/// One JSON object per line, written straight into the page (no map per event).
fn ndjson_row(out: &mut Vec<u8>, event: &ExportedEvent) {
    let timestamp = event.timestamp.to_string();
    out.push(b'{');
    for (i, (name, cell)) in EXPORT_COLUMNS
        .iter()
        .zip(cells(event, &timestamp))
        .enumerate()
    {
        if i > 0 {
            out.push(b',');
        }
        // The names are plain ASCII; the values are escaped by serde_json.
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        if serde_json::to_writer(&mut *out, &cell).is_err() {
            out.extend_from_slice(b"null");
        }
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(s: &str) -> String {
        let mut out = Vec::new();
        csv_cell(&mut out, s);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn csv_cells_are_quoted_and_formulas_defused() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("line\nbreak"), "\"line\nbreak\"");
        assert_eq!(cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(cell("+1"), "\"'+1\"");
        assert_eq!(cell("-1"), "\"'-1\"");
        assert_eq!(cell("@SUM(A1)"), "\"'@SUM(A1)\"");
        assert_eq!(cell(""), "");
    }
}
