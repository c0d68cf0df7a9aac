//! ECS and ELBv2 API errors, classified once ([`classify`]): retry (throttling, 5xx, timeouts,
//! connection failures, an update in progress), not found, or rejected (validation,
//! permissions, limits: the stage fails with AWS's message). [`ApiError`] becomes a
//! [`StepError`] in one place.

use aws_sdk_ecs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use gannet_core::plugin::StepError;

/// A failed ECS or ELBv2 API call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Worth another try: throttling, a 5xx, a timeout, a connection failure, an update in
    /// progress.
    #[error("{operation}: {message}")]
    Retryable {
        operation: &'static str,
        message: String,
    },
    /// The cluster, service, task set, target group, listener or rule does not exist.
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

impl ApiError {
    /// An answer that lacks what the call must return (an ARN, a task set).
    pub(crate) fn incomplete(operation: &'static str, what: &str) -> Self {
        Self::Retryable {
            operation,
            message: format!("the answer had no {what}"),
        }
    }
}

impl From<ApiError> for StepError {
    /// The one place an AWS error becomes retry-or-fail.
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Retryable { operation, message } => StepError::Transient {
                operation: operation.to_owned(),
                source: message.into(),
            },
            other => StepError::Permanent(other.to_string()),
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

/// Classifies a service error's code and HTTP status (ECS and ELBv2 codes alike).
pub(crate) fn error_kind(code: &str, status: Option<u16>) -> ErrorKind {
    const RETRY: &[&str] = &[
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalError",
        "RequestTimeout",
        "RequestTimeoutException",
        "UpdateInProgressException",
        "ResourceInUse",
        "ResourceInUseException",
    ];
    const NOT_FOUND: &[&str] = &[
        "ClusterNotFoundException",
        "ServiceNotFoundException",
        "ServiceNotActiveException",
        "TaskSetNotFoundException",
        "ResourceNotFoundException",
        "LoadBalancerNotFound",
        "TargetGroupNotFound",
        "ListenerNotFound",
        "RuleNotFound",
    ];
    if RETRY.contains(&code) || status.is_some_and(|s| s >= 500 || s == 429) {
        ErrorKind::Retry
    } else if NOT_FOUND.contains(&code) || (code.is_empty() && status == Some(404)) {
        ErrorKind::NotFound
    } else {
        ErrorKind::Reject
    }
}

/// Turns an SDK error (of either API) into an [`ApiError`].
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

/// A builder that could not build a request (a required field missing): a bug in what was
/// sent, never worth a retry.
pub(crate) fn build_error(operation: &'static str, err: impl std::fmt::Display) -> ApiError {
    ApiError::Rejected {
        operation,
        code: "InvalidRequest".into(),
        message: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_once() {
        let cases = [
            ("ThrottlingException", Some(400), ErrorKind::Retry),
            ("Throttling", Some(400), ErrorKind::Retry),
            ("ServerException", Some(500), ErrorKind::Retry),
            ("", Some(502), ErrorKind::Retry),
            ("", Some(503), ErrorKind::Retry),
            ("UpdateInProgressException", Some(400), ErrorKind::Retry),
            ("ResourceInUse", Some(400), ErrorKind::Retry),
            ("ServiceNotFoundException", Some(400), ErrorKind::NotFound),
            ("ClusterNotFoundException", Some(400), ErrorKind::NotFound),
            ("TaskSetNotFoundException", Some(400), ErrorKind::NotFound),
            ("TargetGroupNotFound", Some(400), ErrorKind::NotFound),
            ("ListenerNotFound", Some(400), ErrorKind::NotFound),
            ("", Some(404), ErrorKind::NotFound),
            ("ClientException", Some(400), ErrorKind::Reject),
            ("InvalidParameterException", Some(400), ErrorKind::Reject),
            ("AccessDeniedException", Some(400), ErrorKind::Reject),
            ("LimitExceededException", Some(400), ErrorKind::Reject),
            ("ValidationError", Some(400), ErrorKind::Reject),
            ("AccessDenied", Some(403), ErrorKind::Reject),
        ];
        for (code, status, want) in cases {
            assert_eq!(error_kind(code, status), want, "{code} {status:?}");
        }
    }

    #[test]
    fn only_retryable_errors_retry_the_step() {
        let retry: StepError = ApiError::Retryable {
            operation: "ECS DescribeServices",
            message: "slow down".into(),
        }
        .into();
        assert!(matches!(retry, StepError::Transient { .. }), "{retry:?}");
        let refused: StepError = ApiError::Rejected {
            operation: "ECS CreateTaskSet",
            code: "InvalidParameterException".into(),
            message: "5 deployments exist on the service".into(),
        }
        .into();
        match refused {
            StepError::Permanent(m) => assert_eq!(
                m,
                "ECS CreateTaskSet was refused: InvalidParameterException: 5 deployments exist on the service"
            ),
            other => panic!("{other:?}"),
        }
    }
}
