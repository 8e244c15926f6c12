//! The one error type of the HTTP API, mapped to an HTTP status and Nakama's error body
//! `{"error","message","code"}` in exactly one place ([`ApiError::into_response`]), and every
//! domain's error turned into it here and nowhere else.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use muster_proto::api::{code, ErrorBody};

use crate::store::StoreError;

/// A failed API call. The message is shown to the client, so it never carries secrets or
/// internal detail; internal causes are logged where they are turned into `Internal`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// The resource existed and is gone for good (an expired or used-up link).
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    TooManyRequests(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unavailable(String),
    /// The client did not send its request (its body) in time.
    #[error("{0}")]
    RequestTimeout(String),
    /// Signed data that could not be read or checked, where Nakama answers DataLoss.
    #[error("{0}")]
    DataLoss(String),
    #[error("internal server error")]
    Internal,
    /// A server function's own failure (an exception in a module): 500, code 13, its message
    /// kept, as Nakama answers.
    #[error("{0}")]
    FunctionFailed(String),
}

impl ApiError {
    pub(crate) fn status_and_code(&self) -> (StatusCode, i32) {
        match self {
            ApiError::InvalidArgument(_) => (StatusCode::BAD_REQUEST, code::INVALID_ARGUMENT),
            ApiError::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, code::UNAUTHENTICATED),
            ApiError::PermissionDenied(_) => (StatusCode::FORBIDDEN, code::PERMISSION_DENIED),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, code::NOT_FOUND),
            ApiError::AlreadyExists(_) => (StatusCode::CONFLICT, code::ALREADY_EXISTS),
            ApiError::Gone(_) => (StatusCode::GONE, code::NOT_FOUND),
            ApiError::FailedPrecondition(_) => (StatusCode::BAD_REQUEST, code::FAILED_PRECONDITION),
            ApiError::TooManyRequests(_) => {
                (StatusCode::TOO_MANY_REQUESTS, code::RESOURCE_EXHAUSTED)
            }
            ApiError::PayloadTooLarge(_) => {
                (StatusCode::PAYLOAD_TOO_LARGE, code::RESOURCE_EXHAUSTED)
            }
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE),
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, code::DEADLINE_EXCEEDED),
            ApiError::DataLoss(_) => (StatusCode::INTERNAL_SERVER_ERROR, code::DATA_LOSS),
            ApiError::Internal | ApiError::FunctionFailed(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, code::INTERNAL)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = self.to_string();
        let body = ErrorBody {
            error: message.clone(),
            message,
            code,
        };
        (status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::UsernameTaken => {
                ApiError::AlreadyExists("Username is already in use.".into())
            }
            StoreError::CodeTaken => ApiError::AlreadyExists("That code is already in use.".into()),
            StoreError::LimitReached => ApiError::TooManyRequests("A limit was reached.".into()),
            StoreError::CredentialTaken => {
                ApiError::AlreadyExists("That credential is linked to another account.".into())
            }
            StoreError::NotFound => ApiError::NotFound("Account not found.".into()),
            StoreError::Closed => ApiError::Unavailable("Server is shutting down.".into()),
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "database unavailable");
                ApiError::Unavailable("The database is unavailable; try again shortly.".into())
            }
            StoreError::Database(detail) => {
                tracing::error!(%detail, "database error");
                ApiError::Internal
            }
            StoreError::Refused(_) => {
                tracing::error!(%error, "a refusal of a slice reached the edge unread");
                ApiError::Internal
            }
        }
    }
}

impl From<crate::links::LinkError> for ApiError {
    fn from(error: crate::links::LinkError) -> Self {
        use crate::links::LinkError;
        let message = error.to_string();
        match error {
            LinkError::Invalid(_) => ApiError::InvalidArgument(message),
            LinkError::Unauthenticated(_) => ApiError::Unauthenticated(message),
            LinkError::TooManyRequests(_) => ApiError::TooManyRequests(message),
            LinkError::SlugTaken => ApiError::AlreadyExists(message),
            LinkError::NotFound => ApiError::NotFound(message),
            LinkError::Gone(_) => ApiError::Gone(message),
            LinkError::NotYours => ApiError::PermissionDenied(message),
            LinkError::Unavailable(_) => ApiError::Unavailable(message),
            LinkError::Internal => ApiError::Internal,
        }
    }
}

impl From<crate::purchases::PurchaseError> for ApiError {
    fn from(error: crate::purchases::PurchaseError) -> Self {
        use crate::purchases::PurchaseError;
        let message = error.to_string();
        match error {
            PurchaseError::NotConfigured(_) | PurchaseError::Precondition(_) => {
                ApiError::FailedPrecondition(message)
            }
            PurchaseError::Invalid(_) | PurchaseError::Refused(_) => {
                ApiError::InvalidArgument(message)
            }
            PurchaseError::NotFound(_) => ApiError::NotFound(message),
            PurchaseError::Unavailable(_) => ApiError::Unavailable(message),
            PurchaseError::Store(error) => error.into(),
        }
    }
}

