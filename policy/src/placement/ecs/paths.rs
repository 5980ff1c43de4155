//! The thirteen distinct egress paths out of a Fargate task (platform version 1.4.0 and
//! later), each judged against a generated [`Plan`]: its verdict, what in the plan closes it,
//! and the grade of evidence behind the verdict.
//!
//! A closure computed from the plan document and a closure observed by an attempt inside a
//! running task are different claims, so [`Evidence`] keeps them apart; nothing here has been
//! observed, because an attempt needs a task in somebody's AWS account.

use ipnet::Ipv4Net;
use serde::Serialize;

use super::allow_list::AllowList;
use super::plan::{
    Destination, ENDPOINT_GROUP, Plan, SIDECAR_GROUP, TERMINAL_PRIORITY, WORKLOAD_GROUP,
    WORKLOAD_ROUTES,
};
use super::rule_group;

/// What is known about one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The plan leaves no way through.
    Closed,
    /// There is a way through and no documented way to remove it.
    Open,
    /// Neither the plan nor AWS's documentation decides it; an attempt from a running task would.
    Unproven,
}

/// How strong the evidence behind a verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Grade {
    /// Computed from the generated plan document.
    Computed,
    /// Recorded by an attempt inside a running task.
    Observed,
    /// Stated in AWS documentation.
    Documented,
}

/// What kind of configuration closes a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosureKind {
    /// A security group's egress rules.
    SecurityGroupRule,
    /// A route table's entries.
    RouteTableEntry,
    /// A VPC endpoint's policy.
    EndpointPolicy,
    /// A DNS Firewall rule.
    DnsFirewallRule,
    /// A task or service setting.
    TaskSetting,
}

/// One piece of the plan that closes a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Closure {
    /// What kind it is.
    pub kind: ClosureKind,
    /// Where in the plan (a JSON pointer into `--plan`'s document).
    pub at: String,
    /// What it says, for the path.
    pub says: String,
}

/// A page of AWS documentation, cited by title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Citation {
    /// The page's title.
    pub title: &'static str,
    /// The guide it is in.
    pub guide: &'static str,
    /// What it states that bears on the path.
    pub states: &'static str,
}

/// The evidence behind a verdict, one list per grade, never merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// Facts computed from the plan document (JSON pointers and what they hold).
    pub computed: Vec<String>,
    /// Attempts recorded inside a running task.
    pub observed: Vec<String>,
    /// What AWS's documentation states.
    pub documented: Vec<Citation>,
}

/// One egress path and what is known about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressPath {
    /// A stable id.
    pub id: &'static str,
    /// What the path is.
    pub name: &'static str,
    /// Where it leads.
    pub destination: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// The grade of the evidence the verdict rests on.
    pub grade: Grade,
    /// What in the plan closes it (empty unless closed).
    pub closed_by: Vec<Closure>,
    /// Why the verdict is what it is, in one sentence.
    pub why: String,
    /// The evidence, by grade.
    pub evidence: Evidence,
}

/// Every path, judged against `plan` whose DNS Firewall was generated from `allow_list`.
pub fn judge(plan: &Plan, allow_list: &AllowList) -> Vec<EgressPath> {
    let judge = Judge { plan };
    vec![
        judge.internet_ipv4(),
        judge.public_address(),
        judge.internet_ipv6(),
        judge.inside_the_vpc(),
        judge.endpoint(
            "ecr-api",
            "the ECR API interface endpoint (registry login)",
            "ecr.api",
        ),
        judge.endpoint(
            "ecr-docker",
            "the ECR Docker interface endpoint (image manifests)",
            "ecr.dkr",
        ),
        judge.endpoint("s3-layers", "the S3 gateway endpoint (image layers)", "s3"),
        judge.endpoint(
            "cloudwatch-logs",
            "the CloudWatch Logs interface endpoint (the log push)",
            "logs",
        ),
        judge.ecs_exec(),
        judge.dns(allow_list),
        task_metadata(),
        instance_metadata(plan),
        time_sync(),
    ]
}

struct Judge<'p> {
    plan: &'p Plan,
}

