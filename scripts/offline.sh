# Sourced by scripts/infra-lint.sh and scripts/cdk.sh: offline_run runs a tool with a throwaway
# AWS identity and every network path closed: fake credentials, no instance metadata, no
# telemetry or version checks (SAM, CDK), and proxies pointing at a closed loopback port, so a
# tool that tried to reach AWS (or anything else) would fail loudly instead of leaving the
# machine. Nothing of the caller's environment passes; HOME is the caller's empty directory, so
# no ~/.aws, ~/.aws-sam or ~/.cdk is read or written.
#
#   offline_run PATH HOME [NAME=VALUE ...] COMMAND [ARG ...]

offline_run() {
  local path=$1 home=$2
  shift 2
  env -i \
    PATH="$path" \
    HOME="$home" \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
    AWS_EC2_METADATA_DISABLED=true \
    AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    SAM_CLI_TELEMETRY=0 \
    CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=true \
    PYTHONDONTWRITEBYTECODE=1 \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
    NO_PROXY= no_proxy= \
    "$@"
}
