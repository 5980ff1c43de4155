//! squid: forward proxy, one worker, no cache, no logs.

use std::process::Command;

use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// Squid as a plain forward proxy.
pub(super) struct Squid;

impl System for Squid {
    fn name(&self) -> &str {
        "squid"
    }

    fn support(&self, scenario: Scenario) -> Support {
        http_proxy_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("squid")
    }

    fn start(&self, _env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let d = dir.path().display();
        let conf = format!(
            "http_port 127.0.0.1:{port}\n\
             http_access allow all\n\
             workers 1\n\
             cache deny all\n\
             cache_mem 0 MB\n\
             access_log none\n\
             cache_store_log none\n\
             cache_log /dev/null\n\
             logfile_rotate 0\n\
             pid_filename none\n\
             coredump_dir {d}\n\
             max_filedescriptors 65536\n\
             client_db off\n\
             via off\n\
             forwarded_for transparent\n\
             shutdown_lifetime 0 seconds\n\
             visible_hostname af-bench\n\
             cache_effective_user proxy\n"
        );
        let path = super::write_config(dir.path(), "squid.conf", &conf)?;
        let mut cmd = Command::new("squid");
        // -N: stay in the foreground, no kid process; -d 0: nothing on stderr.
        cmd.arg("-N").arg("-d").arg("0").arg("-f").arg(&path);
        super::launch(
            "squid",
            cmd,
            dir,
            port,
            Ready::Tcp,
            Endpoint::Proxy(([127, 0, 0, 1], port).into()),
        )
    }
}

/// The scenarios a plain HTTP forward proxy takes part in.
pub(super) fn http_proxy_support(scenario: Scenario) -> Support {
    match scenario {
        Scenario::HttpKeepAlive
        | Scenario::HttpNewConn
        | Scenario::Http1m
        | Scenario::ConnectBulk
        | Scenario::IdleMemory => Support::Yes,
        Scenario::Dns | Scenario::InterceptedHttps | Scenario::Decision | Scenario::AfUp => {
            Support::No
        }
    }
}
