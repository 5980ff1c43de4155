//! Stripe events: the `event` envelope around an object of the event's family
//! (`payment_intent.*`, `checkout.session.*`, `customer.subscription.*`, `customer.*`,
//! `invoice.*`; anything else gets a generic object named after its family).

use serde_json::{Value, json};

use super::Ids;

/// The API version the events claim.
pub const API_VERSION: &str = "2024-06-20";
/// The amount every made-up object carries, in cents.
const AMOUNT: u64 = 2000;
/// The made-up customer's address.
const EMAIL: &str = "customer@example.com";

/// The event `event` (e.g. `payment_intent.succeeded`) as Stripe posts it.
pub fn event(event: &str, ids: &Ids, created: u64) -> Value {
    json!({
        "id": ids.id("evt"),
        "object": "event",
        "api_version": API_VERSION,
        "created": created,
        "livemode": false,
        "pending_webhooks": 1,
        "request": { "id": null, "idempotency_key": null },
        "type": event,
        "data": { "object": object(event, ids, created) },
    })
}

/// The object of the event's family, in the state the event's last word implies.
fn object(event: &str, ids: &Ids, created: u64) -> Value {
    let (family, action) = event.rsplit_once('.').unwrap_or((event, ""));
    match family {
        "payment_intent" => payment_intent(action, ids, created),
        "checkout.session" => checkout_session(action, ids, created),
        "customer.subscription" => subscription(action, ids, created),
        "invoice" => invoice(action, ids, created),
        f if f == "customer" || f.starts_with("customer.") => customer(action, ids, created),
        f => generic(f, ids, created),
    }
}

fn payment_intent(action: &str, ids: &Ids, created: u64) -> Value {
    let status = match action {
        "succeeded" => "succeeded",
        "canceled" => "canceled",
        "processing" => "processing",
        "requires_action" => "requires_action",
        "amount_capturable_updated" => "requires_capture",
        _ => "requires_payment_method",
    };
    let succeeded = status == "succeeded";
    let error = (action == "payment_failed").then(|| {
        json!({
            "type": "card_error",
            "code": "card_declined",
            "decline_code": "generic_decline",
            "message": "Your card was declined.",
        })
    });
    json!({
        "id": ids.id("pi"),
        "object": "payment_intent",
        "amount": AMOUNT,
        "amount_received": if succeeded { AMOUNT } else { 0 },
        "currency": "usd",
        "status": status,
        "customer": ids.id("cus"),
        "payment_method": ids.id("pm"),
        "latest_charge": succeeded.then(|| ids.id("ch")),
        "last_payment_error": error,
        "description": null,
        "receipt_email": EMAIL,
        "metadata": {},
        "livemode": false,
        "created": created,
    })
}

fn checkout_session(action: &str, ids: &Ids, created: u64) -> Value {
    let (status, payment_status) = match action {
        "completed" | "async_payment_succeeded" => ("complete", "paid"),
        "async_payment_failed" => ("complete", "unpaid"),
        "expired" => ("expired", "unpaid"),
        _ => ("open", "unpaid"),
    };
    json!({
        "id": ids.id("cs_test"),
        "object": "checkout.session",
        "mode": "payment",
        "status": status,
        "payment_status": payment_status,
        "amount_subtotal": AMOUNT,
        "amount_total": AMOUNT,
        "currency": "usd",
        "customer": ids.id("cus"),
        "customer_details": { "email": EMAIL, "name": "Test Customer" },
        "client_reference_id": null,
        "payment_intent": ids.id("pi"),
        "subscription": null,
        "success_url": "https://example.com/success",
        "cancel_url": "https://example.com/cancel",
        "url": null,
        "metadata": {},
        "livemode": false,
        "created": created,
        "expires_at": created + 24 * 3600,
    })
}

fn customer(action: &str, ids: &Ids, created: u64) -> Value {
    let mut customer = json!({
        "id": ids.id("cus"),
        "object": "customer",
        "email": EMAIL,
        "name": "Test Customer",
        "phone": null,
        "description": null,
        "metadata": {},
        "livemode": false,
        "created": created,
    });
    if action == "deleted" {
        customer["deleted"] = json!(true);
    }
    customer
}

