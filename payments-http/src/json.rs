//! The JSON answers the merchant and operator APIs share: a resource, and a page of a list; and
//! the query strings the operator API reads as name-value maps.

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

/// A JSON answer: `200` with the value as `application/json` ([`json_response`]; with a
/// status before it, `(StatusCode::CREATED, Json(v))`, that status).
pub(crate) struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        json_response(StatusCode::OK, &self.0)
    }
}

/// A query string as a map from name to value (the last of a name given twice), percent- and
/// `+`-decoded as a form: what the operator API's list filters read.
pub(crate) fn query_map(raw: Option<&str>) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}
