//! AWS API errors, classified once ([`classify`]): retry (throttling, 5xx, timeouts,
//! connection failures, and what each service names as worth another try), not found, or
//! rejected (validation, permissions, limits: the stage fails with AWS's message). [`ApiError`]
//! becomes a [`StepError`] in one place.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use gannet_domain::ports::BoxError;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::StepError;

/// A failed AWS API call. `operation` names the service and the call, such as
/// `ECS DescribeServices` or `Lambda GetFunction`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Worth another try: throttling, a 5xx, a timeout, a connection failure, an update in
    /// progress.
    #[error("{operation}: {message}")]
    Retryable {
        operation: &'static str,
        message: String,
        /// What failed underneath (a connection error, a timeout), when there is more to say.
        #[source]
        source: Option<BoxError>,
        /// When AWS said to come back (`Retry-After`), if it did.
        retry_after: Option<GoDuration>,
    },
    /// The resource the call names does not exist.
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
        /// What failed underneath, when there is more to say than AWS's message.
        #[source]
        source: Option<BoxError>,
    },
}

impl ApiError {
    /// An answer that lacks what the call must return (an ARN, a task set, a version).
    pub fn incomplete(operation: &'static str, what: &str) -> Self {
        Self::Retryable {
            operation,
            message: format!("the answer had no {what}"),
            source: None,
            retry_after: None,
        }
    }
}

/// A retryable error's message and what lies under it, as the cause of a transient step error.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Cause {
    message: String,
    #[source]
    source: Option<BoxError>,
}

impl From<ApiError> for StepError {
    /// The one place an AWS error becomes retry-or-fail.
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Retryable {
                operation,
                message,
                source,
                retry_after,
            } => StepError::Transient {
                operation: operation.to_owned(),
                source: Box::new(Cause { message, source }),
                retry_after,
            },
            other => StepError::permanent(other),
        }
    }
}

/// How a service error is treated, from its code and HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Retry,
    NotFound,
    Reject,
}

/// The error codes one service (or a pair, such as ECS and ELBv2) names as worth another try
/// and as not found; every other code is rejected.
#[derive(Clone, Copy, Debug)]
pub struct ErrorCodes {
    pub retry: &'static [&'static str],
    pub not_found: &'static [&'static str],
}

impl ErrorCodes {
    /// Classifies a service error's code and HTTP status: a 5xx or 429 is always retried, a 404
    /// without a code is not found.
    pub fn kind(&self, code: &str, status: Option<u16>) -> ErrorKind {
        if self.retry.contains(&code) || status.is_some_and(|s| s >= 500 || s == 429) {
            ErrorKind::Retry
        } else if self.not_found.contains(&code) || (code.is_empty() && status == Some(404)) {
            ErrorKind::NotFound
        } else {
            ErrorKind::Reject
        }
    }

    /// Turns an SDK error (of any service's client) into an [`ApiError`].
    pub fn classify<E>(&self, operation: &'static str, err: SdkError<E, HttpResponse>) -> ApiError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let full = DisplayErrorContext(&err).to_string();
        match &err {
            SdkError::ServiceError(service) => {
                let status = service.raw().status().as_u16();
                let code = err.code().unwrap_or_default().to_owned();
                let message = err.message().map_or_else(|| full.clone(), str::to_owned);
                match self.kind(&code, Some(status)) {
                    ErrorKind::Retry => ApiError::Retryable {
                        operation,
                        message: format!("{code} (HTTP {status}): {message}"),
                        source: None,
                        retry_after: retry_after(service.raw()),
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
                        source: None,
                    },
                }
            }
            SdkError::DispatchFailure(d) if d.is_user() => ApiError::Rejected {
                operation,
                code: "RequestFailed".into(),
                message: err.to_string(),
                source: Some(Box::new(err)),
            },
            SdkError::ConstructionFailure(_) => build_error(operation, full),
            // Timeouts, connection failures, unreadable responses: the SDK error keeps the cause.
            _ => ApiError::Retryable {
                operation,
                message: err.to_string(),
                source: Some(Box::new(err)),
                retry_after: None,
            },
        }
    }
}

/// A `Retry-After` header in seconds, as a throttled or unavailable service may send one.
fn retry_after(response: &HttpResponse) -> Option<GoDuration> {
    let seconds: u64 = response.headers().get("retry-after")?.trim().parse().ok()?;
    Some(GoDuration::from_secs(seconds.min(3600)))
}

/// A builder that could not build a request (a required field missing): a bug in what was
/// sent, never worth a retry.
pub fn build_error(operation: &'static str, err: impl std::fmt::Display) -> ApiError {
    ApiError::Rejected {
        operation,
        code: "InvalidRequest".into(),
        message: err.to_string(),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODES: ErrorCodes = ErrorCodes {
        retry: &["ThrottlingException"],
        not_found: &["ResourceNotFoundException"],
    };

    #[test]
    fn status_decides_when_the_code_is_not_listed() {
        let cases = [
            ("ThrottlingException", Some(400), ErrorKind::Retry),
            ("", Some(500), ErrorKind::Retry),
            ("", Some(502), ErrorKind::Retry),
            ("ValidationException", Some(503), ErrorKind::Retry),
            ("SomethingElse", Some(429), ErrorKind::Retry),
            ("ResourceNotFoundException", Some(400), ErrorKind::NotFound),
            ("", Some(404), ErrorKind::NotFound),
            ("NoSuchThing", Some(404), ErrorKind::Reject),
            ("ValidationException", Some(400), ErrorKind::Reject),
            ("", None, ErrorKind::Reject),
        ];
        for (code, status, want) in cases {
            assert_eq!(CODES.kind(code, status), want, "{code} {status:?}");
        }
    }

    #[test]
    fn only_retryable_errors_retry_the_step() {
        let cases = [
            (
                ApiError::Retryable {
                    operation: "ECS DescribeServices",
                    message: "slow down".into(),
                    source: None,
                    retry_after: None,
                },
                "transient ECS DescribeServices: slow down",
            ),
            (
                ApiError::incomplete("Lambda PublishVersion", "version"),
                "transient Lambda PublishVersion: the answer had no version",
            ),
            (
                ApiError::Rejected {
                    operation: "ECS CreateTaskSet",
                    code: "InvalidParameterException".into(),
                    message: "5 deployments exist on the service".into(),
                    source: None,
                },
                "permanent ECS CreateTaskSet was refused: InvalidParameterException: 5 deployments exist on the service",
            ),
            (
                ApiError::NotFound {
                    operation: "Lambda GetAlias",
                    message: "no alias".into(),
                },
                "permanent Lambda GetAlias: no alias",
            ),
            (
                build_error("ECS RunTask", "missing field"),
                "permanent ECS RunTask was refused: InvalidRequest: missing field",
            ),
        ];
        for (err, want) in cases {
            let got = match StepError::from(err) {
                StepError::Transient {
                    operation, source, ..
                } => format!("transient {operation}: {source}"),
                StepError::Permanent(m) => format!("permanent {m}"),
            };
            assert_eq!(got, want);
        }
    }
}
