//! `/api/v1/links`: create (single and bulk), list, read, change, delete.

use std::sync::Arc;

use actix_web::web::{Data, Path};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use shortlink_domain::{
    BaseUrl, LinkId, LinkOptions, LinkView, Password, PasswordHash, Slug, Tag, Timestamp,
};
use shortlink_storage::{
    CreateOutcome, LinkCompletion, LinkFilter, LinkUpdate, NewLink, RenderCreation,
};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Authenticated;
use crate::envelope::{Envelope, ok};
use crate::error::{ApiError, ErrorBody, ErrorEnvelope};
use crate::extract::{JsonBody, NoParams, QueryParams, parse_json};
use crate::idempotency::{self, Begin};
pub use crate::routes::link_fields::{CreateLinkRequest, UpdateLinkRequest};
use crate::routes::link_fields::{validate_creation, validate_update};
use crate::state::AppState;

/// Most links in one bulk request.
pub const MAX_BULK: usize = 100;

/// The body of POST `/links/bulk`: 1 to [`MAX_BULK`] creation requests. Documentation only: the
/// handler reads the items one by one so each can fail on its own.
pub struct BulkRequest;

impl utoipa::PartialSchema for BulkRequest {
    /// Items are only required to be objects: one that is not a valid `CreateLinkRequest` is
    /// reported in its own result and does not fail the request.
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let item = utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Object)
            .description(Some(
                "A CreateLinkRequest. An item that is not a valid one gets an error in its result; \
                 the other items are still created.",
            ))
            .examples([
                serde_json::json!({"destination": "https://example.com/a", "customSlug": "a"}),
            ]);
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(item)
            .min_items(Some(1))
            .max_items(Some(MAX_BULK))
            .into()
    }
}

impl ToSchema for BulkRequest {}

/// The query of GET `/links`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page size, 1 to 100 (default 20).
    #[serde(default, deserialize_with = "crate::extract::page_limit")]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// `nextCursor` of the previous page.
    #[param(pattern = "^link_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub cursor: Option<String>,
    /// Only links with this tag.
    #[param(min_length = 1, max_length = 50)]
    pub tag: Option<String>,
    /// Only links whose short code or destination contains this text (case-insensitive).
    #[param(min_length = 1, max_length = 253)]
    pub search: Option<String>,
    /// Archived links too (`true`); left out by default.
    pub archived: Option<bool>,
}

/// One page of links.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkPage {
    /// Newest first.
    pub items: Vec<LinkView>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// One bulk result: `{"index", "link"}` or `{"index", "error"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkItem {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<LinkView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody>,
}

/// Routes under `/api/v1`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/links")
            .route(web::post().to(create))
            .route(crate::get().to(list))
            .default_service(crate::method_not_allowed("GET, HEAD, POST")),
    )
    .service(
        web::resource("/links/bulk")
            .route(web::post().to(bulk))
            .default_service(crate::method_not_allowed("POST")),
    )
    .service(
        web::resource("/links/{link}")
            .route(crate::get().to(get))
            .route(web::patch().to(update))
            .route(web::delete().to(delete))
            .default_service(crate::method_not_allowed("GET, HEAD, PATCH, DELETE")),
    );
}

/// Validates a creation request into a [`NewLink`], reporting every bad field at once; hashes
/// its password, if any.
async fn validate(
    state: &AppState,
    auth: &Authenticated,
    req: CreateLinkRequest,
) -> Result<NewLink, ApiError> {
    let (destination, slug, valid) = validate_creation(state.base(), req)?;
    let mut patch = valid.patch;
    patch.password = hashed(state, valid.password).await?;
    let mut options = LinkOptions::default();
    patch.apply_options(&mut options);
    Ok(NewLink {
        id: LinkId::generate(),
        workspace_id: auth.workspace.id,
        domain: state.domain().to_owned(),
        slug,
        destination,
        created_at: Timestamp::now(),
        options,
    })
}

/// A password to store, hashed; `Some(None)` removes it.
async fn hashed(
    state: &AppState,
    password: Option<Option<Password>>,
) -> Result<Option<Option<PasswordHash>>, ApiError> {
    Ok(match password {
        Some(Some(password)) => Some(Some(state.service.hash_password(password).await?)),
        Some(None) => Some(None),
        None => None,
    })
}

/// What a client learns of one stored link.
fn outcome(
    base: &BaseUrl,
    outcome: &CreateOutcome,
    slug: Option<&str>,
) -> Result<LinkView, ApiError> {
    match outcome {
        CreateOutcome::Created(link) => Ok(link.view(base)),
        CreateOutcome::SlugConflict => Err(ApiError::SlugConflict(slug.unwrap_or_default().into())),
    }
}

