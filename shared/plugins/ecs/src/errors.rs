//! ECS and ELBv2 API errors, classified once through the shared rules
//! ([`gannet_plugin_aws_common::ErrorCodes`]): retry (throttling, 5xx, timeouts, connection
//! failures, an update in progress), not found (a cluster, service, task set, target group,
//! listener or rule), or rejected (validation, permissions, limits: the stage fails with AWS's
//! message).

use aws_sdk_ecs::error::{ProvideErrorMetadata, SdkError};
pub(crate) use gannet_plugin_aws_common::build_error;
pub use gannet_plugin_aws_common::ApiError;
use gannet_plugin_aws_common::ErrorCodes;

/// The ECS and ELBv2 codes worth another try, and those saying a thing does not exist.
const CODES: ErrorCodes = ErrorCodes {
    retry: &[
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
    ],
    not_found: &[
        "ClusterNotFoundException",
        "ServiceNotFoundException",
        "ServiceNotActiveException",
        "TaskSetNotFoundException",
        "ResourceNotFoundException",
        "LoadBalancerNotFound",
        "TargetGroupNotFound",
        "ListenerNotFound",
        "RuleNotFound",
    ],
};

/// Turns an SDK error (of either API) into an [`ApiError`].
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
            assert_eq!(CODES.kind(code, status), want, "{code} {status:?}");
        }
    }
}
