//! The JSON answers the merchant and operator APIs share: a resource, and a page of a list.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A page of a list as every list of the API answers it: `{"data", "has_more",
/// "next_cursor"}`, `has_more` exactly when there is a next cursor.
pub(crate) fn page_json<T: serde::Serialize>(
    data: Vec<T>,
    next_cursor: Option<impl std::fmt::Display>,
) -> serde_json::Value {
    serde_json::json!({
        "data": data,
        "has_more": next_cursor.is_some(),
        "next_cursor": next_cursor.map(|c| c.to_string()),
    })
}

pub(crate) fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).expect("response values are plain data");
    (status, [("content-type", "application/json")], body).into_response()
}