/// Stores a request's links in one transaction (shared with concurrent creations) and answers
/// with `answer`, applied to the outcomes in input order; that answer is also what a retry with
/// the request's `Idempotency-Key` replays.
async fn store_links(
    state: &AppState,
    req: &HttpRequest,
    auth: &Authenticated,
    fingerprint: Option<&str>,
    links: Vec<NewLink>,
    answer: RenderCreation,
) -> Result<HttpResponse, ApiError> {
    let claim = match idempotency::begin(state, auth, req, fingerprint).await? {
        Begin::Run(claim) => claim,
        Begin::Replay(response) => return Ok(response),
    };
    if links.is_empty() && claim.is_none() {
        return Ok(idempotency::respond(&answer(&[])));
    }
    let completion = claim.clone().map(|claim| LinkCompletion {
        claim,
        render: answer.clone(),
    });
    match state
        .service
        .create_links_completing(links, completion)
        .await
    {
        Ok(outcomes) => Ok(idempotency::respond(&answer(&outcomes))),
        Err(e) => {
            idempotency::release(state, claim.as_ref()).await;
            Err(e.into())
        }
    }
}

#[utoipa::path(post, path = "/api/v1/links", tag = "links", request_body = CreateLinkRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "Makes a retry safe: the same key with the same body within 24 h answers the first answer again and creates nothing. 1 to 255 visible ASCII characters.")),
    responses(
        (status = 200, description = "The created link.", body = Envelope<LinkView>),
        (status = 409, description = "`SLUG_CONFLICT`: the customSlug is taken; `IDEMPOTENCY_KEY_IN_USE`: the key's first request is still running.", body = ErrorEnvelope),
        (status = 422, description = "`IDEMPOTENCY_KEY_REUSED`: the key was used with another body.", body = ErrorEnvelope),
    ))]
async fn create(
    state: Data<AppState>,
    req: HttpRequest,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    body: JsonBody<CreateLinkRequest>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let fingerprint = body.fingerprint().map(str::to_owned);
    let link = validate(&state, &auth, body.into_inner()?).await?;
    let (base, slug) = (
        state.base().clone(),
        link.slug.as_ref().map(Slug::to_string),
    );
    let answer: RenderCreation = Arc::new(move |outcomes| {
        idempotency::stored(match outcomes {
            [one] => outcome(&base, one, slug.as_deref()),
            _ => Err(ApiError::Internal("no outcome for the link".into())),
        })
    });
    store_links(
        &state,
        &req,
        &auth,
        fingerprint.as_deref(),
        vec![link],
        answer,
    )
    .await
}

#[utoipa::path(post, path = "/api/v1/links/bulk", tag = "links", request_body = BulkRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "As for POST /links.")),
    responses(
        (status = 200, description = "One result per item, in input order.", body = Envelope<Vec<BulkItem>>),
        (status = 409, description = "`IDEMPOTENCY_KEY_IN_USE`: the key's first request is still running.", body = ErrorEnvelope),
        (status = 422, description = "`IDEMPOTENCY_KEY_REUSED`: the key was used with another body.", body = ErrorEnvelope),
    ))]
async fn bulk(
    state: Data<AppState>,
    req: HttpRequest,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    items: JsonBody<Vec<Box<RawValue>>>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let fingerprint = items.fingerprint().map(str::to_owned);
    let items = items.into_inner()?;
    if items.is_empty() || items.len() > MAX_BULK {
        return Err(ApiError::invalid(format!(
            "a bulk request must hold 1 to {MAX_BULK} links"
        )));
    }
    // An item that is not even an object means the request is malformed, not the item.
    if let Some(i) = items.iter().position(|item| !item.get().starts_with('{')) {
        return Err(ApiError::field(
            format!("[{i}]"),
            "each item must be a JSON object",
        ));
    }
    // Each item is parsed and validated on its own; only valid ones reach the database, and their
    // outcomes come back in the same order. Per item: its error, or its custom slug.
    let mut valid = Vec::new();
    let mut checked: Vec<Result<Option<String>, ErrorBody>> = Vec::with_capacity(items.len());
    for item in items {
        // Each item's own text, parsed as a single create's body is (a key twice is an error).
        let link = match parse_json(item.get().as_bytes()) {
            Ok(req) => validate(&state, &auth, req).await,
            Err(e) => Err(e),
        };
        checked.push(link.map_err(|e| e.body()).map(|link| {
            let slug = link.slug.as_ref().map(Slug::to_string);
            valid.push(link);
            slug
        }));
    }
    let base = state.base().clone();
    let answer: RenderCreation = Arc::new(move |outcomes| {
        let mut stored = outcomes.iter();
        let items: Vec<BulkItem> = checked
            .iter()
            .enumerate()
            .map(|(index, checked)| {
                let result = checked.clone().and_then(|slug| {
                    let stored = stored
                        .next()
                        .ok_or(ApiError::Internal("missing bulk outcome".into()));
                    stored
                        .and_then(|o| outcome(&base, o, slug.as_deref()))
                        .map_err(|e| e.body())
                });
                match result {
                    Ok(link) => BulkItem {
                        index,
                        link: Some(link),
                        error: None,
                    },
                    Err(error) => BulkItem {
                        index,
                        link: None,
                        error: Some(error),
                    },
                }
            })
            .collect();
        idempotency::stored(Ok(items))
    });
    store_links(&state, &req, &auth, fingerprint.as_deref(), valid, answer).await
}

