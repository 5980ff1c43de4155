//! The configuration the ECS runtime would generate for one environment: security groups,
//! route tables, VPC endpoints with their policies, the DNS Firewall rule group and the task's
//! network settings. `af ecs report --plan FILE` writes it so a reader can check every closure
//! against it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::allow_list::AllowList;
use super::network::Network;
use super::rule_group::{Action, EVERY_DOMAIN, FailOpen, Rule, RuleGroup};

/// The security group of the environment's task.
pub const WORKLOAD_GROUP: &str = "workload";
/// The security group of the interface endpoints.
pub const ENDPOINT_GROUP: &str = "endpoints";
/// The security group of the sidecar's own task, the one way out the manifest chose.
pub const SIDECAR_GROUP: &str = "sidecar";
/// The route table of the task's subnets.
pub const WORKLOAD_ROUTES: &str = "workload";

/// The generated configuration, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The network it is generated for.
    pub network: Network,
    /// The environment's own repository, log group and layer bucket.
    pub own: OwnResources,
    /// The task's network settings.
    pub task: Task,
    /// The security groups, by the names rules refer to them by.
    pub security_groups: BTreeMap<String, SecurityGroup>,
    /// The route tables of the task's subnets.
    pub route_tables: BTreeMap<String, RouteTable>,
    /// The VPC endpoints, by AWS service name.
    pub vpc_endpoints: BTreeMap<String, Endpoint>,
    /// The DNS Firewall rule group associated with the VPC.
    pub dns_firewall: DnsFirewall,
}

/// The task definition and service settings that decide where the task's interface can reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Task {
    /// The task family.
    pub family: String,
    /// The Fargate platform version (1.4.0 pulls images over the task's own interface).
    pub platform_version: String,
    /// Always `awsvpc`: the task has its own interface under its own security group.
    pub network_mode: String,
    /// Whether the interface gets a public IPv4 address.
    pub assign_public_ip: bool,
    /// Whether ECS Exec (an SSM session into the task) is turned on.
    pub enable_execute_command: bool,
    /// The security groups on the interface.
    pub security_groups: Vec<String>,
    /// The subnets the interface may be placed in.
    pub subnets: Vec<String>,
    /// The containers besides the services: the probe, when an image is named.
    pub probe_container: Option<String>,
}

/// A security group's egress rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecurityGroup {
    /// What the group is for.
    pub description: String,
    /// Where traffic from the group may go; nothing else may.
    pub egress: Vec<SgRule>,
}

/// One egress rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SgRule {
    /// `tcp`, `udp`.
    pub protocol: String,
    /// The first port.
    pub from_port: u16,
    /// The last port.
    pub to_port: u16,
    /// Where to.
    pub destination: Destination,
}

/// Where a security group rule lets traffic go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Destination {
    /// Another group of this plan, by name.
    SecurityGroup(String),
    /// A managed prefix list, e.g. the S3 gateway's.
    PrefixList(String),
    /// An address block.
    Cidr(String),
}

/// A route table and its routes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteTable {
    /// The subnets it is associated with.
    pub subnets: Vec<String>,
    /// The routes; there is no other.
    pub routes: Vec<Route>,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// An address block or a prefix list.
    pub destination: String,
    /// `local`, or the VPC endpoint it goes to.
    pub target: String,
}

/// A VPC endpoint and the policy that narrows what can be asked through it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// `Interface` or `Gateway`.
    pub kind: EndpointKind,
    /// The endpoint policy: every request through it must be allowed by one statement.
    pub policy: EndpointPolicy,
}

/// A VPC endpoint's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EndpointKind {
    /// An interface in the task's subnets, under [`ENDPOINT_GROUP`], with private DNS.
    Interface,
    /// A route table entry to the service's prefix list.
    Gateway,
}

/// An IAM policy document attached to a VPC endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointPolicy {
    /// The statements.
    #[serde(rename = "Statement")]
    pub statements: Vec<Statement>,
}

/// One Allow statement of an endpoint policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    /// Always `Allow`: what no statement allows is denied.
    #[serde(rename = "Effect")]
    pub effect: String,
    /// Always `*`: the narrowing is by resource.
    #[serde(rename = "Principal")]
    pub principal: String,
    /// The API actions.
    #[serde(rename = "Action")]
    pub actions: Vec<String>,
    /// The resources, by ARN.
    #[serde(rename = "Resource")]
    pub resources: Vec<String>,
}

/// The DNS Firewall for the VPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsFirewall {
    /// The VPC it is associated with.
    pub vpc_id: String,
    /// The rule group, in the shape `af ecs check-rule-group` reads.
    pub rule_group: RuleGroup,
}

/// The environment's own resources, the only ones its endpoints let it reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnResources {
    /// The ECR repository its images are pulled from.
    pub repository: String,
    /// The CloudWatch Logs group its containers write to.
    pub log_group: String,
    /// The S3 bucket the repository's layers are served from.
    pub layer_bucket: String,
}

impl OwnResources {
    /// The resources of the environment named `name` in `network`'s region.
    pub fn of(name: &str, network: &Network) -> OwnResources {
        let region = &network.region;
        OwnResources {
            repository: format!("arn:aws:ecr:{region}:*:repository/af/{name}"),
            log_group: format!("arn:aws:logs:{region}:*:log-group:/af/{name}:*"),
            layer_bucket: format!("arn:aws:s3:::prod-{region}-starport-layer-bucket/*"),
        }
    }
}

/// The priority of the rule that blocks every domain: above every tier's.
pub const TERMINAL_PRIORITY: u32 = 10_000;

