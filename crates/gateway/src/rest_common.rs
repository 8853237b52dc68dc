//! What every route of the REST facade shares: its state, its error (an [`ApiError`] as an
//! HTTP response), the caller its gate admitted, and how a scope and a required field are read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use thinkus_common::ApiError;
use thinkus_common::auth::{Authenticator, Principal, with_forwarded_credential};
use thinkus_common::limits::Admission;
use thinkus_common::model::Scope;

use crate::service::Gateway;

/// What the REST handlers share.
#[derive(Clone)]
pub struct RestState {
    pub gateway: Arc<Gateway>,
    pub authenticator: Arc<Authenticator>,
    /// The process's admission, shared with its gRPC services.
    pub admission: Admission,
    /// The address the facade is bound to (dev mode needs it on loopback).
    pub listener: Option<SocketAddr>,
    /// The longest a request may take, its wait for a seat included.
    pub request_timeout: Duration,
}

/// An [`ApiError`] as an HTTP response.
pub struct RestError(pub ApiError);

impl From<ApiError> for RestError {
    fn from(err: ApiError) -> Self {
        Self(err)
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let err = self.0;
        let status = StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // Internal errors keep their cause in the logs, not in the answer.
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %err.message, "internal error on the REST facade");
            "internal error".to_string()
        } else {
            thinkus_common::error::bounded_message(&err.message).into_owned()
        };
        let body = json!({"error": {"code": format!("{:?}", err.code), "message": message}});
        let mut response = (status, Json(body)).into_response();
        if let Some(after) = err.retry_after {
            let seconds = after.as_secs_f64().ceil().max(1.0) as u64;
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert("retry-after", value);
            }
        }
        response
    }
}

/// The caller of a request, as the facade's gate authenticated and admitted it
/// ([`crate::rest`]'s gate; the scope is authorised by each handler, once it is read).
pub struct Caller(pub Principal);

impl FromRequestParts<RestState> for Caller {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, _state: &RestState) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Principal>() {
            Some(principal) => Ok(Caller(principal.clone())),
            None => Err(ApiError::internal("a REST route is outside the facade's gate").into()),
        }
    }
}

impl Caller {
    /// Puts the scope in the caller's tenant (or the one it names, for a service key) and
    /// checks the caller may act for its user.
    pub fn allow(&self, scope: &mut Scope) -> Result<(), ApiError> {
        self.0.authorize(scope)
    }

    /// Runs `work` with the caller's credential forwarded to the services it calls.
    pub async fn forward<F: Future>(&self, work: F) -> F::Output {
        with_forwarded_credential(self.0.credential.clone(), work).await
    }
}

pub(crate) fn scope_of(
    tenant: Option<String>,
    user: Option<String>,
    role: Option<String>,
    project: Option<String>,
    session: Option<String>,
) -> Scope {
    let some = |v: Option<String>| v.filter(|s| !s.is_empty());
    Scope {
        // Empty: the caller's own tenant (`Principal::authorize` resolves it).
        tenant_id: tenant.unwrap_or_default(),
        user_id: user.unwrap_or_default(),
        role_id: role.unwrap_or_default(),
        project_id: some(project),
        session_id: some(session),
    }
}

pub(crate) fn required(value: &str, field: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(field, "is required"));
    }
    Ok(())
}
