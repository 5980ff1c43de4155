//! The fixture packs af ships for common APIs, embedded at build time from `fixtures/packs/`.

use serde_json::Value;

use crate::answer::modes::pack::{Pack, PackError};

/// Each built-in pack's file name and YAML text.
const SOURCES: [(&str, &str); 3] = [
    (
        "stripe.yaml",
        include_str!("../../../../fixtures/packs/stripe.yaml"),
    ),
    (
        "github.yaml",
        include_str!("../../../../fixtures/packs/github.yaml"),
    ),
    (
        "openai.yaml",
        include_str!("../../../../fixtures/packs/openai.yaml"),
    ),
];

/// Parse every built-in pack.
pub(super) fn packs() -> Result<Vec<Pack>, PackError> {
    SOURCES
        .iter()
        .map(|(file, text)| {
            let doc: Value = serde_saphyr::from_str(text).map_err(|e| PackError::BuiltinYaml {
                pack: file,
                reason: e.to_string().lines().next().unwrap_or_default().to_owned(),
            })?;
            Pack::from_value(file, &doc)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;
    use crate::answer::modes::mock;
    use crate::answer::modes::pack::testing::Request;

    /// A request that a route is written for: parameters filled, its query and body sent.
    fn request_for(host: &str, route: &crate::answer::modes::pack::Route) -> Request {
        let mut path = route.path().to_string();
        for name in route.path().parameters() {
            path = path.replace(&format!("{{{name}}}"), &format!("sample_{name}"));
        }
        let mut request = Request::new(route.method().as_str(), host, &path);
        if !route.query().is_empty() {
            request.query = serde_urlencoded::to_string(route.query()).ok();
        }
        match route.body() {
            Some(body) => request.json(body),
            None => request,
        }
    }

    #[test]
    fn every_builtin_pack_parses_and_each_route_answers() {
        let packs = packs().expect("built-in packs parse");
        assert_eq!(packs.len(), SOURCES.len());
        for pack in &packs {
            let host = pack
                .hosts()
                .first()
                .expect("a built-in pack names its hosts");
            assert!(!pack.routes().is_empty(), "{} has routes", pack.name());
            for route in pack.routes() {
                let request = request_for(host, route);
                let exchange = request.exchange();
                let hit = pack.find(&exchange).expect("the route's own request hits");
                assert!(
                    std::ptr::eq(hit.route(), route),
                    "{} {} {} is answered by its own route",
                    pack.name(),
                    route.method(),
                    route.path()
                );
                let answer = mock::answer(Some(pack), &exchange);
                assert_eq!(answer.headers[mock::HEADER], "hit");
                assert_eq!(answer.status, route.status());
                if answer.status != StatusCode::NO_CONTENT {
                    let body = serde_json::from_slice::<Value>(&answer.body);
                    assert!(
                        body.is_ok(),
                        "{} {} answers JSON",
                        route.method(),
                        route.path()
                    );
                }
            }
        }
    }

    #[test]
    fn builtin_packs_cover_the_common_apis() {
        let packs = packs().expect("built-in packs parse");
        for host in ["api.stripe.com", "api.github.com", "api.openai.com"] {
            assert!(
                packs.iter().any(|p| p.hosts().iter().any(|h| h == host)),
                "a built-in pack answers {host}"
            );
        }
    }
}
