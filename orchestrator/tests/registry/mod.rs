//! A real registry for the registry path's test: Debian's `docker-registry` (the distribution
//! registry) started by the test on the node's own address, with TLS from a test CA made here
//! and basic authentication (bcrypt, `htpasswd`). This machine's Docker daemon, which pushes for
//! af and pulls for the local cluster's kubelet, trusts the CA for this registry alone
//! (`/etc/docker/certs.d/HOST:PORT/ca.crt`, removed again on drop).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

/// The user the registry knows.
pub(crate) const USER: &str = "af-pusher";

/// The address the registry listens on: `AF_TEST_REGISTRY_ADDR`, else the local test
/// cluster's node address (on this machine's loopback, never routed out), which this machine's
/// Docker daemon reaches and which is not in 127.0.0.0/8, so the daemon verifies its TLS.
fn address() -> IpAddr {
    std::env::var("AF_TEST_REGISTRY_ADDR")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(IpAddr::V4(Ipv4Addr::new(10, 250, 0, 1)))
}

/// A running registry.
pub(crate) struct Registry {
    /// `HOST:PORT`.
    pub host: String,
    /// The password of [`USER`].
    pub password: String,
    dir: PathBuf,
    trust: PathBuf,
    child: Option<Child>,
}

impl Registry {
    /// Start one with a password of its own, in `dir`.
    pub(crate) fn start(dir: &Path) -> Registry {
        let ip = address();
        let port = TcpListener::bind((ip, 0))
            .and_then(|l| l.local_addr())
            .unwrap_or_else(|e| panic!("a free port on {ip}: {e}"))
            .port();
        let host = SocketAddr::new(ip, port).to_string();
        let password = format!("pw-{:x}", std::process::id() ^ port as u32);
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));

        let ca_key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "af registry test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap_or_else(|e| panic!("{e}"));
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut leaf =
            CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        leaf.subject_alt_names = vec![SanType::IpAddress(ip)];
        leaf.distinguished_name
            .push(DnType::CommonName, "af test registry");
        let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
        let cert = leaf
            .signed_by(&key, &issuer)
            .unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
        };
        write("ca.crt", &ca_cert.pem());
        write("registry.crt", &cert.pem());
        write("registry.key", &key.serialize_pem());
        let htpasswd = Command::new("htpasswd")
            .args(["-Bbn", USER, &password])
            .output()
            .unwrap_or_else(|e| panic!("htpasswd (apache2-utils): {e}"));
        assert!(htpasswd.status.success(), "htpasswd failed");
        std::fs::write(dir.join("htpasswd"), &htpasswd.stdout).unwrap_or_else(|e| panic!("{e}"));
        let d = dir.display();
        write(
            "config.yml",
            &format!(
                "version: 0.1\nlog: {{level: info}}\nstorage: {{filesystem: {{rootdirectory: {d}/data}}}}\nhttp:\n  addr: {host}\n  tls: {{certificate: {d}/registry.crt, key: {d}/registry.key}}\nauth:\n  htpasswd: {{realm: af-test, path: {d}/htpasswd}}\n"
            ),
        );

        let trust = PathBuf::from(format!("/etc/docker/certs.d/{host}"));
        std::fs::create_dir_all(&trust).unwrap_or_else(|e| panic!("{}: {e}", trust.display()));
        std::fs::write(trust.join("ca.crt"), ca_cert.pem()).unwrap_or_else(|e| panic!("{e}"));

        let mut registry = Registry {
            host,
            password,
            dir: dir.to_owned(),
            trust,
            child: None,
        };
        registry.run();
        registry
    }

    /// Start the registry process (again), and wait until it answers.
    pub(crate) fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("registry.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new("docker-registry")
            .args(["serve", &self.dir.join("config.yml").display().to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry (Debian's docker-registry): {e}"));
        self.child = Some(child);
        let addr: SocketAddr = self.host.parse().unwrap_or_else(|e| panic!("{e}"));
        let start = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "the registry did not answer on {addr}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stop the registry process (it is down until [`Registry::run`]).
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The repository af is told to push to.
    pub(crate) fn repository(&self) -> String {
        format!("{}/team/af", self.host)
    }

    /// A Docker configuration directory holding `password` for [`USER`] on this registry.
    pub(crate) fn docker_config(&self, name: &str, password: &str) -> PathBuf {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        let config = serde_json::json!({"auths": {self.host.clone(): {"auth": auth}}});
        std::fs::write(dir.join("config.json"), config.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    /// Everything the registry logged.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    /// The HTTP status the registry answers for the manifest `reference` (a tag or a digest)
    /// in the repository, asked with the right password.
    pub(crate) fn manifest_status(&self, reference: &str) -> String {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--cacert",
                &self.dir.join("ca.crt").display().to_string(),
                "-u",
                &format!("{USER}:{}", self.password),
                "-H",
                "Accept: application/vnd.docker.distribution.manifest.v2+json",
                &format!("https://{}/v2/team/af/manifests/{reference}", self.host),
            ])
            .output()
            .unwrap_or_else(|e| panic!("curl: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.trust);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
