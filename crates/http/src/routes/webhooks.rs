//! `/api/v1/webhooks`: register, list, read, delete endpoints, and read their deliveries.

use actix_web::web::{Data, Path};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use shortlink_domain::{
    Delivery, DeliveryCursor, DeliveryState, EventKind, Timestamp, Webhook, WebhookId,
    WebhookSecret, WebhookTarget,
};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Authenticated;
use crate::envelope::{Envelope, ok};
use crate::error::{ApiError, ErrorEnvelope, FieldError};
use crate::extract::{JsonBody, NoParams, QueryParams};
use crate::idempotency::{self, Begin};
use crate::state::AppState;

/// The body of POST `/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateWebhookRequest {
    /// Absolute http(s) URL on a public address.
    #[schema(
        format = "uri",
        max_length = 2048,
        example = "https://hooks.example.com/shortlink"
    )]
    pub target_url: String,
    /// Kinds to subscribe to: `link.created`, `link.clicked`, `link.updated`, `link.deleted`.
    #[schema(value_type = Vec<EventKind>, min_items = 1)]
    pub events: Vec<String>,
}

impl crate::extract::BodyShape for CreateWebhookRequest {}

/// A webhook endpoint as clients see it. `secret` only in the response to its creation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    id: WebhookId,
    target_url: String,
    events: Vec<EventKind>,
    active: bool,
    consecutive_failures: i32,
    created_at: Timestamp,
    disabled_at: Option<Timestamp>,
    /// The signing secret (`whsec_…`), only in the response to POST.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl WebhookView {
    fn new(hook: &Webhook, with_secret: bool) -> Self {
        Self {
            id: hook.id,
            target_url: hook.target.redacted(),
            events: hook.events.clone(),
            active: hook.disabled_at.is_none(),
            consecutive_failures: hook.consecutive_failures,
            created_at: hook.created_at,
            disabled_at: hook.disabled_at,
            secret: with_secret.then(|| hook.secret.expose().to_owned()),
        }
    }
}

/// The query of GET `/webhooks/{id}/deliveries`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Page size, 1 to 100 (default 20).
    #[serde(default, deserialize_with = "crate::extract::page_limit")]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// `nextCursor` of the previous page: the last listed delivery's creation time (Unix
    /// milliseconds) and event id.
    #[param(pattern = "^[0-9]{1,15}\\.msg_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub cursor: Option<String>,
    /// Only deliveries in this state.
    #[param(pattern = "^(pending|delivered|failed)$")]
    pub state: Option<String>,
}

/// One page of an endpoint's deliveries.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPage {
    /// Newest first.
    pub items: Vec<DeliveryView>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// One delivery as clients see it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    event_id: String,
    #[serde(rename = "type")]
    event_type: EventKind,
    /// `pending`, `delivered` or `failed`.
    #[schema(value_type = String, pattern = "^(pending|delivered|failed)$")]
    state: &'static str,
    attempts: i32,
    last_status_code: Option<i32>,
    last_error: Option<String>,
    next_attempt_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> Self {
        let pending = d.state == shortlink_domain::DeliveryState::Pending;
        Self {
            event_id: d.event_id.to_string(),
            event_type: d.event_type,
            state: d.state.as_str(),
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error,
            next_attempt_at: pending.then_some(d.next_attempt_at),
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// Routes under `/api/v1`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/webhooks")
            .route(web::post().to(create))
            .route(crate::get().to(list))
            .default_service(crate::method_not_allowed("GET, HEAD, POST")),
    )
    .service(
        web::resource("/webhooks/{id}")
            .route(crate::get().to(get))
            .route(web::delete().to(delete))
            .default_service(crate::method_not_allowed("GET, HEAD, DELETE")),
    )
    .service(crate::get_only("/webhooks/{id}/deliveries", deliveries));
}

fn parse_events(events: &[String]) -> Result<Vec<EventKind>, FieldError> {
    if events.is_empty() {
        return Err(FieldError::new(
            "events",
            format!("events must name at least one of {}", EventKind::names()),
        ));
    }
    let mut kinds = events
        .iter()
        .map(|e| e.parse::<EventKind>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| FieldError::new("events", e))?;
    kinds.sort();
    kinds.dedup();
    Ok(kinds)
}

#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks", request_body = CreateWebhookRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "As for POST /links; a replay shows the secret again.")),
    responses(
        (status = 200, description = "The endpoint, with its signing secret (shown only here, and in a replay of this answer).", body = Envelope<WebhookView>),
        (status = 409, description = "`WEBHOOK_LIMIT_REACHED`: the workspace has 25 endpoints already (delete one first); `IDEMPOTENCY_KEY_IN_USE`: the key's first request is still running.", body = ErrorEnvelope),
        (status = 422, description = "`IDEMPOTENCY_KEY_REUSED`: the key was used with another body.", body = ErrorEnvelope),
    ))]
