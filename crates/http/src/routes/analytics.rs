//! `/api/v1/analytics`: clicks and unique visitors of the workspace or one link, as a total, a
//! time series or a breakdown; and the range and filters it shares with the export
//! (`export.rs`).

use actix_web::web::{self, Data};
use actix_web::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use shortlink_analytics::{
    DateError, Device, Interval, TimeZone, Zoned, bucket_start, latest_ms, parse_date,
    referrer_host, time_zone,
};
use shortlink_domain::{CountryCode, Timestamp};
use shortlink_storage::{Dimension, EventFilter, Tally};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Authenticated;
use crate::envelope::{Envelope, ok};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{filter_text, parse_query};
use crate::state::AppState;

/// The range when none is given: the last 30 days.
const DEFAULT_DAYS: u64 = 30;

/// Breakdown entries unless `limit` says otherwise.
const DEFAULT_LIMIT: i64 = 10;

/// Routes under `/api/v1`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::get_only("/analytics", analytics));
}

/// The range and filters both endpoints take (read from the same query string as each
/// endpoint's own parameters; any other parameter is refused).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct Selection {
    /// One link (its id or short code); the whole workspace without it.
    #[param(max_length = 64)]
    pub link_id: Option<String>,
    /// First instant included: RFC 3339, or `YYYY-MM-DD` (midnight in `timezone`). Default: 30
    /// days before `end`.
    #[param(example = "2026-11-01")]
    pub start: Option<String>,
    /// First instant excluded, likewise. Default: now.
    #[param(example = "2026-12-01")]
    pub end: Option<String>,
    /// IANA time zone where dates, days, weeks and months begin (default `UTC`).
    #[param(example = "Europe/London")]
    pub timezone: Option<String>,
    /// Only clicks from this country (ISO 3166-1 alpha-2, either case).
    #[param(example = "GB", pattern = "^[A-Za-z]{2}$")]
    pub country: Option<String>,
    /// Only clicks from this city.
    #[param(min_length = 1, max_length = 253)]
    pub city: Option<String>,
    /// Only clicks from this kind of device.
    #[param(pattern = "^(desktop|mobile|tablet|other)$")]
    pub device: Option<String>,
    /// Only clicks from this browser family.
    #[param(min_length = 1, max_length = 253)]
    pub browser: Option<String>,
    /// Only clicks from this OS family.
    #[param(min_length = 1, max_length = 253)]
    pub os: Option<String>,
    /// Only clicks referred by this host (`(direct)` for none).
    #[param(min_length = 1, max_length = 253)]
    pub referrer: Option<String>,
}

/// The range and filters' parameter names.
const SELECTION: [&str; 10] = [
    "linkId", "start", "end", "timezone", "country", "city", "device", "browser", "os", "referrer",
];

/// GET `/analytics`'s own parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AnalyticsQuery {
    /// `count` (default), `timeseries`, or a breakdown: `countries`, `cities`, `devices`,
    /// `browsers`, `os`, `referrers`, `links`.
    #[param(pattern = "^(count|timeseries|countries|cities|devices|browsers|os|referrers|links)$")]
    pub group_by: Option<String>,
    /// The time series' step: `hour`, `day` (default), `week` (from Monday), `month`.
    #[param(pattern = "^(hour|day|week|month)$")]
    pub interval: Option<String>,
    /// Most breakdown entries, 1 to 100 (default 10).
    #[serde(default, deserialize_with = "crate::extract::page_limit")]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// An endpoint's own parameters and the selection, from one query string; a parameter neither
/// knows is a 400 naming it.
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    query: &str,
    own: &[&str],
) -> Result<(T, Selection), ApiError> {
    for (name, _) in form_urlencoded::parse(query.as_bytes()) {
        if !own.contains(&name.as_ref()) && !SELECTION.contains(&name.as_ref()) {
            return Err(ApiError::field(
                name.as_ref(),
                format!("unknown parameter `{name}`"),
            ));
        }
    }
    Ok((parse_query(query)?, parse_query(query)?))
}

/// `groupBy=count`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    clicks: u64,
    /// Distinct visitors of each UTC day, added up over the range's days (the visitor hash is
    /// keyed anew every day): one person on two days counts twice.
    unique_visitors: u64,
}

/// One bucket of `groupBy=timeseries`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    /// Where the bucket begins, in the query's time zone (RFC 3339 with its offset).
    start: String,
    clicks: u64,
    /// Distinct visitors of each UTC day the bucket covers, added up.
    unique_visitors: u64,
}

impl From<&Tally<Zoned>> for Bucket {
    fn from(bucket: &Tally<Zoned>) -> Self {
        Self {
            start: bucket_start(&bucket.key),
            clicks: bucket.clicks,
            unique_visitors: bucket.visitors,
        }
    }
}

