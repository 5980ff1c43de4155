//! Values synthesised for synth mode, deterministic per request: the request's digest seeds a
//! generator ([`Dice`]), and [`Schemas`] makes a value that a JSON schema accepts from it.

use std::time::{Duration, UNIX_EPOCH};

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::answer::modes::Exchange;
use crate::answer::modes::pack::Hit;

/// How many times one `$ref` may be expanded inside itself before the value stops there.
pub(crate) const REF_REPEATS: usize = 2;
/// Most array items synthesised, whatever `minItems` asks.
const MAX_ITEMS: u64 = 64;
/// Longest string synthesised, whatever `minLength` asks.
const MAX_LENGTH: u64 = 4096;
/// How many `$ref` hops a response or example object may take.
const MAX_HOPS: usize = 8;
/// Synthesised date-times fall in 2020-2029.
const DATES: (i64, i64) = (1_577_836_800, 1_893_455_999);
/// The schema that allows anything (`items` left out).
static ANY: Value = Value::Bool(true);

/// Follow local `$ref`s (`#/components/responses/...`) from a response or example object.
pub(crate) fn follow_refs<'d>(doc: &'d Value, mut value: &'d Value) -> &'d Value {
    for _ in 0..MAX_HOPS {
        let target = value
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| doc.pointer(pointer));
        match target {
            Some(next) => value = next,
            None => break,
        }
    }
    value
}

/// The digest that seeds a request's answer: SHA-256 over method, host, path, query and body,
/// each preceded by its length. The same request always has the same digest.
pub(crate) fn request_digest(ex: &Exchange<'_>) -> [u8; 32] {
    let mut digest = Sha256::new();
    let parts: [&[u8]; 5] = [
        ex.method.as_str().as_bytes(),
        ex.host.as_bytes(),
        ex.path.as_bytes(),
        ex.query.unwrap_or_default().as_bytes(),
        ex.body,
    ];
    for part in parts {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    digest.finalize().into()
}

/// The request-seeded random source and the primitive values made from it.
pub(crate) struct Dice {
    rng: ChaCha8Rng,
}

impl Dice {
    pub(crate) fn seeded(ex: &Exchange<'_>) -> Dice {
        Dice {
            rng: ChaCha8Rng::from_seed(request_digest(ex)),
        }
    }

    /// An index below `n` (which is not zero).
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    /// An integer in `lo..=hi` (`lo` if the range is empty).
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (i128::from(hi) - i128::from(lo) + 1) as u128;
        let offset = u128::from(self.rng.next_u64()) % span;
        (i128::from(lo) + offset as i128) as i64
    }

    /// A count in `lo..=hi`.
    fn count(&mut self, lo: u64, hi: u64) -> u64 {
        self.between(lo as i64, hi as i64).unsigned_abs()
    }

    /// A float in `0..1`.
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn coin(&mut self) -> bool {
        self.rng.next_u32() & 1 == 1
    }

    fn word(&mut self, len: u64) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len)
            .map(|_| char::from(ALPHABET[self.below(ALPHABET.len())]))
            .collect()
    }

    fn date_time(&mut self) -> String {
        let secs = self.between(DATES.0, DATES.1).unsigned_abs();
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
    }

    fn email(&mut self) -> String {
        format!("{}@example.com", self.word(8))
    }

    fn uri(&mut self) -> String {
        format!("https://example.com/{}", self.word(8))
    }

    fn uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        self.rng.fill_bytes(&mut bytes);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// The pack route's JSON with every leaf re-drawn by its type. Strings that carry a path
    /// parameter, and keyword-like strings (`succeeded`, `chat.completion`: usually values a
    /// client dispatches on), are kept.
    pub(crate) fn reshape(&mut self, value: &Value, hit: &Hit<'_>) -> Value {
        match value {
            Value::Null => Value::Null,
            Value::Bool(_) => Value::Bool(self.coin()),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Value::from((i as f64 * (0.5 + self.unit())).round() as i64),
                None => Value::from(n.as_f64().unwrap_or_default() * (0.5 + self.unit())),
            },
            Value::String(s) if hit.names_parameter(s) || is_keyword(s) => value.clone(),
            Value::String(s) => Value::String(self.string_like(s)),
            Value::Array(items) => items.iter().map(|v| self.reshape(v, hit)).collect(),
            Value::Object(fields) => fields
                .iter()
                .map(|(k, v)| (k.clone(), self.reshape(v, hit)))
                .collect(),
        }
    }

    /// A new string of the same kind: a date-time, email, UUID, or the same URL host; anything
    /// else keeps its id prefix (`cus_`), punctuation and letter/digit pattern.
    fn string_like(&mut self, sample: &str) -> String {
        if humantime::parse_rfc3339_weak(sample).is_ok() {
            return self.date_time();
        }
        if is_uuid(sample) {
            return self.uuid();
        }
        if sample.contains('@') && !sample.contains(char::is_whitespace) {
            return self.email();
        }
        let kept = match sample.split_once("://") {
            Some((scheme, rest)) => scheme.len() + 3 + rest.find('/').unwrap_or(rest.len()),
            None => id_prefix_len(sample),
        };
        let mut out = String::with_capacity(sample.len());
        out.push_str(&sample[..kept]);
        for c in sample[kept..].chars() {
            out.push(match c {
                'a'..='z' => char::from(b'a' + self.below(26) as u8),
                'A'..='Z' => char::from(b'A' + self.below(26) as u8),
                '0'..='9' => char::from(b'0' + self.below(10) as u8),
                other => other,
            });
        }
        out
    }
}

