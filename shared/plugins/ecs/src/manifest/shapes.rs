//! The shapes of the two ECS manifests: the task definition (RegisterTaskDefinition's input)
//! and the service definition (the fields of an ECS `Service` PipeCD reads), with their nested
//! AWS structures. Data only; [`super::schema`] applies it.

use super::schema::{Kind, Shape};

const ANY: Kind = Kind::Enum(&[]);
const STRINGS: Kind = Kind::List(&Kind::Str);

/// A list of `shape`s.
macro_rules! list {
    ($shape:ident) => {
        Kind::List(&Kind::Shape(&$shape))
    };
}

const fn shape(members: &'static [(&'static str, Kind)]) -> Shape {
    Shape {
        members,
        dropped: &[],
        aliases: &[],
    }
}

const TAG: Shape = shape(&[("key", Kind::Str), ("value", Kind::Str)]);
const NAME_VALUE: Shape = shape(&[("name", Kind::Str), ("value", Kind::Str)]);
const SECRET: Shape = shape(&[("name", Kind::Str), ("valueFrom", Kind::Str)]);
const PLACEMENT_CONSTRAINT: Shape = shape(&[("type", ANY), ("expression", Kind::Str)]);

// ---------------------------------------------------------------- task definition

const PORT_MAPPING: Shape = shape(&[
    ("containerPort", Kind::Int),
    ("hostPort", Kind::Int),
    ("protocol", Kind::Enum(&["tcp", "udp"])),
    ("name", Kind::Str),
    ("appProtocol", ANY),
    ("containerPortRange", Kind::Str),
]);
const MOUNT_POINT: Shape = shape(&[
    ("sourceVolume", Kind::Str),
    ("containerPath", Kind::Str),
    ("readOnly", Kind::Bool),
]);
const VOLUME_FROM: Shape = shape(&[("sourceContainer", Kind::Str), ("readOnly", Kind::Bool)]);
const DEVICE: Shape = shape(&[
    ("hostPath", Kind::Str),
    ("containerPath", Kind::Str),
    ("permissions", STRINGS),
]);
const TMPFS: Shape = shape(&[
    ("containerPath", Kind::Str),
    ("size", Kind::Int),
    ("mountOptions", STRINGS),
]);
const CAPABILITIES: Shape = shape(&[("add", STRINGS), ("drop", STRINGS)]);
const LINUX_PARAMETERS: Shape = shape(&[
    ("capabilities", Kind::Shape(&CAPABILITIES)),
    ("devices", list!(DEVICE)),
    ("initProcessEnabled", Kind::Bool),
    ("sharedMemorySize", Kind::Int),
    ("tmpfs", list!(TMPFS)),
    ("maxSwap", Kind::Int),
    ("swappiness", Kind::Int),
]);
const DEPENDENCY: Shape = shape(&[("containerName", Kind::Str), ("condition", ANY)]);
const HOST_ENTRY: Shape = shape(&[("hostname", Kind::Str), ("ipAddress", Kind::Str)]);
const ULIMIT: Shape = shape(&[
    ("name", ANY),
    ("softLimit", Kind::Int),
    ("hardLimit", Kind::Int),
]);
const LOG_CONFIGURATION: Shape = shape(&[
    ("logDriver", ANY),
    ("options", Kind::Map),
    ("secretOptions", list!(SECRET)),
]);
const HEALTH_CHECK: Shape = shape(&[
    ("command", STRINGS),
    ("interval", Kind::Int),
    ("timeout", Kind::Int),
    ("retries", Kind::Int),
    ("startPeriod", Kind::Int),
]);
const SYSTEM_CONTROL: Shape = shape(&[("namespace", Kind::Str), ("value", Kind::Str)]);
const RESOURCE_REQUIREMENT: Shape = shape(&[("value", Kind::Str), ("type", ANY)]);
const TYPE_VALUE: Shape = shape(&[("value", Kind::Str), ("type", ANY)]);
const FIRELENS: Shape = shape(&[("type", ANY), ("options", Kind::Map)]);
const REPOSITORY_CREDENTIALS: Shape = shape(&[("credentialsParameter", Kind::Str)]);
const RESTART_POLICY: Shape = shape(&[
    ("enabled", Kind::Bool),
    ("ignoredExitCodes", Kind::List(&Kind::Int)),
    ("restartAttemptPeriod", Kind::Int),
]);

