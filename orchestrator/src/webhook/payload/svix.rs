//! Svix messages: the application's own event type and a `data` object for `--set` to fill.

use serde_json::{Value, json};

use super::Ids;

/// The message body Svix delivers for `event` (e.g. `user.created`).
pub fn event(event: &str, ids: &Ids) -> Value {
    json!({
        "type": event,
        "data": { "id": ids.id("obj") },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_the_type_and_a_data_object() {
        let body = event("user.created", &Ids::from_nonce([9; 16]));
        assert_eq!(body["type"], "user.created");
        assert!(
            body["data"]["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("obj_"))
        );
    }
}