/// Identifier-like words such as `requires_payment_method`, `gpt-4o-mini`, `User` or `EUR`
/// (ids, which mix cases and digits, are not).
fn is_keyword(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next().filter(char::is_ascii_alphabetic) else {
        return false;
    };
    let rest = chars.as_str();
    let lower = rest
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    let upper =
        first.is_ascii_uppercase() && rest.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    s.len() <= 40 && (lower || upper)
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The length of a leading `word_` or `word-` id prefix (`cus_`, `chatcmpl-`), or 0.
fn id_prefix_len(s: &str) -> usize {
    let word = s.bytes().take_while(u8::is_ascii_lowercase).count();
    match s.as_bytes().get(word) {
        Some(b'_' | b'-') if word > 0 => word + 1,
        _ => 0,
    }
}

/// Values synthesised from schemas of one description.
pub(crate) struct Schemas<'d, 'r> {
    doc: &'d Value,
    dice: &'r mut Dice,
    /// The `$ref`s being expanded, outermost first.
    refs: Vec<&'d str>,
}

impl<'d, 'r> Schemas<'d, 'r> {
    pub(crate) fn new(doc: &'d Value, dice: &'r mut Dice) -> Self {
        Self {
            doc,
            dice,
            refs: Vec::new(),
        }
    }

    /// A media object's value: its `example`, its first `examples` entry, else its schema's.
    pub(crate) fn media(&mut self, media: &'d Value) -> Value {
        if let Some(example) = media.get("example") {
            return example.clone();
        }
        let first_example = media
            .get("examples")
            .and_then(Value::as_object)
            .and_then(|examples| examples.values().next())
            .and_then(|example| follow_refs(self.doc, example).get("value"));
        if let Some(example) = first_example {
            return example.clone();
        }
        media.get("schema").map_or(Value::Null, |s| self.value(s))
    }

    fn value(&mut self, schema: &'d Value) -> Value {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return self.follow(reference);
        }
        let example = schema
            .get("example")
            .or_else(|| schema.get("examples").and_then(|e| e.get(0)))
            .or_else(|| schema.get("const"));
        if let Some(example) = example {
            return example.clone();
        }
        if let Some(choices) = schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
        {
            return choices[self.dice.below(choices.len())].clone();
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            return self.all_of(schema, parts);
        }
        let first_branch = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(|branches| branches.get(0));
        if let Some(branch) = first_branch {
            return self.value(branch);
        }
        match schema_type(schema) {
            "object" => self.object(schema),
            "array" => self.array(schema),
            "integer" => self.integer(schema),
            "number" => self.number(schema),
            "boolean" => Value::Bool(self.dice.coin()),
            "null" => Value::Null,
            _ => Value::String(self.string(schema)),
        }
    }

    /// Expand a local `$ref`; a schema met again inside itself is expanded shallowly (required
    /// fields only, no array items), and a third time not at all.
    fn follow(&mut self, reference: &'d str) -> Value {
        let repeats = self.refs.iter().filter(|r| **r == reference).count();
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| self.doc.pointer(pointer));
        let Some(target) = target.filter(|_| repeats < REF_REPEATS) else {
            return Value::Null;
        };
        self.refs.push(reference);
        let value = self.value(target);
        self.refs.pop();
        value
    }

    /// Whether some `$ref` is being expanded inside itself.
    fn shallow(&self) -> bool {
        self.refs
            .iter()
            .enumerate()
            .any(|(i, r)| self.refs[..i].contains(r))
    }

    /// Objects from every branch merged (what `allOf` means for the usual base-plus-extension
    /// pattern); a non-object composition answers its first branch.
    fn all_of(&mut self, schema: &'d Value, parts: &'d [Value]) -> Value {
        let mut merged: Option<Map<String, Value>> = None;
        let mut first = None;
        for part in parts {
            match self.value(part) {
                Value::Object(fields) => merged.get_or_insert_default().extend(fields),
                other => {
                    first.get_or_insert(other);
                }
            }
        }
        if schema.get("properties").is_some()
            && let Value::Object(own) = self.object(schema)
        {
            merged.get_or_insert_default().extend(own);
        }
        merged.map_or_else(|| first.unwrap_or(Value::Null), Value::Object)
    }

    fn object(&mut self, schema: &'d Value) -> Value {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let shallow = self.shallow();
        let mut fields = Map::new();
        for (name, property) in schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let write_only = property.get("writeOnly") == Some(&Value::Bool(true));
            if write_only || (shallow && !required.contains(&name.as_str())) {
                continue;
            }
            let value = self.value(property);
            fields.insert(name.clone(), value);
        }
        Value::Object(fields)
    }

    fn array(&mut self, schema: &'d Value) -> Value {
        let min = unsigned(schema, "minItems").unwrap_or(0).min(MAX_ITEMS);
        let max = unsigned(schema, "maxItems").unwrap_or(u64::MAX);
        let count = if self.shallow() {
            min
        } else {
            let lo = min.max(1).min(max);
            self.dice.count(lo, max.min(lo + 2))
        };
        let items = schema.get("items").unwrap_or(&ANY);
        (0..count).map(|_| self.value(items)).collect()
    }

    fn string(&mut self, schema: &Value) -> String {
        match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => self.dice.date_time(),
            Some("date") => {
                let mut date = self.dice.date_time();
                date.truncate("yyyy-mm-dd".len());
                date
            }
            Some("email") => self.dice.email(),
            Some("uuid") => self.dice.uuid(),
            Some("uri" | "url") => self.dice.uri(),
            _ => {
                let min = unsigned(schema, "minLength").unwrap_or(0).min(MAX_LENGTH);
                let max = unsigned(schema, "maxLength").unwrap_or(u64::MAX);
                let lo = min.max(6).min(max);
                let len = self.dice.count(lo, max.min(lo + 6));
                self.dice.word(len)
            }
        }
    }

    fn integer(&mut self, schema: &Value) -> Value {
        let lo = bound(schema, "minimum", "exclusiveMinimum")
            .map(|(x, exclusive)| if exclusive { x.floor() + 1.0 } else { x.ceil() } as i64);
        let hi = bound(schema, "maximum", "exclusiveMaximum")
            .map(|(x, exclusive)| if exclusive { x.ceil() - 1.0 } else { x.floor() } as i64);
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            (Some(lo), None) => (lo, lo.saturating_add(1000)),
            (None, Some(hi)) => (if hi >= 1 { 1 } else { hi.saturating_sub(1000) }, hi),
            (None, None) => (1, 1000),
        };
        Value::from(self.dice.between(lo, hi))
    }

    fn number(&mut self, schema: &Value) -> Value {
        let lo = bound(schema, "minimum", "exclusiveMinimum");
        let hi = bound(schema, "maximum", "exclusiveMaximum");
        let (low, high) = match (lo, hi) {
            (Some((lo, _)), Some((hi, _))) => (lo, hi),
            (Some((lo, _)), None) => (lo, lo + 1000.0),
            (None, Some((hi, _))) => (if hi > 0.0 { 0.0 } else { hi - 1000.0 }, hi),
            (None, None) => (0.0, 1000.0),
        };
        let drawn = ((low + (high - low) * self.dice.unit()) * 100.0).round() / 100.0;
        let inside = |v: f64| {
            lo.is_none_or(|(l, excl)| if excl { v > l } else { v >= l })
                && hi.is_none_or(|(h, excl)| if excl { v < h } else { v <= h })
        };
        Value::from(if inside(drawn) {
            drawn
        } else {
            (low + high) / 2.0
        })
    }
}

/// The schema's type: `type` (the first non-null of a list), else inferred from its keywords.
fn schema_type(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    }
}

/// A numeric bound and whether it is exclusive: OpenAPI 3.1's numeric `exclusiveMinimum`, or
/// 3.0's `minimum` with `exclusiveMinimum: true`.
fn bound(schema: &Value, inclusive: &str, exclusive: &str) -> Option<(f64, bool)> {
    match schema.get(exclusive) {
        Some(Value::Number(n)) => n.as_f64().map(|x| (x, true)),
        Some(Value::Bool(true)) => schema.get(inclusive)?.as_f64().map(|x| (x, true)),
        _ => schema.get(inclusive)?.as_f64().map(|x| (x, false)),
    }
}

fn unsigned(schema: &Value, key: &str) -> Option<u64> {
    let value = schema.get(key)?;
    value
        .as_u64()
        .or_else(|| value.as_f64().filter(|x| *x >= 0.0).map(|x| x as u64))
}
