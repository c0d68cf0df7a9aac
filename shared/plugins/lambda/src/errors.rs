//! Lambda API errors, classified once ([`classify`]): retry (throttling, 5xx, timeouts,
//! connection failures, a conflicting update), not found, or rejected (validation, permissions:
//! the stage fails with AWS's message). [`ApiError`] becomes a [`StepError`] in one place.

use aws_sdk_lambda::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use gannet_core::plugin::StepError;

/// A failed Lambda API call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Worth another try: throttling, a 5xx, a timeout, a connection failure, a conflicting
    /// update in progress.
    #[error("{operation}: {message}")]
    Retryable {
        operation: &'static str,
        message: String,
    },
    /// The function, alias or version does not exist.
    #[error("{operation}: {message}")]
    NotFound {
        operation: &'static str,
        message: String,
    },
    /// AWS refused the request; trying again will not help.
    #[error("{operation} was refused: {code}: {message}")]
    Rejected {
        operation: &'static str,
        code: String,
        message: String,
    },
}

impl From<ApiError> for StepError {
    /// The one place an AWS error becomes retry-or-fail.
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Retryable { operation, message } => StepError::Transient {
                operation: format!("Lambda {operation}"),
                source: message.into(),
            },
            other => StepError::Permanent(format!("Lambda {other}")),
        }
    }
}

/// How a service error is treated, from its code and HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Retry,
    NotFound,
    Reject,
}

/// Classifies a service error's code and HTTP status.
pub(crate) fn error_kind(code: &str, status: Option<u16>) -> ErrorKind {
    const RETRY: &[&str] = &[
        "TooManyRequestsException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "ServiceException",
        "ServiceUnavailableException",
        "InternalServerError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ResourceConflictException",
        "ResourceNotReadyException",
        "PreconditionFailedException",
        "EC2ThrottledException",
        "EC2UnexpectedException",
        "ConflictException",
    ];
    if RETRY.contains(&code) || status.is_some_and(|s| s >= 500 || s == 429) {
        ErrorKind::Retry
    } else if code == "ResourceNotFoundException" || (code.is_empty() && status == Some(404)) {
        ErrorKind::NotFound
    } else {
        ErrorKind::Reject
    }
}

/// Turns an SDK error into an [`ApiError`].
pub(crate) fn classify<E>(operation: &'static str, err: SdkError<E>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let full = DisplayErrorContext(&err).to_string();
    match &err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = err.code().unwrap_or_default().to_owned();
            let message = err.message().map_or_else(|| full.clone(), str::to_owned);
            match error_kind(&code, Some(status)) {
                ErrorKind::Retry => ApiError::Retryable {
                    operation,
                    message: format!("{code} (HTTP {status}): {message}"),
                },
                ErrorKind::NotFound => ApiError::NotFound { operation, message },
                ErrorKind::Reject => ApiError::Rejected {
                    operation,
                    code: if code.is_empty() {
                        format!("HTTP {status}")
                    } else {
                        code
                    },
                    message,
                },
            }
        }
        SdkError::DispatchFailure(d) if d.is_user() => ApiError::Rejected {
            operation,
            code: "RequestFailed".into(),
            message: full,
        },
        SdkError::ConstructionFailure(_) => ApiError::Rejected {
            operation,
            code: "InvalidRequest".into(),
            message: full,
        },
        // Timeouts, connection failures, unreadable responses.
        _ => ApiError::Retryable {
            operation,
            message: full,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_once() {
        let cases = [
            ("TooManyRequestsException", Some(429), ErrorKind::Retry),
            ("ThrottlingException", Some(400), ErrorKind::Retry),
            ("ServiceException", Some(500), ErrorKind::Retry),
            ("", Some(502), ErrorKind::Retry),
            ("", Some(503), ErrorKind::Retry),
            ("ResourceConflictException", Some(409), ErrorKind::Retry),
            ("ResourceNotReadyException", Some(502), ErrorKind::Retry),
            ("PreconditionFailedException", Some(412), ErrorKind::Retry),
            ("ResourceNotFoundException", Some(404), ErrorKind::NotFound),
            ("", Some(404), ErrorKind::NotFound),
            ("ValidationException", Some(400), ErrorKind::Reject),
            (
                "InvalidParameterValueException",
                Some(400),
                ErrorKind::Reject,
            ),
            ("AccessDeniedException", Some(403), ErrorKind::Reject),
            ("CodeStorageExceededException", Some(400), ErrorKind::Reject),
            ("UnrecognizedClientException", Some(403), ErrorKind::Reject),
        ];
        for (code, status, want) in cases {
            assert_eq!(error_kind(code, status), want, "{code} {status:?}");
        }
    }

    #[test]
    fn only_retryable_errors_retry_the_step() {
        let retry: StepError = ApiError::Retryable {
            operation: "GetFunction",
            message: "slow down".into(),
        }
        .into();
        assert!(matches!(retry, StepError::Transient { .. }), "{retry:?}");
        let refused: StepError = ApiError::Rejected {
            operation: "CreateFunction",
            code: "ValidationException".into(),
            message: "Value 'x' at 'role' failed".into(),
        }
        .into();
        match refused {
            StepError::Permanent(m) => assert_eq!(
                m,
                "Lambda CreateFunction was refused: ValidationException: Value 'x' at 'role' failed"
            ),
            other => panic!("{other:?}"),
        }
    }
}
