//! The network an ECS plan is generated for: six values read from `AF_ECS_*` by the caller and
//! checked here, or placeholders when none is set.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

use crate::error::{Report, codes};

/// The six `AF_ECS_*` values as the caller read them (plus the optional probe image), unchecked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkVars {
    /// `AF_ECS_REGION`.
    pub region: Option<String>,
    /// `AF_ECS_CLUSTER`.
    pub cluster: Option<String>,
    /// `AF_ECS_VPC_ID`.
    pub vpc_id: Option<String>,
    /// `AF_ECS_VPC_CIDR`.
    pub vpc_cidr: Option<String>,
    /// `AF_ECS_SUBNET_IDS`, comma separated.
    pub subnet_ids: Option<String>,
    /// `AF_ECS_SUBNET_CIDRS`, comma separated, in the order of the ids.
    pub subnet_cidrs: Option<String>,
    /// `AF_ECS_PROBE_IMAGE`, optional.
    pub probe_image: Option<String>,
}

/// One subnet the task's interface may be placed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subnet {
    /// The subnet id, `subnet-...`.
    pub id: String,
    /// Its IPv4 block, inside the VPC's.
    pub cidr: Ipv4Net,
}

/// A checked description of the network a plan is generated for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Network {
    /// True when no `AF_ECS_*` variable was set and the values below are placeholders.
    pub placeholder: bool,
    /// The AWS region.
    pub region: String,
    /// The ECS cluster's name.
    pub cluster: String,
    /// The VPC id, `vpc-...`.
    pub vpc_id: String,
    /// The VPC's IPv4 block.
    pub vpc_cidr: Ipv4Net,
    /// The subnets, at least one.
    pub subnets: Vec<Subnet>,
    /// The image the containment probe container would run; `None` plans no probe container.
    pub probe_image: Option<String>,
}

/// The six variables that describe the network, in the order [`NetworkVars`] holds them.
pub const VARIABLES: [&str; 6] = [
    "AF_ECS_REGION",
    "AF_ECS_CLUSTER",
    "AF_ECS_VPC_ID",
    "AF_ECS_VPC_CIDR",
    "AF_ECS_SUBNET_IDS",
    "AF_ECS_SUBNET_CIDRS",
];

/// The optional variable naming the probe container's image.
pub const PROBE_IMAGE_VARIABLE: &str = "AF_ECS_PROBE_IMAGE";

impl NetworkVars {
    /// The variables as `lookup` (the caller's environment) gives them.
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> NetworkVars {
        let [region, cluster, vpc_id, vpc_cidr, subnet_ids, subnet_cidrs] = VARIABLES.map(&lookup);
        NetworkVars {
            region,
            cluster,
            vpc_id,
            vpc_cidr,
            subnet_ids,
            subnet_cidrs,
            probe_image: lookup(PROBE_IMAGE_VARIABLE),
        }
    }
}

impl Network {
    /// The network `vars` describe: placeholders when none of the six is set, AF-SCH-011 when
    /// only some are, when a block is not an IPv4 CIDR, or when the subnet lists differ in
    /// length or a subnet lies outside the VPC.
    pub fn describe(vars: &NetworkVars) -> Result<Network, Report> {
        let values = [
            &vars.region,
            &vars.cluster,
            &vars.vpc_id,
            &vars.vpc_cidr,
            &vars.subnet_ids,
            &vars.subnet_cidrs,
        ]
        .map(|v| v.as_deref().map(str::trim).filter(|v| !v.is_empty()));
        let probe_image = vars.probe_image.clone().filter(|i| !i.trim().is_empty());
        if values.iter().all(Option::is_none) {
            return Ok(Network {
                probe_image,
                ..Network::placeholder()
            });
        }
        let missing: Vec<&str> = VARIABLES
            .iter()
            .zip(&values)
            .filter(|(_, v)| v.is_none())
            .map(|(name, _)| *name)
            .collect();
        let [
            Some(region),
            Some(cluster),
            Some(vpc_id),
            Some(vpc_cidr),
            Some(ids),
            Some(cidrs),
        ] = values
        else {
            return Err(network_error(format!(
                "Some AF_ECS_* variables are set but {} {} not.",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" }
            )));
        };
        let vpc_cidr = cidr("AF_ECS_VPC_CIDR", vpc_cidr)?;
        let ids: Vec<&str> = ids.split(',').map(str::trim).collect();
        let cidrs: Vec<&str> = cidrs.split(',').map(str::trim).collect();
        if ids.len() != cidrs.len() {
            return Err(network_error(format!(
                "AF_ECS_SUBNET_IDS names {} subnets but AF_ECS_SUBNET_CIDRS gives {} blocks.",
                ids.len(),
                cidrs.len()
            )));
        }
        let subnets = ids
            .iter()
            .zip(&cidrs)
            .map(|(id, block)| {
                let block = cidr("AF_ECS_SUBNET_CIDRS", block)?;
                if id.is_empty() || !vpc_cidr.contains(&block) {
                    return Err(network_error(format!(
                        "The subnet {id:?} ({block}) is not a named subnet inside the VPC's {vpc_cidr}."
                    )));
                }
                Ok(Subnet {
                    id: (*id).to_owned(),
                    cidr: block,
                })
            })
            .collect::<Result<Vec<_>, Report>>()?;
        Ok(Network {
            placeholder: false,
            region: region.to_owned(),
            cluster: cluster.to_owned(),
            vpc_id: vpc_id.to_owned(),
            vpc_cidr,
            subnets,
            probe_image,
        })
    }

