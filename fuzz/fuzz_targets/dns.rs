//! The DNS server's query path: any packet goes through hickory's parser, the handler and
//! hickory's encoder. The answer is nothing, or exactly one well-formed response with the
//! query's id that carries addresses only, and only to one A/AAAA question
//! (`af_dns::fuzzing::Outcome::check`). Inside names are asked of a test resolver on loopback.
#![no_main]

use std::net::Ipv4Addr;
use std::sync::LazyLock;

use af_dns::DnsConfig;
use af_dns::fuzzing::QueryPath;
use af_fixtures::test_resolver::TestResolver;
use af_fuzz::runtime;
use libfuzzer_sys::fuzz_target;

struct Server {
    path: QueryPath,
    _resolver: TestResolver,
}

static SERVER: LazyLock<Server> = LazyLock::new(|| {
    runtime().block_on(async {
        let resolver = TestResolver::start([
            (
                "api.svc.cluster.local",
                vec!["198.51.100.21".parse().expect("ip")],
            ),
            ("db", vec!["198.51.100.22".parse().expect("ip")]),
            (
                "leak.svc.cluster.local",
                vec!["203.0.113.9".parse().expect("ip")],
            ),
        ])
        .await
        .expect("test resolver");
        let mut config = DnsConfig::new(
            Ipv4Addr::new(198, 51, 100, 2),
            vec!["198.51.100.0/24".parse().expect("subnet")],
            resolver.addr,
        );
        config.sidecar_v6 = Some("2001:db8::2".parse().expect("ip"));
        config.allow_ipv6 = true;
        config.inside_names = vec!["db".into()];
        config.inside_zones = vec!["svc.cluster.local".into()];
        config.upstream_timeout_ms = 200;
        let path = QueryPath::new(&config).expect("query path");
        Server {
            path,
            _resolver: resolver,
        }
    })
});

fuzz_target!(|packet: &[u8]| {
    let outcome = runtime().block_on(SERVER.path.answer(packet));
    if let Err(broken) = outcome.check(packet) {
        panic!("{broken}");
    }
});