/// A container in a task definition.
pub(crate) const CONTAINER: Shape = shape(&[
    ("name", Kind::Str),
    ("image", Kind::Str),
    (
        "repositoryCredentials",
        Kind::Shape(&REPOSITORY_CREDENTIALS),
    ),
    ("cpu", Kind::Int),
    ("memory", Kind::Int),
    ("memoryReservation", Kind::Int),
    ("links", STRINGS),
    ("portMappings", list!(PORT_MAPPING)),
    ("essential", Kind::Bool),
    ("restartPolicy", Kind::Shape(&RESTART_POLICY)),
    ("entryPoint", STRINGS),
    ("command", STRINGS),
    ("environment", list!(NAME_VALUE)),
    ("environmentFiles", list!(TYPE_VALUE)),
    ("mountPoints", list!(MOUNT_POINT)),
    ("volumesFrom", list!(VOLUME_FROM)),
    ("linuxParameters", Kind::Shape(&LINUX_PARAMETERS)),
    ("secrets", list!(SECRET)),
    ("dependsOn", list!(DEPENDENCY)),
    ("startTimeout", Kind::Int),
    ("stopTimeout", Kind::Int),
    ("versionConsistency", ANY),
    ("hostname", Kind::Str),
    ("user", Kind::Str),
    ("workingDirectory", Kind::Str),
    ("disableNetworking", Kind::Bool),
    ("privileged", Kind::Bool),
    ("readonlyRootFilesystem", Kind::Bool),
    ("dnsServers", STRINGS),
    ("dnsSearchDomains", STRINGS),
    ("extraHosts", list!(HOST_ENTRY)),
    ("dockerSecurityOptions", STRINGS),
    ("interactive", Kind::Bool),
    ("pseudoTerminal", Kind::Bool),
    ("dockerLabels", Kind::Map),
    ("ulimits", list!(ULIMIT)),
    ("logConfiguration", Kind::Shape(&LOG_CONFIGURATION)),
    ("healthCheck", Kind::Shape(&HEALTH_CHECK)),
    ("systemControls", list!(SYSTEM_CONTROL)),
    ("resourceRequirements", list!(RESOURCE_REQUIREMENT)),
    ("firelensConfiguration", Kind::Shape(&FIRELENS)),
    ("credentialSpecs", STRINGS),
]);

const HOST_VOLUME: Shape = shape(&[("sourcePath", Kind::Str)]);
const DOCKER_VOLUME: Shape = shape(&[
    ("scope", ANY),
    ("autoprovision", Kind::Bool),
    ("driver", Kind::Str),
    ("driverOpts", Kind::Map),
    ("labels", Kind::Map),
]);
const EFS_AUTHORIZATION: Shape = shape(&[("accessPointId", Kind::Str), ("iam", ANY)]);
const EFS_VOLUME: Shape = shape(&[
    ("fileSystemId", Kind::Str),
    ("rootDirectory", Kind::Str),
    ("transitEncryption", ANY),
    ("transitEncryptionPort", Kind::Int),
    ("authorizationConfig", Kind::Shape(&EFS_AUTHORIZATION)),
]);
const FSX_AUTHORIZATION: Shape =
    shape(&[("credentialsParameter", Kind::Str), ("domain", Kind::Str)]);
const FSX_VOLUME: Shape = shape(&[
    ("fileSystemId", Kind::Str),
    ("rootDirectory", Kind::Str),
    ("authorizationConfig", Kind::Shape(&FSX_AUTHORIZATION)),
]);
const VOLUME: Shape = shape(&[
    ("name", Kind::Str),
    ("host", Kind::Shape(&HOST_VOLUME)),
    ("dockerVolumeConfiguration", Kind::Shape(&DOCKER_VOLUME)),
    ("efsVolumeConfiguration", Kind::Shape(&EFS_VOLUME)),
    (
        "fsxWindowsFileServerVolumeConfiguration",
        Kind::Shape(&FSX_VOLUME),
    ),
    ("configuredAtLaunch", Kind::Bool),
]);
const PROXY: Shape = shape(&[
    ("type", ANY),
    ("containerName", Kind::Str),
    ("properties", list!(NAME_VALUE)),
]);
const ACCELERATOR: Shape = shape(&[("deviceName", Kind::Str), ("deviceType", Kind::Str)]);
const EPHEMERAL_STORAGE: Shape = shape(&[("sizeInGiB", Kind::Int)]);
const RUNTIME_PLATFORM: Shape = shape(&[("cpuArchitecture", ANY), ("operatingSystemFamily", ANY)]);

/// The network modes a task definition may name.
pub(crate) const NETWORK_MODES: &[&str] = &["bridge", "host", "awsvpc", "none"];
/// Where a task definition may run.
pub(crate) const COMPATIBILITIES: &[&str] = &["EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES"];