async fn create(
    state: Data<AppState>,
    req: HttpRequest,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    body: JsonBody<CreateWebhookRequest>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let fingerprint = body.fingerprint().map(str::to_owned);
    let body = body.into_inner()?;
    let target = WebhookTarget::parse(
        &body.target_url,
        // The delivery worker's setting: an endpoint it would refuse to deliver to is refused.
        state.service.webhook_settings().allow_private,
    )
    .map_err(|e| FieldError::new("targetUrl", e));
    let events = parse_events(&body.events);
    let (target, events) = match (target, events) {
        (Ok(t), Ok(e)) => (t, e),
        (t, e) => {
            let details: Vec<FieldError> = [t.err(), e.err()].into_iter().flatten().collect();
            return Err(ApiError::Validation {
                message: details[0].message.clone(),
                details,
            });
        }
    };
    let hook = Webhook {
        id: WebhookId::generate(),
        workspace_id: auth.workspace.id,
        target,
        events,
        secret: WebhookSecret::generate(),
        created_at: Timestamp::now(),
        disabled_at: None,
        consecutive_failures: 0,
    };
    let claim = match idempotency::begin(&state, &auth, &req, fingerprint.as_deref()).await? {
        Begin::Run(claim) => claim,
        Begin::Replay(response) => return Ok(response),
    };
    let answer = idempotency::stored(Ok(WebhookView::new(&hook, true)));
    let completion = claim.clone().map(|claim| (claim, answer.clone()));
    let created = state.service.create_webhook(&hook, completion).await;
    if !matches!(created, Ok(true)) {
        idempotency::release(&state, claim.as_ref()).await;
        return Err(created.map_or_else(ApiError::from, |_| ApiError::TooManyWebhooks));
    }
    Ok(idempotency::respond(&answer))
}

#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    responses((status = 200, description = "The workspace's endpoints, newest first.", body = Envelope<Vec<WebhookView>>)))]
async fn list(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let hooks = state.store.list_webhooks(auth.workspace.id).await?;
    Ok(ok(hooks
        .iter()
        .map(|h| WebhookView::new(h, false))
        .collect::<Vec<_>>()))
}

fn webhook_id(path: &str) -> Result<WebhookId, ApiError> {
    // An id that cannot exist is simply not found, like any other unknown id.
    WebhookId::parse(path).map_err(|_| ApiError::NotFound("webhook"))
}

#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "The webhook id (`wh_…`).")),
    responses((status = 200, description = "The endpoint (without its secret).", body = Envelope<WebhookView>)))]
async fn get(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    path: Path<String>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let hook = state
        .store
        .get_webhook(auth.workspace.id, webhook_id(&path)?)
        .await?
        .ok_or(ApiError::NotFound("webhook"))?;
    Ok(ok(WebhookView::new(&hook, false)))
}

#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "The webhook id (`wh_…`).")),
    responses((status = 200, description = "The deleted endpoint; its pending deliveries are dropped.", body = Envelope<WebhookView>)))]
async fn delete(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    path: Path<String>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let id = webhook_id(&path)?;
    let hook = state
        .store
        .get_webhook(auth.workspace.id, id)
        .await?
        .ok_or(ApiError::NotFound("webhook"))?;
    if !state.store.delete_webhook(auth.workspace.id, id).await? {
        return Err(ApiError::NotFound("webhook"));
    }
    Ok(ok(WebhookView::new(&hook, false)))
}

#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "The webhook id (`wh_…`)."), DeliveriesQuery),
    responses((status = 200, description = "A page of the endpoint's deliveries, newest first.", body = Envelope<DeliveryPage>)))]
async fn deliveries(
    state: Data<AppState>,
    auth: Authenticated,
    path: Path<String>,
    query: QueryParams<DeliveriesQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner()?;
    let limit = query.limit.unwrap_or(crate::extract::DEFAULT_PAGE_LIMIT);
    let after = query
        .cursor
        .as_deref()
        .map(|c| DeliveryCursor::parse(c).map_err(|e| ApiError::field("cursor", e)))
        .transpose()?;
    let wanted = query
        .state
        .as_deref()
        .map(|s| {
            DeliveryState::parse(s).ok_or_else(|| {
                ApiError::field("state", "state must be one of pending, delivered, failed")
            })
        })
        .transpose()?;
    let mut list = state
        .store
        .list_deliveries_page(
            auth.workspace.id,
            webhook_id(&path)?,
            wanted,
            after,
            limit + 1,
        )
        .await?
        .ok_or(ApiError::NotFound("webhook"))?;
    let more = list.len() as i64 > limit;
    list.truncate(limit as usize);
    let next_cursor = more
        .then(|| list.last().map(|d| DeliveryCursor::after(d).to_string()))
        .flatten();
    let items = list.into_iter().map(DeliveryView::from).collect();
    Ok(ok(DeliveryPage { items, next_cursor }))
}