impl From<crate::functions::RpcError> for ApiError {
    fn from(error: crate::functions::RpcError) -> Self {
        use crate::functions::RpcCode;
        let message = error.message;
        match error.code {
            RpcCode::InvalidArgument => ApiError::InvalidArgument(message),
            RpcCode::NotFound => ApiError::NotFound(message),
            RpcCode::AlreadyExists => ApiError::AlreadyExists(message),
            RpcCode::PermissionDenied => ApiError::PermissionDenied(message),
            RpcCode::FailedPrecondition => ApiError::FailedPrecondition(message),
            RpcCode::ResourceExhausted => ApiError::TooManyRequests(message),
            RpcCode::Unavailable => ApiError::Unavailable(message),
            RpcCode::Internal => ApiError::FunctionFailed(message),
        }
    }
}

impl From<crate::storage::StorageError> for ApiError {
    fn from(error: crate::storage::StorageError) -> Self {
        use crate::storage::StorageError;
        match error {
            StorageError::Store(error) => error.into(),
            StorageError::TooManyObjects(_) => ApiError::TooManyRequests(error.to_string()),
            other => ApiError::InvalidArgument(other.to_string()),
        }
    }
}

impl From<crate::leaderboards::LeaderboardError> for ApiError {
    fn from(error: crate::leaderboards::LeaderboardError) -> Self {
        use crate::leaderboards::LeaderboardError;
        let message = error.to_string();
        match error {
            LeaderboardError::Store(error) => error.into(),
            LeaderboardError::Invalid(_) => ApiError::InvalidArgument(message),
            LeaderboardError::NotFound => ApiError::NotFound(message),
            LeaderboardError::Authoritative(_) => ApiError::PermissionDenied(message),
            LeaderboardError::Missing(_) => ApiError::NotFound(message),
            LeaderboardError::Precondition(_) => ApiError::FailedPrecondition(message),
        }
    }
}

impl From<crate::economy::EconomyError> for ApiError {
    fn from(error: crate::economy::EconomyError) -> Self {
        crate::functions::RpcError::from(error).into()
    }
}

impl From<crate::accounts::AccountError> for ApiError {
    fn from(error: crate::accounts::AccountError) -> Self {
        use crate::accounts::AccountError;
        match error {
            AccountError::Invalid(message) => ApiError::InvalidArgument(message),
            AccountError::Unauthenticated(message) => ApiError::Unauthenticated(message),
            AccountError::Banned => ApiError::PermissionDenied(AccountError::Banned.to_string()),
            AccountError::NotFound(message) => ApiError::NotFound(message),
            AccountError::AlreadyExists(message) => ApiError::AlreadyExists(message),
            AccountError::PermissionDenied(message) => ApiError::PermissionDenied(message),
            AccountError::Store(error) => error.into(),
            AccountError::NotConfigured(message) => ApiError::FailedPrecondition(message),
            AccountError::DataLoss(message) => ApiError::DataLoss(message),
            AccountError::Internal => ApiError::Internal,
        }
    }
}

impl From<crate::matches::error::MatchError> for ApiError {
    fn from(error: crate::matches::error::MatchError) -> Self {
        use crate::matches::error::MatchError;
        match error {
            MatchError::NotFound(m) | MatchError::Ended(m) => ApiError::NotFound(m),
            MatchError::BadInput(m) | MatchError::TokenSpent(m) => ApiError::InvalidArgument(m),
            MatchError::TooMany(m) => ApiError::TooManyRequests(m),
            MatchError::Forbidden(m) => ApiError::PermissionDenied(m),
            MatchError::Rejected(m) => ApiError::Unavailable(m),
        }
    }
}

impl From<crate::functions::CallError> for ApiError {
    fn from(error: crate::functions::CallError) -> Self {
        use crate::functions::CallError;
        match error {
            CallError::MissingId => ApiError::InvalidArgument("RPC ID must be set.".into()),
            CallError::NotFound => ApiError::NotFound("RPC function not found.".into()),
            CallError::Failed(error) => error.into(),
        }
    }
}

impl From<crate::chat::history::HistoryError> for ApiError {
    fn from(error: crate::chat::history::HistoryError) -> Self {
        use crate::chat::history::HistoryError;
        match error {
            HistoryError::Invalid(message) => ApiError::InvalidArgument(message),
            HistoryError::NotFound(message) => ApiError::NotFound(message),
            HistoryError::Forbidden(message) => ApiError::PermissionDenied(message),
            HistoryError::Store(error) => error.into(),
        }
    }
}