/// A task definition file: RegisterTaskDefinition's input.
pub(crate) const TASK_DEFINITION: Shape = Shape {
    members: &[
        ("family", Kind::Str),
        ("taskRoleArn", Kind::Str),
        ("executionRoleArn", Kind::Str),
        ("networkMode", Kind::Enum(NETWORK_MODES)),
        ("containerDefinitions", list!(CONTAINER)),
        ("volumes", list!(VOLUME)),
        ("placementConstraints", list!(PLACEMENT_CONSTRAINT)),
        (
            "requiresCompatibilities",
            Kind::List(&Kind::Enum(COMPATIBILITIES)),
        ),
        ("cpu", Kind::Str),
        ("memory", Kind::Str),
        ("tags", list!(TAG)),
        ("pidMode", ANY),
        ("ipcMode", ANY),
        ("proxyConfiguration", Kind::Shape(&PROXY)),
        ("inferenceAccelerators", list!(ACCELERATOR)),
        ("ephemeralStorage", Kind::Shape(&EPHEMERAL_STORAGE)),
        ("runtimePlatform", Kind::Shape(&RUNTIME_PLATFORM)),
        ("enableFaultInjection", Kind::Bool),
    ],
    dropped: &[
        "taskDefinitionArn",
        "revision",
        "status",
        "requiresAttributes",
        "compatibilities",
        "registeredAt",
        "registeredBy",
        "deregisteredAt",
        "deleteRequestedAt",
    ],
    aliases: &[],
};

// ---------------------------------------------------------------- service definition

const DEPLOYMENT_CONTROLLER: Shape =
    shape(&[("type", Kind::Enum(&["ECS", "CODE_DEPLOY", "EXTERNAL"]))]);
const CIRCUIT_BREAKER: Shape = shape(&[("enable", Kind::Bool), ("rollback", Kind::Bool)]);
const ALARMS: Shape = shape(&[
    ("alarmNames", STRINGS),
    ("enable", Kind::Bool),
    ("rollback", Kind::Bool),
]);
const DEPLOYMENT_CONFIGURATION: Shape = shape(&[
    ("maximumPercent", Kind::Int),
    ("minimumHealthyPercent", Kind::Int),
    ("deploymentCircuitBreaker", Kind::Shape(&CIRCUIT_BREAKER)),
    ("alarms", Kind::Shape(&ALARMS)),
]);
const AWSVPC: Shape = shape(&[
    ("subnets", STRINGS),
    ("securityGroups", STRINGS),
    ("assignPublicIp", Kind::Enum(&["ENABLED", "DISABLED"])),
]);
const NETWORK_CONFIGURATION: Shape = shape(&[("awsvpcConfiguration", Kind::Shape(&AWSVPC))]);
const SERVICE_REGISTRY: Shape = shape(&[
    ("registryArn", Kind::Str),
    ("port", Kind::Int),
    ("containerName", Kind::Str),
    ("containerPort", Kind::Int),
]);
const LOAD_BALANCER: Shape = shape(&[
    ("targetGroupArn", Kind::Str),
    ("loadBalancerName", Kind::Str),
    ("containerName", Kind::Str),
    ("containerPort", Kind::Int),
]);
const PLACEMENT_STRATEGY: Shape = shape(&[("type", ANY), ("field", Kind::Str)]);
const CAPACITY_PROVIDER: Shape = shape(&[
    ("capacityProvider", Kind::Str),
    ("weight", Kind::Int),
    ("base", Kind::Int),
]);

/// The launch types.
pub(crate) const LAUNCH_TYPES: &[&str] = &["EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES"];

/// A service definition file: the fields of an ECS service PipeCD reads.
pub(crate) const SERVICE: Shape = Shape {
    members: &[
        ("clusterArn", Kind::Str),
        ("serviceName", Kind::Str),
        ("desiredCount", Kind::Int),
        ("deploymentController", Kind::Shape(&DEPLOYMENT_CONTROLLER)),
        (
            "deploymentConfiguration",
            Kind::Shape(&DEPLOYMENT_CONFIGURATION),
        ),
        ("schedulingStrategy", Kind::Enum(&["REPLICA", "DAEMON"])),
        ("enableECSManagedTags", Kind::Bool),
        ("enableExecuteCommand", Kind::Bool),
        (
            "propagateTags",
            Kind::Enum(&["TASK_DEFINITION", "SERVICE", "NONE"]),
        ),
        ("launchType", Kind::Enum(LAUNCH_TYPES)),
        ("platformVersion", Kind::Str),
        ("networkConfiguration", Kind::Shape(&NETWORK_CONFIGURATION)),
        ("serviceRegistries", list!(SERVICE_REGISTRY)),
        ("loadBalancers", list!(LOAD_BALANCER)),
        ("placementConstraints", list!(PLACEMENT_CONSTRAINT)),
        ("placementStrategy", list!(PLACEMENT_STRATEGY)),
        ("healthCheckGracePeriodSeconds", Kind::Int),
        ("roleArn", Kind::Str),
        ("tags", list!(TAG)),
        ("capacityProviderStrategy", list!(CAPACITY_PROVIDER)),
        ("taskDefinition", Kind::Str),
    ],
    dropped: &[
        "serviceArn",
        "status",
        "runningCount",
        "pendingCount",
        "events",
        "deployments",
        "taskSets",
        "createdAt",
        "createdBy",
        "platformFamily",
        "availabilityZoneRebalancing",
    ],
    aliases: &[("cluster", "clusterArn"), ("role", "roleArn")],
};