    /// The network a report is made for when no variable is set.
    pub fn placeholder() -> Network {
        Network {
            placeholder: true,
            region: "us-east-1".to_owned(),
            cluster: "af-placeholder".to_owned(),
            vpc_id: "vpc-00000000000000000".to_owned(),
            vpc_cidr: Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 16),
            subnets: vec![Subnet {
                id: "subnet-00000000000000000".to_owned(),
                cidr: Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 24),
            }],
            probe_image: None,
        }
    }
}

fn cidr(name: &str, text: &str) -> Result<Ipv4Net, Report> {
    text.parse().map_err(|_| {
        network_error(format!(
            "{name} holds {text:?}, which is not an IPv4 block such as 10.0.0.0/16."
        ))
    })
}

fn network_error(statement: String) -> Report {
    Report::new(&codes::SCH_ECS_NETWORK, statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> NetworkVars {
        NetworkVars {
            region: Some("eu-west-1".into()),
            cluster: Some("previews".into()),
            vpc_id: Some("vpc-0abc".into()),
            vpc_cidr: Some("10.20.0.0/16".into()),
            subnet_ids: Some("subnet-a, subnet-b".into()),
            subnet_cidrs: Some("10.20.1.0/24,10.20.2.0/24".into()),
            probe_image: None,
        }
    }

    #[test]
    fn six_matching_variables_describe_the_network_in_order() {
        let network = Network::describe(&full()).expect("described");
        assert!(!network.placeholder);
        let ids: Vec<&str> = network.subnets.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["subnet-a", "subnet-b"]);
        assert_eq!(network.subnets[1].cidr.to_string(), "10.20.2.0/24");
    }

    #[test]
    fn no_variables_give_the_placeholder_network() {
        let network = Network::describe(&NetworkVars::default()).expect("placeholder");
        assert!(network.placeholder);
        assert_eq!(network, Network::placeholder());
    }

    #[test]
    fn mismatched_partial_or_malformed_variables_are_refused() {
        let cases = [
            (
                NetworkVars {
                    subnet_cidrs: Some("10.20.1.0/24".into()),
                    ..full()
                },
                "names 2 subnets but AF_ECS_SUBNET_CIDRS gives 1",
            ),
            (
                NetworkVars {
                    vpc_id: None,
                    ..full()
                },
                "AF_ECS_VPC_ID is not",
            ),
            (
                NetworkVars {
                    vpc_cidr: Some("10.20.0.0".into()),
                    ..full()
                },
                "not an IPv4 block",
            ),
            (
                NetworkVars {
                    subnet_cidrs: Some("10.20.1.0/24,10.99.2.0/24".into()),
                    ..full()
                },
                "not a named subnet inside",
            ),
        ];
        for (vars, says) in cases {
            let report = Network::describe(&vars).expect_err("refused");
            assert_eq!(report.code.code, "AF-SCH-011");
            assert!(report.statement.contains(says), "{}", report.statement);
        }
    }
}
