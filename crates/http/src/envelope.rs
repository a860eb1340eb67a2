//! The success envelope: `{"status": "success", "success": true, "statusCode": 200, "data": …}`,
//! one shape that satisfies both shapes the API document shows.

use actix_web::HttpResponse;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<T> {
    status: &'static str,
    success: bool,
    status_code: u16,
    data: T,
}

/// A 200 response with `data` in the envelope.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(Envelope {
        status: "success",
        success: true,
        status_code: 200,
        data,
    })
}