#[utoipa::path(get, path = "/api/v1/links", tag = "links", params(ListQuery),
    responses((status = 200, description = "A page of the workspace's links, newest first.", body = Envelope<LinkPage>)))]
async fn list(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner()?;
    let search = crate::extract::filter_text("search", query.search)?;
    let limit = query.limit.unwrap_or(crate::extract::DEFAULT_PAGE_LIMIT);
    let before = query
        .cursor
        .as_deref()
        .map(|c| {
            LinkId::parse_as_written(c)
                .map_err(|_| ApiError::field("cursor", "cursor is not one this service issued"))
        })
        .transpose()?;
    let tag = (query.tag.as_deref())
        .map(|tag| Tag::parse(tag).map_err(|e| ApiError::field("tag", e)))
        .transpose()?;
    let filter = LinkFilter {
        tag,
        search,
        archived: query.archived.unwrap_or(false),
    };
    let mut links = state
        .store
        .list_links(auth.workspace.id, limit + 1, before, &filter)
        .await?;
    let more = links.len() as i64 > limit;
    links.truncate(limit as usize);
    let next_cursor = if more {
        links.last().map(|l| l.id.to_string())
    } else {
        None
    };
    let items = links.iter().map(|l| l.view(state.base())).collect();
    Ok(ok(LinkPage { items, next_cursor }))
}

#[utoipa::path(get, path = "/api/v1/links/{link}", tag = "links", params(("link" = String, Path, description = "A link id (`link_…`) or its short code.")),
    responses((status = 200, description = "The link.", body = Envelope<LinkView>)))]
async fn get(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    path: Path<String>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let link = state
        .store
        .get_link(auth.workspace.id, &super::link_ref(&path)?, state.domain())
        .await?
        .ok_or(ApiError::NotFound("link"))?;
    Ok(ok(link.view(state.base())))
}

#[utoipa::path(patch, path = "/api/v1/links/{link}", tag = "links", params(("link" = String, Path, description = "A link id (`link_…`) or its short code.")), request_body = UpdateLinkRequest,
    responses(
        (status = 200, description = "The changed link; the redirect follows at once.", body = Envelope<LinkView>),
        (status = 409, description = "`SLUG_CONFLICT`: the new customSlug is taken.", body = ErrorEnvelope),
    ))]
async fn update(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    path: Path<String>,
    body: JsonBody<UpdateLinkRequest>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let valid = validate_update(state.base(), body.into_inner()?)?;
    let mut patch = valid.patch;
    patch.password = hashed(&state, valid.password).await?;
    let slug = patch.slug.as_ref().map(Slug::to_string);
    let changed = state
        .service
        .update_link(auth.workspace.id, &super::link_ref(&path)?, &patch)
        .await?
        .ok_or(ApiError::NotFound("link"))?;
    match changed {
        LinkUpdate::Changed { after, .. } => Ok(ok(after.view(state.base()))),
        LinkUpdate::SlugConflict => Err(ApiError::SlugConflict(slug.unwrap_or_default())),
    }
}

#[utoipa::path(delete, path = "/api/v1/links/{link}", tag = "links", params(("link" = String, Path, description = "A link id (`link_…`) or its short code.")),
    responses((status = 200, description = "The deleted link; the redirect answers 404 at once.", body = Envelope<LinkView>)))]
async fn delete(
    state: Data<AppState>,
    auth: Authenticated,
    query: QueryParams<NoParams>,
    path: Path<String>,
) -> Result<HttpResponse, ApiError> {
    query.into_inner()?;
    let link = state
        .service
        .delete_link(auth.workspace.id, &super::link_ref(&path)?)
        .await?
        .ok_or(ApiError::NotFound("link"))?;
    Ok(ok(link.view(state.base())))
}