impl Plan {
    /// The plan for the environment `name` on `network`, its DNS Firewall generated from
    /// `allow_list`.
    pub fn generate(name: &str, network: &Network, allow_list: &AllowList) -> Plan {
        let own = OwnResources::of(name, network);
        let region = &network.region;
        let service = |s: &str| format!("com.amazonaws.{region}.{s}");
        let s3_prefix_list = format!("pl-s3-{region}");
        let tcp = |port, destination| SgRule {
            protocol: "tcp".to_owned(),
            from_port: port,
            to_port: port,
            destination,
        };
        let group = |name: &str| Destination::SecurityGroup(name.to_owned());
        let workload = SecurityGroup {
            description: "The environment's task: the sidecar, the interface endpoints and the S3 gateway, nothing else.".to_owned(),
            egress: vec![
                SgRule {
                    protocol: "tcp".to_owned(),
                    from_port: 1,
                    to_port: u16::MAX,
                    destination: group(SIDECAR_GROUP),
                },
                SgRule {
                    protocol: "udp".to_owned(),
                    from_port: 53,
                    to_port: 53,
                    destination: group(SIDECAR_GROUP),
                },
                tcp(443, group(ENDPOINT_GROUP)),
                tcp(443, Destination::PrefixList(s3_prefix_list.clone())),
            ],
        };
        let endpoints = SecurityGroup {
            description: "The interface endpoints the image pull and the log push need; they answer, they never send.".to_owned(),
            egress: Vec::new(),
        };
        let subnets: Vec<String> = network.subnets.iter().map(|s| s.id.clone()).collect();
        let routes = RouteTable {
            subnets: subnets.clone(),
            routes: vec![
                Route {
                    destination: network.vpc_cidr.to_string(),
                    target: "local".to_owned(),
                },
                Route {
                    destination: s3_prefix_list,
                    target: service("s3"),
                },
            ],
        };
        let allow = |actions: &[&str], resources: &[&str]| Statement {
            effect: "Allow".to_owned(),
            principal: "*".to_owned(),
            actions: actions.iter().map(|a| (*a).to_owned()).collect(),
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        };
        let interface = |statements| Endpoint {
            kind: EndpointKind::Interface,
            policy: EndpointPolicy { statements },
        };
        let pull = [
            "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer",
            "ecr:BatchCheckLayerAvailability",
        ];
        let vpc_endpoints = BTreeMap::from([
            (
                service("ecr.api"),
                interface(vec![
                    // The login token names no repository; it lets nothing be read or written.
                    allow(&["ecr:GetAuthorizationToken"], &["*"]),
                    allow(&pull, &[&own.repository]),
                ]),
            ),
            (
                service("ecr.dkr"),
                interface(vec![allow(&pull, &[&own.repository])]),
            ),
            (
                service("logs"),
                interface(vec![allow(
                    &["logs:CreateLogStream", "logs:PutLogEvents"],
                    &[&own.log_group],
                )]),
            ),
            (
                service("s3"),
                Endpoint {
                    kind: EndpointKind::Gateway,
                    policy: EndpointPolicy {
                        statements: vec![allow(&["s3:GetObject"], &[&own.layer_bucket])],
                    },
                },
            ),
        ]);
        Plan {
            network: network.clone(),
            own,
            task: Task {
                family: format!("af-{name}"),
                platform_version: "1.4.0".to_owned(),
                network_mode: "awsvpc".to_owned(),
                assign_public_ip: false,
                enable_execute_command: false,
                security_groups: vec![WORKLOAD_GROUP.to_owned()],
                subnets,
                probe_container: network.probe_image.clone(),
            },
            security_groups: BTreeMap::from([
                (WORKLOAD_GROUP.to_owned(), workload),
                (ENDPOINT_GROUP.to_owned(), endpoints),
            ]),
            route_tables: BTreeMap::from([(WORKLOAD_ROUTES.to_owned(), routes)]),
            vpc_endpoints,
            dns_firewall: DnsFirewall {
                vpc_id: network.vpc_id.clone(),
                rule_group: rule_group(name, allow_list),
            },
        }
    }

    /// The endpoint for the AWS service `short` (`ecr.api`, `s3`, ...) in the plan's region.
    pub fn endpoint(&self, short: &str) -> Option<&Endpoint> {
        self.vpc_endpoints
            .get(&format!("com.amazonaws.{}.{short}", self.network.region))
    }
}

/// Each tier's BLOCK list then its ALLOW list, ten priorities apart, then the BLOCK on every
/// domain, alone at [`TERMINAL_PRIORITY`] (names have at most 127 labels, so the tiers end
/// far below it); fail-open disabled.
fn rule_group(name: &str, allow_list: &AllowList) -> RuleGroup {
    let mut rules = Vec::new();
    let mut domain_lists = BTreeMap::new();
    let mut priority = 100;
    for (i, tier) in allow_list.tiers.iter().enumerate() {
        for (action, domains, what) in [
            (Action::Block, &tier.block, "answered-here"),
            (Action::Allow, &tier.allow, "forwarded"),
        ] {
            if domains.is_empty() {
                continue;
            }
            let list = format!("af-{name}-{what}-{i}");
            rules.push(Rule {
                name: list.clone(),
                priority,
                action,
                domain_list: list.clone(),
                block_response: (action == Action::Block).then(|| "NXDOMAIN".to_owned()),
            });
            domain_lists.insert(list, domains.clone());
            priority += 10;
        }
    }
    let every = format!("af-{name}-every-domain");
    rules.push(Rule {
        name: every.clone(),
        priority: TERMINAL_PRIORITY,
        action: Action::Block,
        domain_list: every.clone(),
        block_response: Some("NXDOMAIN".to_owned()),
    });
    domain_lists.insert(every, vec![EVERY_DOMAIN.to_owned()]);
    RuleGroup {
        rules,
        domain_lists,
        fail_open: FailOpen::Disabled,
    }
}