fn subscription(action: &str, ids: &Ids, created: u64) -> Value {
    let status = match action {
        "deleted" => "canceled",
        "paused" => "paused",
        "trial_will_end" => "trialing",
        _ => "active",
    };
    json!({
        "id": ids.id("sub"),
        "object": "subscription",
        "customer": ids.id("cus"),
        "status": status,
        "currency": "usd",
        "current_period_start": created,
        "current_period_end": created + 30 * 24 * 3600,
        "cancel_at_period_end": false,
        "items": {
            "object": "list",
            "has_more": false,
            "data": [{
                "id": ids.id("si"),
                "object": "subscription_item",
                "quantity": 1,
                "price": {
                    "id": ids.id("price"),
                    "object": "price",
                    "product": ids.id("prod"),
                    "unit_amount": AMOUNT,
                    "currency": "usd",
                    "recurring": { "interval": "month", "interval_count": 1 },
                },
            }],
        },
        "metadata": {},
        "livemode": false,
        "created": created,
    })
}

fn invoice(action: &str, ids: &Ids, created: u64) -> Value {
    let status = match action {
        "paid" | "payment_succeeded" => "paid",
        "created" => "draft",
        "voided" => "void",
        "marked_uncollectible" => "uncollectible",
        _ => "open",
    };
    let paid = status == "paid";
    json!({
        "id": ids.id("in"),
        "object": "invoice",
        "number": "AF-0001",
        "customer": ids.id("cus"),
        "customer_email": EMAIL,
        "subscription": ids.id("sub"),
        "status": status,
        "paid": paid,
        "amount_due": AMOUNT,
        "amount_paid": if paid { AMOUNT } else { 0 },
        "amount_remaining": if paid { 0 } else { AMOUNT },
        "attempt_count": u8::from(action == "payment_failed"),
        "currency": "usd",
        "billing_reason": "subscription_cycle",
        "hosted_invoice_url": "https://invoice.stripe.com/i/af_test",
        "lines": { "object": "list", "data": [], "has_more": false },
        "metadata": {},
        "livemode": false,
        "created": created,
    })
}

/// An object named after the family's last word (`charge.refunded` → a `charge`).
fn generic(family: &str, ids: &Ids, created: u64) -> Value {
    let object = family.rsplit('.').next().unwrap_or(family);
    json!({
        "id": ids.id("obj"),
        "object": object,
        "metadata": {},
        "livemode": false,
        "created": created,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Ids {
        Ids::from_nonce([3; 16])
    }

    #[test]
    fn the_envelope_is_a_test_mode_event_of_the_type_asked() {
        let e = event("payment_intent.succeeded", &ids(), 1_700_000_000);
        assert_eq!(e["object"], "event");
        assert_eq!(e["type"], "payment_intent.succeeded");
        assert_eq!(e["livemode"], false);
        assert_eq!(e["created"], 1_700_000_000);
        assert_eq!(e["api_version"], API_VERSION);
        assert!(e["id"].as_str().is_some_and(|id| id.starts_with("evt_")));
    }

    #[test]
    fn each_family_gets_its_object_in_the_state_the_event_names() {
        let obj = |t: &str| event(t, &ids(), 1)["data"]["object"].clone();
        let pi = obj("payment_intent.succeeded");
        assert_eq!(
            (pi["object"].as_str(), pi["status"].as_str()),
            (Some("payment_intent"), Some("succeeded"))
        );
        assert_eq!(pi["amount_received"], pi["amount"]);
        let failed = obj("payment_intent.payment_failed");
        assert_eq!(failed["status"], "requires_payment_method");
        assert_eq!(failed["last_payment_error"]["code"], "card_declined");

        let cs = obj("checkout.session.completed");
        assert_eq!(
            (cs["object"].as_str(), cs["payment_status"].as_str()),
            (Some("checkout.session"), Some("paid"))
        );
        assert_eq!(obj("checkout.session.expired")["status"], "expired");

        assert_eq!(obj("customer.created")["object"], "customer");
        assert_eq!(obj("customer.deleted")["deleted"], true);
        let sub = obj("customer.subscription.deleted");
        assert_eq!(
            (sub["object"].as_str(), sub["status"].as_str()),
            (Some("subscription"), Some("canceled"))
        );

        let paid = obj("invoice.paid");
        assert_eq!(
            (paid["status"].as_str(), paid["amount_remaining"].as_u64()),
            (Some("paid"), Some(0))
        );
        let unpaid = obj("invoice.payment_failed");
        assert_eq!(
            (unpaid["status"].as_str(), unpaid["attempt_count"].as_u64()),
            (Some("open"), Some(1))
        );
        assert_eq!(
            unpaid["customer"], sub["customer"],
            "one customer throughout a trigger"
        );

        let charge = obj("charge.refunded");
        assert_eq!(charge["object"], "charge");
        assert_eq!(
            obj("radar.early_fraud_warning.created")["object"],
            "early_fraud_warning"
        );
    }
}
