//! Helpers shared by the manifest tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::Path;

use af_policy::manifest::{Manifest, ManifestError};

/// A manifest using every section and most fields.
pub(crate) const FULL: &str = r#"version: 1
name: shop
services:
  - name: db
    path: ./db
    kind: worker
    port: 5432
  - name: api
    path: ./api
    dockerfile: Dockerfile.dev
    command: ["bin/server", "--port", "8080"]
    port: 8080
    health_path: /healthz
    health_timeout: 30
    env:
      DATABASE_URL: postgres://db:5432/shop
      LOG_LEVEL: debug
    replicas: 2
    resources:
      cpu: 500m
      memory: 512Mi
    depends_on: [db]
    migrate: ["bin/migrate", "up"]
  - name: nightly
    kind: cron
    schedule: "0 3 * * *"
    command: ["bin/report"]
    depends_on: [api]
egress:
  default: block
  allow_ipv6: false
  rules:
    - host: api.stripe.com
      mode: sandbox
      credential: stripe_test
      rate_limit: 10/s
    - host: "*.sendgrid.net"
      mode: capture
      note: transactional mail
runtime:
  provider: kubernetes
  domain: preview.example.com
  requires:
    region: eu-west-1
  targets:
    - name: frankfurt
      kubeconfig_context: eu-prod
      domain: eu.preview.example.com
      tags:
        region: eu-west-1
    - name: virginia
      kubeconfig_context: us-prod
      domain: us.preview.example.com
      tags:
        region: us-east-1
"#;

/// Read `text` as a manifest named `af.yaml`.
pub(crate) fn load(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::from_str(text, Path::new("af.yaml"))
}

/// The problems of a manifest that must be refused, as `(code, line, column)`.
pub(crate) fn refusals(text: &str) -> Vec<(&'static str, usize, usize)> {
    problems(text)
        .iter()
        .map(|p| (p.code(), p.location.line, p.location.column))
        .collect()
}

/// The problems of a manifest that must be refused.
pub(crate) fn problems(text: &str) -> Vec<af_policy::manifest::Problem> {
    match load(text) {
        Ok(manifest) => panic!("expected a refusal, read {manifest:#?}"),
        Err(ManifestError::Invalid { problems, .. }) => problems,
        Err(other) => panic!("expected problems with positions, got {other}"),
    }
}

/// The one-line statements of a refused manifest, for asserting on wording.
pub(crate) fn statements(text: &str) -> Vec<String> {
    problems(text)
        .into_iter()
        .map(|p| p.report.statement)
        .collect()
}
