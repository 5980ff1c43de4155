//! Every code af can end with. `docs/errors.md` is rendered from this table by
//! [`super::render_markdown`]: after adding or changing a code, run
//! `AF_BLESS=1 cargo test -p af-policy --test generated_docs` to rewrite it; without `AF_BLESS`
//! that test fails while the two differ. Codes are stable: never renumber or reuse one.

use super::{ErrorCode, ExitStatus};

macro_rules! catalogue {
    ($($name:ident = $code:literal, $exit:ident, $meaning:literal, $next:literal;)+) => {
        /// The codes, by name.
        pub mod codes {
            use super::{ErrorCode, ExitStatus};
            $(
                #[doc = $meaning]
                pub static $name: ErrorCode = ErrorCode {
                    code: $code,
                    meaning: $meaning,
                    next: $next,
                    exit: ExitStatus::$exit,
                };
            )+
        }

        /// Every code, in documentation order.
        pub static CATALOGUE: &[&ErrorCode] = &[$(&codes::$name),+];
    };
}

catalogue! {
    MAN_NOT_FOUND = "AF-MAN-001", Usage,
        "No af.yaml was found in this directory or any parent.",
        "Run af in a repository that has an af.yaml, or pass --file PATH.";
    MAN_UNREADABLE = "AF-MAN-002", Usage,
        "The manifest exists but could not be read.",
        "Check the file's permissions and that it is UTF-8 text.";
    MAN_TOO_LARGE = "AF-MAN-003", Usage,
        "The manifest is larger than 1 MiB.",
        "Keep af.yaml small; move fixtures and descriptions into files it names.";
    MAN_SYNTAX = "AF-MAN-004", Usage,
        "The manifest is not valid YAML.",
        "Fix the YAML at the line and column shown.";
    MAN_ALIAS = "AF-MAN-005", Usage,
        "The manifest uses a YAML anchor or alias, which af does not accept.",
        "Write the value out in full where the alias was.";
    MAN_UNKNOWN_KEY = "AF-MAN-006", Usage,
        "The manifest has a key af does not know.",
        "Remove the key or correct its spelling; `af schema` prints every key af knows.";
    MAN_WRONG_TYPE = "AF-MAN-007", Usage,
        "A value in the manifest has the wrong type or an invalid value.",
        "Give the value the type shown; `af schema` prints the expected types.";
    MAN_BAD_NAME = "AF-MAN-008", Usage,
        "A name in the manifest is not a DNS label.",
        "Use 1 to 63 lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen.";
    MAN_CYCLE = "AF-MAN-009", Usage,
        "The services' depends_on form a cycle.",
        "Remove one of the dependencies named so that the services can start in order.";
    MAN_MISSING_DEPENDENCY = "AF-MAN-010", Usage,
        "A service depends on a service the manifest does not declare.",
        "Declare the service or remove it from depends_on.";
    MAN_BAD_RULE = "AF-MAN-011", Usage,
        "An egress rule cannot be used as written.",
        "Fix the rule as described; `af net explain METHOD URL` shows how rules decide.";
    MAN_VERSION = "AF-MAN-012", Usage,
        "The manifest's version is not one this build reads.",
        "Set version: 1.";
    MAN_DUPLICATE = "AF-MAN-013", Usage,
        "Two entries in the manifest share a name.",
        "Give each service a unique name.";
    MAN_MISSING_KEY = "AF-MAN-014", Usage,
        "A required key is missing from the manifest.",
        "Add the key shown.";
    MAN_CAPABILITY = "AF-MAN-015", Usage,
        "A service asks for a capability that would let it go around the sidecar or act on the host.",
        "Remove it from the service's capabilities; every service runs with every capability dropped but those it names.";
    SCH_UNSATISFIABLE = "AF-SCH-001", Placement,
        "No runtime target satisfies a placement requirement.",
        "Declare a target under runtime.targets carrying that tag, or relax runtime.requires. Nothing was created.";
    SCH_DUPLICATE_TARGET = "AF-SCH-002", Placement,
        "Two runtime targets share a name.",
        "Give each target under runtime.targets a unique name.";
    SCH_SHARED_CONTEXT = "AF-SCH-003", Placement,
        "Two runtime targets resolve to the same cluster context.",
        "Merge the two targets or point one at another kubeconfig_context.";
    SCH_LOCALHOST_DOMAIN = "AF-SCH-004", Placement,
        "A Kubernetes target's domain is still localhost.",
        "Set the target's domain to one the cluster's ingress serves, or remove it to create no ingress.";
    SCH_UNKNOWN_PROVIDER = "AF-SCH-005", Placement,
        "The runtime provider is not one this build has.",
        "Use one of the providers listed.";
    SCH_PROVIDER_UNAVAILABLE = "AF-SCH-006", Placement,
        "The runtime provider is known but refuses every time: for ecs, with the report of the thirteen egress paths out of a Fargate task and what closes each.",
        "Use provider: kubernetes against an EKS cluster, where the containment probe runs; `af ecs report` shows the report.";
    SCH_NAMESPACE_PREFIX = "AF-SCH-007", Placement,
        "A Kubernetes namespace prefix cannot begin a namespace name.",
        "Use 1 to 33 lower-case letters, digits and hyphens, starting with a letter, such as af-env-.";
    SCH_REGION_NOT_ALLOWED = "AF-SCH-008", Placement,
        "The organization policy does not allow the region the environment's target is in.",
        "Place the environment on a target whose region the policy's allowed_regions names. Nothing was created.";
    SCH_REGION_UNKNOWN = "AF-SCH-009", Placement,
        "An organization policy restricts regions, but the environment's target carries no region tag, so it cannot be judged.",
        "Give the target a region tag (tags: {region: ...}) or place the environment on a target that has one. Nothing was created.";
    SCH_ORG_POLICY = "AF-SCH-010", Usage,
        "The organization policy file could not be read or is not valid as written.",
        "Fix the file at the line and column shown (it holds allowed_regions only), or point AF_ORG_POLICY at the right file.";
    SCH_ECS_NETWORK = "AF-SCH-011", Usage,
        "The AF_ECS_* variables do not describe one network.",
        "Set all six of AF_ECS_REGION, AF_ECS_CLUSTER, AF_ECS_VPC_ID, AF_ECS_VPC_CIDR, AF_ECS_SUBNET_IDS and AF_ECS_SUBNET_CIDRS (the last two comma separated, in matching order), or none.";
    SCH_ECS_DOMAIN = "AF-SCH-012", Placement,
        "A host the egress catalogue declares cannot be written as a Route 53 Resolver DNS Firewall domain.",
        "Write the rule's host as a name or as *. followed by a name; a DNS Firewall domain holds a star only at its front.";
    SCH_RULE_GROUP_UNREADABLE = "AF-SCH-013", Usage,
        "The DNS Firewall rule group file could not be read as the documented JSON.",
        "Give FirewallRules, DomainLists and FirewallFailOpen as docs/ecs.md shows, every rule's list among DomainLists.";
    SCH_RULE_GROUP_ALLOW_ALL = "AF-SCH-014", Placement,
        "The rule group allows every domain at a lower priority number than its terminal block, so it blocks nothing.",
        "Remove the ALLOW on * or give the allowed names their own list; the BLOCK on * must be the only rule matching every domain.";
    SCH_RULE_GROUP_TERMINAL = "AF-SCH-015", Placement,
        "The rule group's last rule by priority is not a BLOCK on every domain.",
        "Give the BLOCK rule on a list holding * the highest priority number in the group.";
    SCH_RULE_GROUP_SHARED_LAST = "AF-SCH-016", Placement,
        "Two rules of the rule group share the last priority, so no rule is the last one.",
        "Give the terminal BLOCK on * a priority number no other rule has, above every other.";
    SCH_RULE_GROUP_STAR = "AF-SCH-017", Placement,
        "A domain in the rule group's lists has a star somewhere other than its front.",
        "Write the domain as a name or as *. followed by a name.";
    SCH_RULE_GROUP_FAIL_OPEN = "AF-SCH-018", Placement,
        "The rule group is checked with DNS Firewall fail-open enabled, so a query goes through whenever the firewall does not answer.",
        "Set FirewallFailOpen to DISABLED for the VPC (UpdateFirewallConfig).";
    SCH_ECS_PLAN_UNWRITABLE = "AF-SCH-019", Usage,
        "The file --plan names could not be written.",
        "Name a file in a directory that exists and that af may write.";
    INIT_NO_COMPOSE = "AF-INI-001", Usage,
        "af init found no Compose file to start from.",
        "Run af init in the directory of your compose.yaml or docker-compose.yml, or name it with --from FILE.";
    INIT_BAD_COMPOSE = "AF-INI-002", Usage,
        "The Compose file could not be read as Compose, so nothing was written.",
        "Check that docker compose config reads it; af reads one file, without include or extends.";
    INIT_EXISTS = "AF-INI-003", Usage,
        "af.yaml exists already, and af init does not overwrite it, so nothing was written.",
        "Run af init --force to replace it (the difference is shown first), or edit af.yaml yourself.";
    INIT_WOULD_NOT_VALIDATE = "AF-INI-004", Usage,
        "The af.yaml af init would write does not pass af validate, so nothing was written.",
        "Read the problem shown; change the Compose file where it names, and run af init again.";
    RUN_DOCKER_UNREACHABLE = "AF-RUN-001", Runtime,
        "The Docker daemon could not be reached.",
        "Start Docker (or set DOCKER_HOST) and run `af doctor`.";
    RUN_CLUSTER_UNREACHABLE = "AF-RUN-002", Runtime,
        "The cluster could not be reached, or its API server refused a request af needs.",
        "Check the kubeconfig context named (KUBECONFIG, kubeconfig_context) and that it may manage namespaces.";
    RUN_IMAGE_BUILD = "AF-RUN-010", Runtime,
        "An image could not be built.",
        "Read the build log lines shown, fix the Dockerfile or context, and run af up again.";
    RUN_IMAGE_PUSH = "AF-RUN-011", Runtime,
        "An image could not be pushed to the registry AF_IMAGE_REPOSITORY names, so nothing was created on the cluster.",
        "Check that the registry answers from this machine's Docker daemon and that `docker login` holds credentials for it that may push.";
    RUN_IMAGE_PULL = "AF-RUN-012", Runtime,
        "The cluster's nodes could not pull an image of the environment.",
        "Check that the nodes reach the registry and that the pull credentials (AF_IMAGE_PULL_CREDENTIALS) may read the image named.";
    RUN_NO_REGISTRY = "AF-RUN-013", Runtime,
        "This cluster's nodes pull their images from a registry, and none is named, so nothing was created.",
        "Set AF_IMAGE_REPOSITORY to a repository the nodes pull from (registry.example.com/team/af), or AF_KUBE_IMAGES=daemon, k3d or kind if the nodes get images that way.";
    RUN_IMAGE_TOOL = "AF-RUN-014", Runtime,
        "The tool that copies images into this cluster's nodes (k3d or kind) could not be run, or does not know the cluster, so nothing was created.",
        "Install the tool the context names and check `k3d cluster list` or `kind get clusters`, or push through a registry (AF_KUBE_IMAGES=registry, AF_IMAGE_REPOSITORY).";
    RUN_IMAGE_MISSING = "AF-RUN-015", Runtime,
        "A service's prebuilt image (image: in af.yaml) is not on this machine's Docker daemon and could not be pulled, so nothing was started.",
        "Check the reference, pull it yourself (docker pull) or run `docker login` for its registry, and run af up again.";
    RUN_ENV_FILE = "AF-RUN-016", Usage,
        "A file a service's env_file names could not be read as NAME=value lines, so nothing was started.",
        "Create the file next to af.yaml (it is read relative to it) or fix the line named, or take it out of env_file.";
    RUN_NOT_READY = "AF-RUN-020", Runtime,
        "A service did not become ready in time.",
        "Read the service's last log lines shown; raise health_timeout if it is only slow.";
    RUN_EXITED = "AF-RUN-021", Runtime,
        "A service exited while the environment was starting.",
        "Read the service's last log lines shown and run `af logs SERVICE`.";
    RUN_MIGRATION = "AF-RUN-022", Runtime,
        "A migration failed, so its service was not started.",
        "Fix the migration and run af up again; migrations are never retried.";
    RUN_TEARDOWN_INCOMPLETE = "AF-RUN-030", TeardownIncomplete,
        "Teardown finished but could not remove everything.",
        "Remove the objects named by hand, or run af down again.";
    RUN_NO_ENVIRONMENT = "AF-RUN-031", Runtime,
        "No environment with this id exists on the runtime.",
        "Run af up first, or pass the right --env.";
    RUN_INTERRUPTED = "AF-RUN-032", Runtime,
        "af up was interrupted (Ctrl-C) and stopped between two steps; what it had made is left in place.",
        "Run af down to remove it, or af up to finish it.";
    RUN_NOT_CONTAINING = "AF-RUN-043", Runtime,
        "The runtime does not contain the environment: a probe reached the outside without the sidecar.",
        "Use a runtime that enforces network isolation; no service was started.";
    RUN_UNSUPPORTED = "AF-RUN-044", Runtime,
        "This runtime cannot do what was asked.",
        "Use the local runtime for this command.";
    RUN_NOT_OURS = "AF-RUN-045", Runtime,
        "An object with af's name exists but af did not create it.",
        "Remove or rename that object yourself, or choose another --env; af touched nothing.";
    RUN_INBOX_TIMEOUT = "AF-RUN-050", Runtime,
        "No captured message matched before the timeout.",
        "Run `af inbox list` to see what arrived, or raise --timeout.";
    RUN_WEBHOOK = "AF-RUN-051", Usage,
        "The webhook could not be built or delivered.",
        "Check the provider, event and --set values; `af webhook trigger --help` lists them.";
    RUN_MODES_INPUT = "AF-RUN-052", Usage,
        "A file an egress rule names (fixtures or openapi) could not be read or parsed.",
        "Fix the path (relative to af.yaml) or the file's YAML or JSON; nothing was created.";
    RUN_TRUST = "AF-RUN-053", Runtime,
        "The environment's certificate authority or CA bundle could not be made.",
        "Check that this machine's CA certificates are readable (/etc/ssl/certs) and run af up again.";
    RUN_INBOX_NO_MESSAGE = "AF-RUN-054", NotFound,
        "No captured message has the number asked for.",
        "Run `af inbox list` to see the messages kept and their numbers.";
    RUN_UPSTREAM_ROOTS = "AF-RUN-055", Usage,
        "A file egress.upstream_roots names could not be read or holds no X.509 certificate in PEM.",
        "Name the CA's PEM certificate file, relative to af.yaml; nothing was created.";
    RUN_UI = "AF-RUN-062", Runtime,
        "af ui could not serve its page on 127.0.0.1.",
        "Pass another --port, or leave --port out to take a free one.";
    RUN_OUTPUT_FILE = "AF-RUN-060", Usage,
        "A file af was asked to write could not be written.",
        "Check that its directory exists and is writable, or name another path; nothing else was changed.";
    RUN_SUGGEST = "AF-RUN-061", Runtime,
        "af could not make egress rules that decide what the journal shows.",
        "Report this with `af net log -o json`; write the rule by hand meanwhile (`af net explain` shows how a request is decided).";
    NET_CONFIG = "AF-NET-001", Network,
        "The sidecar's configuration is invalid, so it did not start.",
        "Fix the field named in the sidecar configuration.";
    NET_BIND = "AF-NET-002", Network,
        "The sidecar could not listen on an address.",
        "Free the address or configure another one.";
    NET_JOURNAL = "AF-NET-003", Network,
        "The sidecar's journal directory cannot be used.",
        "Point journal.dir at a writable directory.";
    NET_HEAD_TOO_LARGE = "AF-NET-004", Network,
        "The request head is larger than the sidecar reads (too many bytes or too many header fields).",
        "Send fewer or smaller headers, or raise limits.max_header_bytes or limits.max_headers in the sidecar configuration.";
    NET_HEADER_TIMEOUT = "AF-NET-005", Network,
        "The client did not send a whole request head in time.",
        "Send the request head at once, or raise limits.header_read_timeout_ms in the sidecar configuration.";
    NET_BAD_PORT = "AF-NET-006", Network,
        "The request names a port that is not a number from 1 to 65535.",
        "Write the port as plain digits from 1 to 65535, or leave it out for the scheme's default.";
    NET_CONFIG_VERSION = "AF-NET-007", Network,
        "The sidecar's configuration was written for another version of the sidecar, so it did not start.",
        "Run `af up` with the af that built this sidecar; it writes the version the sidecar reads.";
    NET_BLOCKED = "AF-NET-010", Network,
        "The request was refused by the egress catalogue.",
        "Run `af net explain METHOD URL` to see which rule decided, and add a rule to allow it.";
    NET_GUARD = "AF-NET-011", Network,
        "The destination resolved to an address the sidecar never dials.",
        "Name the exact IP address in an egress rule if this destination is intended.";
    NET_MODE_UNSERVED = "AF-NET-012", Network,
        "The request's mode is not served by this sidecar.",
        "Set the rule to allow or block, or upgrade the sidecar.";
    NET_UPSTREAM = "AF-NET-013", Network,
        "The upstream could not be reached or failed.",
        "Check that the upstream is up; `af net log` shows the error.";
    NET_CONNECTION_LIMIT = "AF-NET-014", Network,
        "The sidecar is at its connection limit and refused a new connection.",
        "Raise limits.max_connections in the sidecar configuration, or close idle connections.";
    NET_NO_SNI = "AF-NET-015", Network,
        "A TLS connection named no server, so it could not be decided.",
        "Connect by host name, or through the proxy on port 3128.";
    NET_NOT_PROXY_REQUEST = "AF-NET-016", Network,
        "A request reached the proxy port without an absolute URL.",
        "This is a forward proxy: send absolute-form requests or CONNECT.";
    NET_BAD_REQUEST = "AF-NET-017", Network,
        "The request could not be understood.",
        "Send a well-formed HTTP/1.1 request.";
    NET_UPSTREAM_LIMIT = "AF-NET-018", Network,
        "The sidecar holds as many upstream connections as it may, so this one was not opened.",
        "Retry shortly, or raise limits.max_upstream_connections in the sidecar configuration.";
    NET_DIAL_DEADLINE = "AF-NET-019", Network,
        "No address of the upstream answered within the dial deadline.",
        "Check that the upstream is up and its addresses are reachable, or raise limits.dial_timeout_ms.";
    NET_UNAUTHORIZED = "AF-NET-020", Network,
        "The admin API refused a request without the right token.",
        "Send the environment's admin token as a Bearer token.";
    NET_DELIVERY = "AF-NET-023", Network,
        "The sidecar could not deliver a request to a service inside the environment.",
        "Check the service name, port and path, and that the service is up with `af status`.";
    NET_ADMIN_BAD_REQUEST = "AF-NET-021", Network,
        "The admin API could not understand a request.",
        "Correct the query parameter named.";
    NET_ADMIN_UNREACHABLE = "AF-NET-022", Network,
        "The sidecar's admin API could not be reached.",
        "Check that the environment is up with `af status`.";
    NET_DNS_CONFIG = "AF-NET-030", Network,
        "The DNS server's configuration is invalid.",
        "Fix the DNS field named in the sidecar configuration.";
    NET_BAD_URL = "AF-NET-031", Usage,
        "The URL could not be understood.",
        "Give an absolute URL such as https://api.example.com/v1/path, or for CONNECT an authority such as api.example.com:443.";
    NET_DNS_STOPPED = "AF-NET-032", Network,
        "The sidecar's DNS server stopped on its own.",
        "Restart the sidecar; if it repeats, report it with the sidecar's log.";
    NET_CAPTURE_NO_HANDLER = "AF-NET-040", Network,
        "The host is under capture but no provider handler answers this request.",
        "Name the host exactly in its capture rule to record any request, or mock it.";
    NET_CAPTURE_PAYLOAD = "AF-NET-041", Network,
        "The captured request's payload is not what the provider accepts.",
        "Fix the payload named; the real provider would refuse it too.";
    NET_BODY_TOO_LARGE = "AF-NET-042", Network,
        "The request body is larger than the mode reads.",
        "Send a smaller body, or set the host to allow.";
    NET_LIVE_CREDENTIAL = "AF-NET-043", Network,
        "The request carried a live-looking credential, so it was refused and not recorded.",
        "Use the provider's test key in the environment; live keys never leave it.";
    NET_SANDBOX_CREDENTIAL = "AF-NET-044", Network,
        "The host is in sandbox mode but no test credential is configured for it.",
        "Set the environment variable the rule's credential names before af up.";
    NET_CLIENT_REJECTED_CERT = "AF-NET-045", Network,
        "The client refused the environment's certificate (it pins certificates or lacks the CA).",
        "Set this host to allow so it is tunnelled untouched, or trust the environment CA.";
    NET_INTERCEPT = "AF-NET-046", Network,
        "The TLS connection could not be opened for interception.",
        "`af net log` shows the error; set the host to allow to tunnel it untouched.";
    NET_SMTP = "AF-NET-047", Network,
        "The SMTP listener refused a mail.",
        "Send a well-formed message with at least one recipient.";
    NET_RATE_LIMITED = "AF-NET-048", Network,
        "A request went past its egress rule's rate_limit and was not forwarded.",
        "Retry after the time in Retry-After, or raise the rule's rate_limit in the manifest.";
    NET_UPGRADE_UNANSWERED = "AF-NET-049", Network,
        "A request to switch protocols (a WebSocket) reached a host the sidecar answers itself, which answers no switched protocol.",
        "Set the host to allow or sandbox to reach the real server over WebSocket.";
    NET_GRPC_UNANSWERED = "AF-NET-050", Network,
        "A gRPC call reached a host the sidecar answers itself, and no mock pack describes gRPC, so it was refused in gRPC's terms (UNIMPLEMENTED).",
        "Set the host to allow or sandbox to reach the real gRPC server.";
}
