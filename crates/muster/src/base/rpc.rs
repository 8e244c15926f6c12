//! The coded error of Nakama's convention: a gRPC status code and a message for the caller.
//! What a server function, a module's `nk` call or a world action fails with; each transport
//! maps the code to its own error (an HTTP status with Nakama's error body, a socket `error`
//! envelope), and the cluster carries it between nodes by its number.

/// The gRPC status codes a function may fail with (Nakama's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    /// Too many calls: the caller is over a rate or a quota (HTTP 429).
    ResourceExhausted,
    FailedPrecondition,
    Unavailable,
    Internal,
}

impl RpcCode {
    /// The gRPC code number.
    pub fn grpc(self) -> i32 {
        match self {
            RpcCode::InvalidArgument => 3,
            RpcCode::NotFound => 5,
            RpcCode::AlreadyExists => 6,
            RpcCode::PermissionDenied => 7,
            RpcCode::ResourceExhausted => 8,
            RpcCode::FailedPrecondition => 9,
            RpcCode::Internal => 13,
            RpcCode::Unavailable => 14,
        }
    }

    /// The code of gRPC code number `code`, if a function may fail with it.
    pub fn from_grpc(code: i32) -> Option<RpcCode> {
        Some(match code {
            3 => RpcCode::InvalidArgument,
            5 => RpcCode::NotFound,
            6 => RpcCode::AlreadyExists,
            7 => RpcCode::PermissionDenied,
            8 => RpcCode::ResourceExhausted,
            9 => RpcCode::FailedPrecondition,
            13 => RpcCode::Internal,
            14 => RpcCode::Unavailable,
            _ => return None,
        })
    }

    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            RpcCode::InvalidArgument => "invalid_argument",
            RpcCode::NotFound => "not_found",
            RpcCode::AlreadyExists => "already_exists",
            RpcCode::PermissionDenied => "permission_denied",
            RpcCode::ResourceExhausted => "resource_exhausted",
            RpcCode::FailedPrecondition => "failed_precondition",
            RpcCode::Unavailable => "unavailable",
            RpcCode::Internal => "internal",
        }
    }
}

/// A function's failure: a code and a message shown to the caller (never internal detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: RpcCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: RpcCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> RpcError {
        RpcError::new(RpcCode::InvalidArgument, message)
    }

    pub fn failed_precondition(message: impl Into<String>) -> RpcError {
        RpcError::new(RpcCode::FailedPrecondition, message)
    }

    pub fn internal() -> RpcError {
        RpcError::new(RpcCode::Internal, "internal server error")
    }
}
