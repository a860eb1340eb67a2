//! The success envelope: `{"status": "success", "success": true, "statusCode": 200, "data": …}`,
//! one shape that satisfies both shapes the API document shows.

use actix_web::HttpResponse;
use serde::Serialize;

/// The success envelope, generic over its `data`.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Envelope<T> {
    /// Always `success`.
    #[schema(value_type = String, pattern = "^success$", example = "success")]
    status: &'static str,
    /// Always true.
    success: bool,
    /// Always 200, the HTTP status.
    #[schema(example = 200)]
    status_code: u16,
    /// The payload.
    data: T,
}

impl<T> Envelope<T> {
    /// `data` in the success envelope.
    pub fn success(data: T) -> Self {
        Envelope {
            status: "success",
            success: true,
            status_code: 200,
            data,
        }
    }
}

/// A 200 response with `data` in the envelope.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(Envelope::success(data))
}
