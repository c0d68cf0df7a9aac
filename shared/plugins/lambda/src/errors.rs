//! Lambda API errors, classified once through the shared rules
//! ([`gannet_plugin_aws_common::ErrorCodes`]): retry (throttling, 5xx, timeouts, connection
//! failures, a conflicting update), not found (a function, alias or version), or rejected
//! (validation, permissions: the stage fails with AWS's message). Operations are named
//! `Lambda <call>`.

use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
pub(crate) use gannet_plugin_aws_common::build_error;
pub use gannet_plugin_aws_common::ApiError;
use gannet_plugin_aws_common::ErrorCodes;

/// The Lambda codes worth another try, and the one saying a thing does not exist.
const CODES: ErrorCodes = ErrorCodes {
    retry: &[
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
    ],
    not_found: &["ResourceNotFoundException"],
};

/// Turns an SDK error into an [`ApiError`].
pub(crate) fn classify<E>(operation: &'static str, err: SdkError<E>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    CODES.classify(operation, err)
}

#[cfg(test)]
mod tests {
    use gannet_plugin_aws_common::ErrorKind;

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
            assert_eq!(CODES.kind(code, status), want, "{code} {status:?}");
        }
    }
}