/// One entry of a breakdown.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// The value (a country code, a browser family, a link id, …); null for unknown. Always
    /// present, which tells an entry from a time series bucket.
    #[schema(required = true)]
    key: Option<String>,
    clicks: u64,
    /// Distinct visitors of each UTC day, added up over the range's days.
    unique_visitors: u64,
}

// The handler writes each shape itself; these two name them for the OpenAPI document.
/// What `data` holds, by `groupBy`: the totals, or a list of time series buckets or breakdown
/// entries (told apart by `start` and `key`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum AnalyticsData {
    /// `groupBy=count`.
    Totals(Totals),
    /// `groupBy=timeseries` or a breakdown.
    Entries(Vec<AnalyticsEntry>),
}

/// One entry of a time series or of a breakdown.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum AnalyticsEntry {
    /// A bucket of a time series.
    Bucket(Bucket),
    /// An entry of a breakdown.
    Group(Group),
}

impl From<Tally> for Group {
    fn from(t: Tally) -> Self {
        Group {
            key: t.key,
            clicks: t.clicks,
            unique_visitors: t.visitors,
        }
    }
}

/// What a query asks for.
enum Shape {
    Count,
    Series(Interval),
    Breakdown(Dimension),
}

fn shape(query: &AnalyticsQuery) -> Result<Shape, ApiError> {
    let group_by = query.group_by.as_deref().unwrap_or("count");
    if group_by != "timeseries" && query.interval.is_some() {
        return Err(ApiError::field(
            "interval",
            "interval applies to groupBy=timeseries only",
        ));
    }
    if matches!(group_by, "count" | "timeseries") && query.limit.is_some() {
        return Err(ApiError::field("limit", "limit applies to breakdowns only"));
    }
    Ok(match group_by {
        "count" => Shape::Count,
        "timeseries" => Shape::Series(
            Interval::parse(query.interval.as_deref().unwrap_or("day")).ok_or_else(|| {
                ApiError::field("interval", "interval must be hour, day, week or month")
            })?,
        ),
        "countries" => Shape::Breakdown(Dimension::Country),
        "cities" => Shape::Breakdown(Dimension::City),
        "devices" => Shape::Breakdown(Dimension::Device),
        "browsers" => Shape::Breakdown(Dimension::Browser),
        "os" => Shape::Breakdown(Dimension::Os),
        "referrers" => Shape::Breakdown(Dimension::Referrer),
        "links" => Shape::Breakdown(Dimension::Link),
        _ => {
            return Err(ApiError::field(
                "groupBy",
                "groupBy must be count, timeseries, countries, cities, devices, browsers, os, referrers or links",
            ));
        }
    })
}

/// An instant parameter: RFC 3339, or a date (midnight in `zone`).
fn instant(name: &str, value: &str, zone: &TimeZone) -> Result<Timestamp, ApiError> {
    let bad = || {
        ApiError::field(
            name,
            format!(
                "{name} must be an RFC 3339 time (2026-11-01T00:00:00Z) or a date (2026-11-01)"
            ),
        )
    };
    // Far dates are valid RFC 3339 and still nonsense here; the calendar handles 1970 to late
    // on 30 December 9999.
    let out_of_range = || {
        let latest = Timestamp::from_unix_millis(latest_ms() / 1000 * 1000);
        ApiError::field(
            name,
            format!("{name} must lie between 1970-01-01T00:00:00Z and {latest}"),
        )
    };
    let ms = match Timestamp::parse_rfc3339(value).map(Timestamp::unix_millis) {
        Some(ms) => ms,
        None => match parse_date(value, zone) {
            Ok(ms) => ms,
            Err(DateError::NotADate) => return Err(bad()),
            Err(DateError::OutOfRange) => return Err(out_of_range()),
        },
    };
    if !(0..=latest_ms()).contains(&ms) {
        return Err(out_of_range());
    }
    Ok(Timestamp::from_unix_millis(ms))
}

/// The country filter, upper case as the GeoIP database gives it (`gb` means `GB`).
fn country(value: &str) -> Result<String, ApiError> {
    CountryCode::parse(value)
        .map(|c| c.as_str().to_owned())
        .map_err(|_| ApiError::field("country", "country must be a two-letter code, such as GB"))
}

