//! GitHub events. `EVENT` is the `X-GitHub-Event` name, optionally with the payload's action
//! after a dot (`pull_request.closed`); `push`, `pull_request`, `issues` and `ping` get their
//! full payloads, anything else the repository and sender every payload carries.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use super::Ids;

/// The made-up repository's owner and name.
const OWNER: &str = "af-test";
const REPO: &str = "app";

/// The `X-GitHub-Event` header of `event`: the part before any dot.
pub fn event_name(event: &str) -> &str {
    event.split_once('.').map_or(event, |(name, _)| name)
}

/// The action the payload carries: the part after the dot, else the event's usual one.
fn action(event: &str) -> Option<&str> {
    match event.split_once('.') {
        Some((_, action)) => Some(action),
        None => match event {
            "pull_request" | "issues" => Some("opened"),
            "issue_comment" => Some("created"),
            "release" => Some("published"),
            _ => None,
        },
    }
}

/// The payload GitHub posts for `event`, created at `created` (unix seconds).
pub fn event(event: &str, ids: &Ids, created: u64) -> Value {
    let at =
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(created)).to_string();
    let action = action(event);
    let mut body = match event_name(event) {
        "push" => push(ids, &at),
        "pull_request" => json!({ "number": 1, "pull_request": pull_request(action, ids, &at) }),
        "issues" => json!({ "issue": issue(action, &at) }),
        "ping" => ping(),
        _ => json!({}),
    };
    if let Some(action) = action {
        body["action"] = json!(action);
    }
    body["repository"] = repository();
    body["sender"] = sender();
    body
}

fn url(path: &str) -> String {
    format!("https://github.com/{OWNER}/{REPO}{path}")
}

fn repository() -> Value {
    json!({
        "id": 1,
        "name": REPO,
        "full_name": format!("{OWNER}/{REPO}"),
        "private": true,
        "html_url": url(""),
        "clone_url": url(".git"),
        "default_branch": "main",
        "owner": { "login": OWNER, "id": 2, "type": "Organization" },
    })
}

fn sender() -> Value {
    json!({ "login": "octocat", "id": 3, "type": "User" })
}

fn push(ids: &Ids, at: &str) -> Value {
    let (before, after) = (ids.sha("before"), ids.sha("after"));
    let person =
        json!({ "name": "Octo Cat", "email": "octocat@example.com", "username": "octocat" });
    let commit = json!({
        "id": after,
        "tree_id": ids.sha("tree"),
        "distinct": true,
        "message": "Update README",
        "timestamp": at,
        "url": url(&format!("/commit/{after}")),
        "author": person,
        "committer": person,
        "added": [],
        "removed": [],
        "modified": ["README.md"],
    });
    json!({
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "created": false,
        "deleted": false,
        "forced": false,
        "base_ref": null,
        "compare": url(&format!("/compare/{}...{}", &before[..12], &after[..12])),
        "commits": [commit],
        "head_commit": commit,
        "pusher": { "name": "octocat", "email": "octocat@example.com" },
    })
}

fn pull_request(action: Option<&str>, ids: &Ids, at: &str) -> Value {
    json!({
        "id": 1,
        "number": 1,
        "state": if action == Some("closed") { "closed" } else { "open" },
        "title": "Add a feature",
        "body": "Sent by af webhook trigger.",
        "user": sender(),
        "draft": false,
        "merged": false,
        "html_url": url("/pull/1"),
        "head": { "ref": "feature", "sha": ids.sha("head"), "repo": repository() },
        "base": { "ref": "main", "sha": ids.sha("base"), "repo": repository() },
        "created_at": at,
        "updated_at": at,
    })
}

fn issue(action: Option<&str>, at: &str) -> Value {
    json!({
        "id": 1,
        "number": 1,
        "title": "Something is broken",
        "body": "Sent by af webhook trigger.",
        "state": if action == Some("closed") { "closed" } else { "open" },
        "user": sender(),
        "labels": [],
        "html_url": url("/issues/1"),
        "created_at": at,
        "updated_at": at,
    })
}

fn ping() -> Value {
    json!({
        "zen": "Keep it logically awesome.",
        "hook_id": 1,
        "hook": {
            "type": "Repository",
            "id": 1,
            "name": "web",
            "active": true,
            "events": ["*"],
            "config": { "content_type": "json", "insecure_ssl": "0" },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Ids {
        Ids::from_nonce([5; 16])
    }

    #[test]
    fn the_header_name_is_before_the_dot_and_the_action_after_it() {
        assert_eq!(event_name("pull_request.closed"), "pull_request");
        assert_eq!(event_name("push"), "push");
        let closed = event("pull_request.closed", &ids(), 0);
        assert_eq!(closed["action"], "closed");
        assert_eq!(closed["pull_request"]["state"], "closed");
        let opened = event("pull_request", &ids(), 0);
        assert_eq!(opened["action"], "opened");
        assert_eq!(opened["pull_request"]["state"], "open");
        assert!(event("push", &ids(), 0).get("action").is_none());
    }

    #[test]
    fn each_event_has_its_payload_and_every_one_the_repository_and_sender() {
        let push = event("push", &ids(), 1_700_000_000);
        assert_eq!(push["ref"], "refs/heads/main");
        assert_eq!(push["head_commit"]["id"], push["after"]);
        assert_eq!(push["commits"][0]["timestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(event("issues", &ids(), 0)["issue"]["state"], "open");
        assert_eq!(event("ping", &ids(), 0)["hook"]["active"], true);
        for e in [
            "push",
            "pull_request",
            "issues.closed",
            "ping",
            "workflow_run.completed",
        ] {
            let body = event(e, &ids(), 0);
            assert_eq!(body["repository"]["full_name"], "af-test/app", "{e}");
            assert_eq!(body["sender"]["login"], "octocat", "{e}");
        }
        assert_eq!(
            event("workflow_run.completed", &ids(), 0)["action"],
            "completed"
        );
    }
}