const ECR_ENDPOINTS: Citation = Citation {
    title: "Amazon ECR interface VPC endpoints (AWS PrivateLink)",
    guide: "Amazon ECR User Guide",
    states: "A Fargate task on platform version 1.4.0 or later pulling from ECR in a VPC without internet access needs the ecr.api and ecr.dkr interface endpoints, the S3 gateway endpoint for the layers (bucket prod-REGION-starport-layer-bucket) and the logs endpoint for awslogs.",
};
const PLATFORM: Citation = Citation {
    title: "Fargate platform versions for Amazon ECS",
    guide: "Amazon ECS Developer Guide",
    states: "From platform version 1.4.0 the image pull, the ECR login and the log push use the task's own elastic network interface.",
};
const ENDPOINT_POLICIES: Citation = Citation {
    title: "Control access to VPC endpoints using endpoint policies",
    guide: "AWS PrivateLink Guide",
    states: "An endpoint policy limits the actions and resources that can be reached through the endpoint; what it does not allow is denied.",
};
const SECURITY_GROUPS: Citation = Citation {
    title: "Control traffic to your AWS resources using security groups",
    guide: "Amazon VPC User Guide",
    states: "A security group allows only the egress its rules name; a task's interface is under its task's security groups.",
};
const ROUTE_TABLES: Citation = Citation {
    title: "Configure route tables",
    guide: "Amazon VPC User Guide",
    states: "Traffic leaves a subnet only by a route in its route table; without a route to an internet or NAT gateway nothing reaches the internet.",
};
const DNS_SERVER: Citation = Citation {
    title: "Amazon DNS server",
    guide: "Amazon VPC User Guide",
    states: "Traffic to and from the Amazon DNS server cannot be filtered with network ACLs or security groups, and it answers recursive queries for public names.",
};
const DNS_FIREWALL: Citation = Citation {
    title: "DNS Firewall rule groups and rules",
    guide: "Amazon Route 53 Developer Guide",
    states: "Rules are evaluated by priority from the lowest number up; the first rule whose domain list matches decides with ALLOW or BLOCK.",
};
const FAIL_OPEN: Citation = Citation {
    title: "DNS Firewall VPC configuration",
    guide: "Amazon Route 53 Developer Guide",
    states: "With fail-open disabled, DNS Firewall blocks queries it cannot evaluate instead of letting them through.",
};
const ECS_EXEC: Citation = Citation {
    title: "Monitor Amazon ECS containers with ECS Exec",
    guide: "Amazon ECS Developer Guide",
    states: "ECS Exec opens an SSM session into a task only when the task was started with enableExecuteCommand and can reach the ssmmessages endpoint.",
};