/// The events a selection names, and its time zone. Another workspace's link is not found.
pub(super) async fn events(
    state: &AppState,
    auth: &Authenticated,
    selection: &Selection,
) -> Result<(EventFilter, TimeZone), ApiError> {
    let zone_name = selection.timezone.as_deref().unwrap_or("UTC");
    let zone = time_zone(zone_name).ok_or_else(|| {
        ApiError::field(
            "timezone",
            "timezone must be an IANA name such as Europe/London",
        )
    })?;
    let end = match &selection.end {
        Some(end) => instant("end", end, &zone)?,
        None => Timestamp::now(),
    };
    let start = match &selection.start {
        Some(start) => instant("start", start, &zone)?,
        None => end.minus(std::time::Duration::from_secs(DEFAULT_DAYS * 24 * 60 * 60)),
    };
    if end.unix_millis() < start.unix_millis() {
        // Name the parameter the client sent: without `end`, it is `start` that is in the
        // future.
        return Err(match selection.end {
            Some(_) => ApiError::field("end", "end must not be before start"),
            None => ApiError::field(
                "start",
                "start must not be after end (now, when end is not given)",
            ),
        });
    }
    if let Some(device) = &selection.device
        && Device::parse(device).is_none()
    {
        return Err(ApiError::field(
            "device",
            "device must be desktop, mobile, tablet or other",
        ));
    }
    let link = match &selection.link_id {
        None => None,
        Some(link) => Some(
            state
                .store
                .link_counter(auth.workspace.id, &super::link_ref(link)?, state.domain())
                .await?
                .ok_or(ApiError::NotFound("link"))?,
        ),
    };
    let filter = EventFilter {
        workspace_id: auth.workspace.id,
        link,
        start,
        end,
        country: selection.country.as_deref().map(country).transpose()?,
        city: filter_text("city", selection.city.clone())?,
        device: selection.device.clone(),
        browser: filter_text("browser", selection.browser.clone())?,
        os: filter_text("os", selection.os.clone())?,
        referrer: filter_text("referrer", selection.referrer.clone())?
            .map(|host| referrer_host(&host)),
    };
    Ok((filter, zone))
}

#[utoipa::path(get, path = "/api/v1/analytics", tag = "analytics", params(AnalyticsQuery, Selection),
    responses(
        (status = 200, description = "`groupBy=count`: `{clicks, uniqueVisitors}`; `timeseries`: one entry per bucket, oldest first, empty ones included; a breakdown: most clicks first.", body = Envelope<AnalyticsData>),
        (status = 404, description = "`NOT_FOUND`: `linkId` is not one of the workspace's links.", body = ErrorEnvelope),
    ))]
async fn analytics(
    state: Data<AppState>,
    auth: Authenticated,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (query, selection) =
        parse::<AnalyticsQuery>(req.query_string(), &["groupBy", "interval", "limit"])?;
    let shape = shape(&query)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let (filter, zone) = events(&state, &auth, &selection).await?;
    match shape {
        Shape::Count => {
            let totals = state.store.analytics_totals(&filter).await?;
            Ok(ok(Totals {
                clicks: totals.clicks,
                unique_visitors: totals.visitors,
            }))
        }
        Shape::Breakdown(dimension) => {
            let groups = state
                .store
                .analytics_breakdown(&filter, dimension, limit)
                .await?;
            Ok(ok(groups.into_iter().map(Group::from).collect::<Vec<_>>()))
        }
        Shape::Series(interval) => {
            let series = state.service.time_series(&filter, interval, &zone).await?;
            Ok(ok(series.iter().map(Bucket::from).collect::<Vec<_>>()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SELECTION` decides which parameters are refused as unknown: it must name every field.
    #[test]
    fn the_selection_list_names_every_parameter_it_reads() {
        let mut read: Vec<String> = Selection::into_params(|| None)
            .into_iter()
            .map(|p| p.name)
            .collect();
        read.sort();
        let mut listed = SELECTION.to_vec();
        listed.sort_unstable();
        assert_eq!(read, listed);
    }

    #[test]
    fn the_documented_device_pattern_names_every_device() {
        let names: Vec<&str> = Device::ALL.iter().map(|d| d.as_str()).collect();
        let documented = format!("^({})$", names.join("|"));
        let base = shortlink_domain::BaseUrl::parse("http://127.0.0.1:8080").unwrap();
        let openapi = serde_json::to_string(&crate::openapi::document(&base)).unwrap();
        assert!(openapi.contains(&documented), "{documented}");
        assert!(names.iter().all(|&name| Device::parse(name).is_some()));
        assert_eq!(Device::parse("phone"), None);
    }

    proptest::proptest! {
        /// Any query string: parsed or refused with a 400 naming a parameter, never a panic.
        #[test]
        fn any_query_is_parsed_or_refused(query in "[a-zA-Z=&%0-9:+._/-]{0,120}") {
            let own = ["groupBy", "interval", "limit"];
            if let Ok((parsed, _)) = parse::<AnalyticsQuery>(&query, &own) {
                let _ = shape(&parsed);
            }
            let _ = parse::<super::super::export::ExportQuery>(&query, &["format"]);
        }
    }
}