impl Judge<'_> {
    fn workload_egress(&self) -> Vec<&Destination> {
        self.plan
            .security_groups
            .get(WORKLOAD_GROUP)
            .map(|g| g.egress.iter().map(|r| &r.destination).collect())
            .unwrap_or_default()
    }

    fn routes(&self) -> Vec<&str> {
        self.plan
            .route_tables
            .get(WORKLOAD_ROUTES)
            .map(|t| t.routes.iter().map(|r| r.destination.as_str()).collect())
            .unwrap_or_default()
    }

    fn cidrs(&self) -> Vec<&str> {
        self.workload_egress()
            .into_iter()
            .filter_map(|d| match d {
                Destination::Cidr(c) => Some(c.as_str()),
                _ => None,
            })
            .collect()
    }

    fn inside_vpc(&self, block: &str) -> bool {
        block
            .parse::<Ipv4Net>()
            .is_ok_and(|b| self.plan.network.vpc_cidr.contains(&b))
    }

    fn sg_closure(&self, says: &str) -> Closure {
        let egress: Vec<String> = self
            .plan
            .security_groups
            .get(WORKLOAD_GROUP)
            .map(|g| {
                g.egress
                    .iter()
                    .map(|r| {
                        let to = match &r.destination {
                            Destination::SecurityGroup(g) => format!("group {g}"),
                            Destination::PrefixList(p) => format!("prefix list {p}"),
                            Destination::Cidr(c) => c.clone(),
                        };
                        format!("{} {}-{} to {to}", r.protocol, r.from_port, r.to_port)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Closure {
            kind: ClosureKind::SecurityGroupRule,
            at: format!("/security_groups/{WORKLOAD_GROUP}/egress"),
            says: format!("{says}; its egress is {}", egress.join(", ")),
        }
    }

    fn route_closure(&self, says: &str) -> Closure {
        Closure {
            kind: ClosureKind::RouteTableEntry,
            at: format!("/route_tables/{WORKLOAD_ROUTES}/routes"),
            says: format!("{says}; its routes are {}", self.routes().join(", ")),
        }
    }

    fn internet_ipv4(&self) -> EgressPath {
        let outside: Vec<&str> = self
            .cidrs()
            .into_iter()
            .filter(|c| !c.contains(':') && !self.inside_vpc(c))
            .collect();
        let default_route: Vec<&str> = self
            .routes()
            .into_iter()
            .filter(|d| d.parse::<Ipv4Net>().is_ok() && !self.inside_vpc(d))
            .collect();
        let closed = outside.is_empty() && default_route.is_empty();
        computed(
            Path {
                id: "internet-ipv4",
                name: "IPv4 to an address outside the VPC, through an internet or NAT gateway",
                destination: "any public IPv4 address",
            },
            closed.then(|| {
                vec![
                    self.sg_closure("The task's group names no address block"),
                    self.route_closure("No route leads outside the VPC"),
                ]
            }),
            if closed {
                "Neither the task's security group nor its subnets' route table names anything outside the VPC.".to_owned()
            } else {
                format!(
                    "The plan lets IPv4 out: egress to {} and routes to {}.",
                    or_none(&outside),
                    or_none(&default_route)
                )
            },
            vec![SECURITY_GROUPS, ROUTE_TABLES],
        )
    }

    fn public_address(&self) -> EgressPath {
        let closed = !self.plan.task.assign_public_ip;
        computed(
            Path {
                id: "public-ip",
                name: "a public IPv4 address on the task's interface",
                destination: "the internet, answering and initiating",
            },
            closed.then(|| {
                vec![Closure {
                    kind: ClosureKind::TaskSetting,
                    at: "/task/assign_public_ip".to_owned(),
                    says: "The service's network configuration sets assignPublicIp: DISABLED"
                        .to_owned(),
                }]
            }),
            if closed {
                "The task's interface has no public address.".to_owned()
            } else {
                "The plan gives the task's interface a public address.".to_owned()
            },
            vec![ROUTE_TABLES],
        )
    }

    fn internet_ipv6(&self) -> EgressPath {
        let egress: Vec<&str> = self
            .cidrs()
            .into_iter()
            .filter(|c| c.contains(':'))
            .collect();
        let routes: Vec<&str> = self
            .routes()
            .into_iter()
            .filter(|d| d.contains(':'))
            .collect();
        let closed = egress.is_empty() && routes.is_empty();
        computed(
            Path {
                id: "internet-ipv6",
                name: "IPv6, through an internet or egress-only internet gateway",
                destination: "any IPv6 address",
            },
            closed.then(|| {
                vec![
                    self.sg_closure("The task's group names no IPv6 block"),
                    self.route_closure("No IPv6 route exists"),
                ]
            }),
            if closed {
                "The plan has no IPv6 egress rule and no IPv6 route.".to_owned()
            } else {
                format!(
                    "The plan lets IPv6 out: egress to {} and routes to {}.",
                    or_none(&egress),
                    or_none(&routes)
                )
            },
            vec![SECURITY_GROUPS, ROUTE_TABLES],
        )
    }

    fn inside_the_vpc(&self) -> EgressPath {
        let blocks: Vec<&str> = self
            .cidrs()
            .into_iter()
            .filter(|c| self.inside_vpc(c))
            .collect();
        let groups: Vec<&str> = self
            .workload_egress()
            .into_iter()
            .filter_map(|d| match d {
                Destination::SecurityGroup(g) if g != SIDECAR_GROUP && g != ENDPOINT_GROUP => {
                    Some(g.as_str())
                }
                _ => None,
            })
            .collect();
        let closed = blocks.is_empty() && groups.is_empty();
        computed(
            Path {
                id: "inside-vpc",
                name: "another address inside the VPC (other tasks, instances, peered networks)",
                destination: "the VPC's own block and what its local route reaches",
            },
            closed.then(|| {
                vec![self.sg_closure(
                    "The task's group names only the sidecar's group, the endpoints' group and the S3 prefix list",
                )]
            }),
            if closed {
                "The VPC's local route exists, but the task's group lets nothing use it except towards the sidecar and the endpoints.".to_owned()
            } else {
                format!(
                    "The task's group lets traffic reach {} inside the VPC.",
                    or_none(&[blocks, groups].concat())
                )
            },
            vec![SECURITY_GROUPS],
        )
    }

    /// An endpoint the image pull or the log push needs: closed when its policy allows only
    /// this environment's own resources (and the registry login, which names none).
    fn endpoint(&self, id: &'static str, name: &'static str, short: &str) -> EgressPath {
        let own = &self.plan.own;
        let mine = [
            own.repository.as_str(),
            own.log_group.as_str(),
            own.layer_bucket.as_str(),
        ];
        let pointer = format!(
            "/vpc_endpoints/com.amazonaws.{}.{short}/policy",
            self.plan.network.region
        );
        let wider: Vec<String> = match self.plan.endpoint(short) {
            None => vec!["(no endpoint: the task could not start)".to_owned()],
            Some(endpoint) => endpoint
                .policy
                .statements
                .iter()
                .filter(|s| {
                    let login_only = s.actions == ["ecr:GetAuthorizationToken"];
                    s.effect != "Allow"
                        || !s
                            .resources
                            .iter()
                            .all(|r| mine.contains(&r.as_str()) || (login_only && r == "*"))
                })
                .flat_map(|s| s.resources.clone())
                .collect(),
        };
        let closed = wider.is_empty();
        let allows: Vec<String> = self
            .plan
            .endpoint(short)
            .map(|e| {
                e.policy
                    .statements
                    .iter()
                    .map(|s| format!("{} on {}", s.actions.join(", "), s.resources.join(", ")))
                    .collect()
            })
            .unwrap_or_default();
        computed(
            Path {
                id,
                name,
                destination: "any repository, log group or bucket in the region",
            },
            closed.then(|| {
                vec![Closure {
                    kind: ClosureKind::EndpointPolicy,
                    at: pointer,
                    says: format!("The endpoint policy allows only {}", allows.join("; ")),
                }]
            }),
            if closed {
                "The endpoint must be reachable for the task to start, but its policy reaches only this environment's own resources.".to_owned()
            } else {
                format!(
                    "The endpoint's policy reaches more than this environment's own resources: {}.",
                    wider.join(", ")
                )
            },
            vec![PLATFORM, ECR_ENDPOINTS, ENDPOINT_POLICIES],
        )
    }

    fn ecs_exec(&self) -> EgressPath {
        let ssm = self.plan.endpoint("ssmmessages").is_some();
        let closed = !self.plan.task.enable_execute_command && !ssm;
        computed(
            Path {
                id: "ecs-exec",
                name: "an ECS Exec session (SSM messages channel)",
                destination: "the SSM service, and through it an operator's shell",
            },
            closed.then(|| {
                vec![Closure {
                    kind: ClosureKind::TaskSetting,
                    at: "/task/enable_execute_command".to_owned(),
                    says: "The service sets enableExecuteCommand: false and the plan has no ssmmessages endpoint".to_owned(),
                }]
            }),
            if closed {
                "ECS Exec is off and its endpoint is absent.".to_owned()
            } else {
                "The plan turns ECS Exec on or carries an ssmmessages endpoint.".to_owned()
            },
            vec![ECS_EXEC],
        )
    }

    fn dns(&self, allow_list: &AllowList) -> EgressPath {
        let group = &self.plan.dns_firewall.rule_group;
        let mut problems: Vec<String> = rule_group::check(group)
            .into_iter()
            .map(|r| format!("{} {}", r.code.code, r.statement))
            .collect();
        problems.extend(
            allow_list
                .unexpressible
                .iter()
                .map(|u| format!("{} ({}) cannot be a domain: {}", u.host, u.mode, u.reason)),
        );
        if self.plan.dns_firewall.vpc_id != self.plan.network.vpc_id {
            problems.push("the rule group is not associated with the task's VPC".to_owned());
        }
        let closed = problems.is_empty();
        computed(
            Path {
                id: "dns-resolver",
                name: "a query to the Amazon-provided resolver (VPC base + 2, 169.254.169.253)",
                destination: "any public name, and whoever answers for it",
            },
            closed.then(|| {
                vec![Closure {
                    kind: ClosureKind::DnsFirewallRule,
                    at: "/dns_firewall/rule_group".to_owned(),
                    says: format!(
                        "The last rule, alone at priority {TERMINAL_PRIORITY}, blocks every domain; only the catalogue's forwarded hosts are allowed before it; FirewallFailOpen is DISABLED"
                    ),
                }]
            }),
            if closed {
                "Security groups cannot filter the resolver, so the rule group does: only the names the sidecar forwards to resolve.".to_owned()
            } else {
                format!("The rule group does not close the resolver: {}.", problems.join("; "))
            },
            vec![DNS_SERVER, DNS_FIREWALL, FAIL_OPEN],
        )
    }
}

struct Path {
    id: &'static str,
    name: &'static str,
    destination: &'static str,
}

/// A path whose verdict is computed from the plan: closed by `closures`, or open.
fn computed(
    path: Path,
    closures: Option<Vec<Closure>>,
    why: String,
    documented: Vec<Citation>,
) -> EgressPath {
    let (verdict, closed_by) = match closures {
        Some(closures) => (Verdict::Closed, closures),
        None => (Verdict::Open, Vec::new()),
    };
    EgressPath {
        id: path.id,
        name: path.name,
        destination: path.destination,
        verdict,
        grade: Grade::Computed,
        evidence: Evidence {
            computed: closed_by
                .iter()
                .map(|c| format!("{}: {}", c.at, c.says))
                .collect(),
            observed: Vec::new(),
            documented,
        },
        closed_by,
        why,
    }
}

/// A path no configuration decides: its verdict rests on the documentation alone.
fn documented(path: Path, verdict: Verdict, why: String, documented: Vec<Citation>) -> EgressPath {
    EgressPath {
        id: path.id,
        name: path.name,
        destination: path.destination,
        verdict,
        grade: Grade::Documented,
        closed_by: Vec::new(),
        why,
        evidence: Evidence {
            documented,
            ..Evidence::default()
        },
    }
}

fn task_metadata() -> EgressPath {
    documented(
        Path {
            id: "task-metadata",
            name: "the task metadata endpoint (169.254.170.2)",
            destination: "the task's own metadata, stats and credentials endpoint, answered off the interface",
        },
        Verdict::Open,
        "It is on for every Fargate task on platform version 1.4.0 or later, and AWS documents no way to turn it off.".to_owned(),
        vec![Citation {
            title: "Amazon ECS task metadata endpoint version 4 for tasks on Fargate",
            guide: "Amazon ECS Developer Guide",
            states: "Beginning with Fargate platform version 1.4.0, the ECS_CONTAINER_METADATA_URI_V4 variable is injected into each container of a task.",
        }],
    )
}

fn instance_metadata(plan: &Plan) -> EgressPath {
    let probe = match &plan.task.probe_container {
        Some(image) => format!(
            "The plan carries the probe container {image}, whose one request would settle it; no attempt has been recorded."
        ),
        None => "AF_ECS_PROBE_IMAGE is unset, so the plan carries no probe container and no attempt is planned.".to_owned(),
    };
    documented(
        Path {
            id: "instance-metadata",
            name: "the instance metadata service (169.254.169.254)",
            destination: "an EC2 host's metadata and, on EC2, its instance profile's credentials",
        },
        Verdict::Unproven,
        format!(
            "Fargate removes the documented credential source, but AWS does not state that the address stops answering, and those are different claims. {probe}"
        ),
        vec![Citation {
            title: "Amazon ECS task IAM role",
            guide: "Amazon ECS Developer Guide",
            states: "Containers in Fargate tasks get credentials from the task role; EC2 instance profiles are not available to them.",
        }],
    )
}

fn time_sync() -> EgressPath {
    documented(
        Path {
            id: "time-sync",
            name: "the local Amazon Time Sync Service (169.254.169.123)",
            destination: "an NTP server answering on the link-local address",
        },
        Verdict::Unproven,
        "AWS documents the address for EC2 instances and says nothing of Fargate tasks; one request from a running task would settle it.".to_owned(),
        vec![Citation {
            title: "Set the time for your Amazon EC2 instance",
            guide: "Amazon EC2 User Guide",
            states: "The Amazon Time Sync Service is available at 169.254.169.123 to instances in a VPC.",
        }],
    )
}

fn or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}
