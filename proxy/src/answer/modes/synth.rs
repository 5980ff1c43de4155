//! Synth mode: generated answers that work offline and are deterministic. Each request seeds
//! a generator (method, host, path, query and body through SHA-256 into ChaCha8), so the same
//! request always gets the same answer and different requests get different ones.
//!
//! The answer comes from the rule's OpenAPI 3.x description (examples first, otherwise a value
//! synthesised from the response schema), else from the shape of the fixture pack's route, else
//! a 404 naming what was asked.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::pack::{Hit, Pack, PathTemplate, Problem};
use super::{Answer, Exchange, mock};

/// Header saying what the answer was made from: `openapi`, `pack` or `miss`.
pub const HEADER: &str = "x-af-synth";

/// How many times one `$ref` may be expanded inside itself before the value stops there.
const REF_REPEATS: usize = 2;
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

/// Why an OpenAPI description was refused.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The document is not OpenAPI 3.x.
    #[error("OpenAPI description {doc}: `openapi` must be a 3.x version, found {found}")]
    Version {
        /// The path the description was loaded from.
        doc: String,
        /// What the `openapi` field holds.
        found: String,
    },
    /// `paths` is missing or not a mapping.
    #[error("OpenAPI description {doc}: `paths` must be a mapping")]
    Paths {
        /// The path the description was loaded from.
        doc: String,
    },
    /// A path template is not one af can match.
    #[error("OpenAPI description {doc}: paths.{template}: {problem}")]
    Template {
        /// The path the description was loaded from.
        doc: String,
        /// The template as written (with the server's base path).
        template: String,
        /// What is wrong with it.
        problem: Problem,
    },
}

/// The repository's OpenAPI descriptions, by the path a rule's `openapi` names.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenApiDocs {
    docs: BTreeMap<String, OpenApi>,
}

impl OpenApiDocs {
    /// Index every description (YAML is already converted to JSON values by the caller).
    pub(crate) fn load(docs: &BTreeMap<String, Value>) -> Result<OpenApiDocs, SynthError> {
        let docs = docs
            .iter()
            .map(|(path, doc)| Ok((path.clone(), OpenApi::from_value(path, doc)?)))
            .collect::<Result<_, SynthError>>()?;
        Ok(OpenApiDocs { docs })
    }

    /// The description a rule names.
    pub(crate) fn get(&self, name: &str) -> Option<&OpenApi> {
        self.docs.get(name)
    }
}

/// An OpenAPI 3.x description with its operations indexed by method and path template.
#[derive(Debug, Clone)]
pub struct OpenApi {
    doc: Value,
    operations: Vec<Operation>,
}

/// One operation under one server base path, with the success answer it gives.
#[derive(Debug, Clone)]
struct Operation {
    method: Method,
    template: PathTemplate,
    status: StatusCode,
    /// The JSON media object of that response, if it has one.
    media: Option<Value>,
}

impl OpenApi {
    /// Index a description; operations without a 2xx response are left out.
    pub fn from_value(name: &str, doc: &Value) -> Result<OpenApi, SynthError> {
        let version = doc.get("openapi");
        if !version
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("3."))
        {
            return Err(SynthError::Version {
                doc: name.to_owned(),
                found: version.map_or_else(|| "nothing".to_owned(), Value::to_string),
            });
        }
        let paths =
            doc.get("paths")
                .and_then(Value::as_object)
                .ok_or_else(|| SynthError::Paths {
                    doc: name.to_owned(),
                })?;
        let mut prefixes: Vec<&str> = doc
            .get("servers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|server| server.get("url").and_then(Value::as_str))
            .map(server_base_path)
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        if prefixes.is_empty() {
            prefixes.push("");
        }
        let mut operations = Vec::new();
        for (path, item) in paths {
            for (key, operation) in item.as_object().into_iter().flatten() {
                let Some(method) = operation_method(key) else {
                    continue;
                };
                let Some((status, media)) = success(doc, operation) else {
                    continue;
                };
                for prefix in &prefixes {
                    let text = format!("{prefix}{path}");
                    let template =
                        PathTemplate::parse(&text).map_err(|problem| SynthError::Template {
                            doc: name.to_owned(),
                            template: text.clone(),
                            problem,
                        })?;
                    operations.push(Operation {
                        method: method.clone(),
                        template,
                        status,
                        media: media.cloned(),
                    });
                }
            }
        }
        Ok(OpenApi {
            doc: doc.clone(),
            operations,
        })
    }

    /// The operation for `ex`: literal segments beat parameters, ties go to the first.
    fn find(&self, ex: &Exchange<'_>) -> Option<&Operation> {
        let mut best: Option<&Operation> = None;
        for op in &self.operations {
            if op.method != *ex.method || op.template.matches(ex.path).is_none() {
                continue;
            }
            if best.is_none_or(|b| op.template.outranks(&b.template).is_gt()) {
                best = Some(op);
            }
        }
        best
    }

    /// The JSON schema of the success answer to `ex`, and the description its `$ref`s point
    /// into; `None` when no operation matches or its answer has no schema.
    pub fn response_schema(&self, ex: &Exchange<'_>) -> Option<(&Value, &Value)> {
        let schema = self.find(ex)?.media.as_ref()?.get("schema")?;
        Some((schema, &self.doc))
    }

    fn answer(&self, op: &Operation, dice: &mut Dice) -> Answer {
        match &op.media {
            Some(media) => Answer::json(op.status, &Schemas::new(&self.doc, dice).media(media)),
            None => Answer {
                status: op.status,
                headers: HeaderMap::new(),
                body: Bytes::new(),
            },
        }
    }
}

/// Answer `ex` from the OpenAPI description, else from the shape of the pack's route, else 404.
pub fn answer(doc: Option<&OpenApi>, pack: Option<&Pack>, ex: &Exchange<'_>) -> Answer {
    let mut dice = Dice::seeded(ex);
    if let Some(doc) = doc
        && let Some(op) = doc.find(ex)
    {
        return mock::marked(doc.answer(op, &mut dice), HEADER, "openapi");
    }
    if let Some(hit) = pack.and_then(|p| p.find(ex)) {
        let answer = hit.answer_with(|json| dice.reshape(json, &hit));
        return mock::marked(answer, HEADER, "pack");
    }
    let why = "no OpenAPI operation and no fixture route matches this request";
    mock::marked(mock::miss(pack, ex, why), HEADER, "miss")
}

/// The path part of a server URL (`https://api.example.com/v1` → `/v1`), without a trailing `/`.
/// Server URLs may hold `{variables}`, so they are not parsed as URIs.
fn server_base_path(url: &str) -> &str {
    let path = match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |slash| &rest[slash..]),
        None if url.starts_with('/') => url,
        None => "",
    };
    path.trim_end_matches('/')
}

fn operation_method(key: &str) -> Option<Method> {
    Some(match key {
        "get" => Method::GET,
        "put" => Method::PUT,
        "post" => Method::POST,
        "delete" => Method::DELETE,
        "options" => Method::OPTIONS,
        "head" => Method::HEAD,
        "patch" => Method::PATCH,
        "trace" => Method::TRACE,
        _ => return None,
    })
}

/// The operation's success answer: the lowest 2xx status with a JSON body, else the lowest 2xx
/// (answered empty). `2XX` counts as 200 after the explicit codes.
fn success<'d>(doc: &'d Value, operation: &'d Value) -> Option<(StatusCode, Option<&'d Value>)> {
    let mut candidates: Vec<(u16, bool, &Value)> = operation
        .get("responses")?
        .as_object()?
        .iter()
        .filter_map(|(code, response)| {
            let (status, explicit) = match code.parse::<u16>() {
                Ok(status) => (status, true),
                Err(_) if code.eq_ignore_ascii_case("2xx") => (200, false),
                Err(_) => return None,
            };
            (200..300)
                .contains(&status)
                .then(|| (status, explicit, follow_refs(doc, response)))
        })
        .collect();
    candidates.sort_by_key(|(status, explicit, _)| (!explicit, *status));
    let with_json = candidates
        .iter()
        .find_map(|(status, _, response)| Some((*status, json_media(response)?)));
    let (status, media) = match with_json {
        Some((status, media)) => (status, Some(media)),
        None => (candidates.first()?.0, None),
    };
    Some((StatusCode::from_u16(status).ok()?, media))
}

/// The response's JSON media object (`application/json` first, then any `...json` type) that
/// has a schema or an example.
fn json_media(response: &Value) -> Option<&Value> {
    let content = response.get("content")?.as_object()?;
    let usable = |media: &&Value| {
        ["schema", "example", "examples"]
            .iter()
            .any(|k| media.get(k).is_some())
    };
    content.get("application/json").filter(usable).or_else(|| {
        content
            .iter()
            .filter(|(media_type, _)| {
                let essence = media_type.split(';').next().unwrap_or_default().trim();
                essence.ends_with("json")
            })
            .map(|(_, media)| media)
            .find(usable)
    })
}

/// Follow local `$ref`s (`#/components/responses/...`) from a response or example object.
fn follow_refs<'d>(doc: &'d Value, mut value: &'d Value) -> &'d Value {
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
struct Dice {
    rng: ChaCha8Rng,
}

impl Dice {
    fn seeded(ex: &Exchange<'_>) -> Dice {
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
    fn reshape(&mut self, value: &Value, hit: &Hit<'_>) -> Value {
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
struct Schemas<'d, 'r> {
    doc: &'d Value,
    dice: &'r mut Dice,
    /// The `$ref`s being expanded, outermost first.
    refs: Vec<&'d str>,
}

impl<'d, 'r> Schemas<'d, 'r> {
    fn new(doc: &'d Value, dice: &'r mut Dice) -> Self {
        Self {
            doc,
            dice,
            refs: Vec::new(),
        }
    }

    /// A media object's value: its `example`, its first `examples` entry, else its schema's.
    fn media(&mut self, media: &'d Value) -> Value {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::answer::modes::pack::testing::Request;

    const SHOP: &str = "openapi/shop.yaml";
    const HOST: &str = "api.shop.example";

    fn shop_doc() -> Value {
        serde_saphyr::from_str(include_str!("../../../../fixtures/openapi/shop.yaml"))
            .expect("the demo description is YAML")
    }

    fn shop() -> OpenApiDocs {
        OpenApiDocs::load(&BTreeMap::from([(SHOP.to_owned(), shop_doc())]))
            .expect("the demo description loads")
    }

    fn ask(docs: &OpenApiDocs, request: &Request) -> Answer {
        answer(docs.get(SHOP), None, &request.exchange())
    }

    fn body(answer: &Answer) -> Value {
        serde_json::from_slice(&answer.body).expect("a JSON body")
    }

    /// A validator for one component schema of the demo description (OpenAPI 3.0 schemas are
    /// JSON Schema plus annotations the validator ignores).
    fn validator(component: &str) -> jsonschema::Validator {
        let schema = json!({
            "$ref": format!("#/components/schemas/{component}"),
            "components": shop_doc()["components"],
        });
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the component is a schema")
    }

    #[test]
    fn same_request_gets_byte_identical_answer_and_other_ids_differ() {
        let docs = shop();
        let first = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1"));
        let again = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1"));
        let other = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_2"));
        assert_eq!(first.headers[HEADER], "openapi");
        assert_eq!(first.status, StatusCode::OK);
        assert_eq!(first.body, again.body);
        assert_ne!(first.body, other.body);
    }

    #[test]
    fn body_and_query_seed_the_answer() {
        let docs = shop();
        let one = Request::new("POST", HOST, "/v1/orders")
            .json(&json!({"customer_email": "a@example.com"}));
        let two = Request::new("POST", HOST, "/v1/orders")
            .json(&json!({"customer_email": "b@example.com"}));
        let page = ask(&docs, &Request::new("GET", HOST, "/v1/orders?limit=1"));
        let other_page = ask(&docs, &Request::new("GET", HOST, "/v1/orders?limit=2"));
        let created = ask(&docs, &one);
        assert_eq!(created.status, StatusCode::CREATED);
        assert_ne!(created.body, ask(&docs, &two).body);
        assert_ne!(page.body, other_page.body);
    }

    #[test]
    fn synthesised_values_satisfy_their_schemas() {
        let docs = shop();
        let order = validator("Order");
        let list = validator("OrderList");
        let payments = validator("Payment");
        let mut broken = body(&ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1")));
        broken["customer"]["email"] = json!("not an email");
        assert!(
            !order.is_valid(&broken),
            "the checker catches a wrong format"
        );
        for n in 0..40 {
            let one = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/orders/o_{n}")),
            ));
            let errors: Vec<String> = order.iter_errors(&one).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{one} breaks Order: {errors:?}");
            assert!(
                one.get("password").is_none(),
                "writeOnly fields are not answered"
            );
            let page = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/orders?limit={n}")),
            ));
            assert!(list.is_valid(&page), "{page} breaks OrderList");
            let payment = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/payments/p{n}")),
            ));
            assert!(payments.is_valid(&payment), "{payment} breaks Payment");
        }
    }

    #[test]
    fn recursive_refs_are_bounded_and_still_valid() {
        fn depth(category: &Value) -> usize {
            let children = category["children"].as_array().into_iter().flatten();
            let parent = category.get("parent").into_iter();
            1 + children.chain(parent).map(depth).max().unwrap_or(0)
        }
        let docs = shop();
        let category = validator("Category");
        for n in 0..10 {
            let answer = ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/categories/c{n}")),
            );
            let value = body(&answer);
            assert!(category.is_valid(&value), "{value} breaks Category");
            assert!(depth(&value) <= 1 + REF_REPEATS, "{value} nests too deep");
        }
    }

    #[test]
    fn examples_are_preferred_to_synthesis() {
        let docs = shop();
        let receipt = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1/receipt"));
        assert_eq!(
            body(&receipt),
            json!({"number": "R-1001", "total": 42.5, "currency": "EUR"})
        );
        let status = ask(&docs, &Request::new("GET", HOST, "/v1/status"));
        assert_eq!(body(&status), json!({"state": "operational"}));
        let order = body(&ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1")));
        let skus: Vec<&Value> = order["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| &i["sku"])
            .collect();
        assert!(
            !skus.is_empty() && skus.iter().all(|s| *s == "SKU-0001"),
            "{order}"
        );
    }

    #[test]
    fn operations_are_found_under_the_server_base_path_literal_first() {
        let docs = shop();
        let search = ask(&docs, &Request::new("GET", HOST, "/v1/orders/search"));
        assert!(
            body(&search)["ids"].is_array(),
            "2XX with a literal path wins over {{orderId}}"
        );
        let cancelled = ask(&docs, &Request::new("DELETE", HOST, "/v1/orders/o_1"));
        assert_eq!(cancelled.status, StatusCode::NO_CONTENT);
        assert!(cancelled.body.is_empty());
        let outside = ask(&docs, &Request::new("GET", HOST, "/orders/o_1"));
        assert_eq!(outside.status, StatusCode::NOT_FOUND);
        assert_eq!(outside.headers[HEADER], "miss");
        assert_eq!(body(&outside)["asked"]["path"], "/orders/o_1");
    }

    #[test]
    fn exclusive_bounds_of_both_openapi_versions_hold() {
        let doc = json!({"openapi": "3.0.0", "paths": {"/n": {"get": {"responses": {"200": {
        "content": {"application/json": {"schema": {"type": "object", "properties": {
            "v30": {"type": "integer", "minimum": 0, "maximum": 1, "exclusiveMinimum": true},
            "v31": {"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 6},
            "f": {"type": "number", "minimum": 0.5, "maximum": 0.5},
        }}}}}}}}}});
        let doc = OpenApi::from_value("n.yaml", &doc).expect("loads");
        let answer = answer(Some(&doc), None, &Request::new("GET", "h", "/n").exchange());
        assert_eq!(body(&answer), json!({"v30": 1, "v31": 5, "f": 0.5}));
    }

    #[test]
    fn pack_shape_is_kept_with_leaves_redrawn() {
        let pack = Pack::from_value("p", &json!([{"method": "GET", "path": "/v1/customers/{id}", "json": {
            "id": "{id}", "object": "customer", "created": 1700000000, "email": "jenny@example.com",
            "name": "Jenny Rosen", "at": "2024-01-02T03:04:05Z", "ref": "cus_AbC123", "ok": true,
            "nested": {"list": [1, 2.5, null]}, "url": "https://shop.example/a/B1",
            "kinds": ["User", "EUR", "gpt-4o-mini"],
        }}]))
        .expect("a valid pack");
        let ask = |path: &str| {
            answer(
                None,
                Some(&pack),
                &Request::new("GET", "h", path).exchange(),
            )
        };
        let first = ask("/v1/customers/cus_1");
        assert_eq!(first.headers[HEADER], "pack");
        assert_eq!(first.body, ask("/v1/customers/cus_1").body);
        assert_ne!(first.body, ask("/v1/customers/cus_2").body);
        let value = body(&first);
        assert_eq!(value["id"], "cus_1");
        assert_eq!(value["object"], "customer");
        assert_ne!(value["name"], "Jenny Rosen");
        assert!(
            value["name"]
                .as_str()
                .is_some_and(|n| n.len() == 11 && n.as_bytes()[5] == b' ')
        );
        assert!(
            value["email"]
                .as_str()
                .is_some_and(|e| e.ends_with("@example.com"))
        );
        assert!(
            value["at"]
                .as_str()
                .is_some_and(|t| humantime::parse_rfc3339(t).is_ok())
        );
        assert!(
            value["ref"]
                .as_str()
                .is_some_and(|r| r.starts_with("cus_") && r != "cus_AbC123")
        );
        assert!(
            value["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://shop.example/"))
        );
        assert!(value["created"].is_i64() && value["ok"].is_boolean());
        assert_eq!(value["kinds"], json!(["User", "EUR", "gpt-4o-mini"]));
        let list = value["nested"]["list"]
            .as_array()
            .expect("the list keeps its shape");
        assert!(list.len() == 3 && list[0].is_i64() && list[1].is_f64() && list[2].is_null());
    }

    #[test]
    fn nothing_to_answer_from_is_a_404_miss_with_a_skeleton() {
        let answer = answer(None, None, &Request::new("GET", "h", "/x").exchange());
        assert_eq!(answer.status, StatusCode::NOT_FOUND);
        assert_eq!(answer.headers[HEADER], "miss");
        assert_eq!(body(&answer)["route"]["path"], "/x");
    }

    #[test]
    fn descriptions_that_are_not_openapi_3_are_refused_by_name() {
        let cases = [
            (
                json!({"swagger": "2.0", "paths": {}}),
                "d.yaml: `openapi` must be a 3.x version, found nothing",
            ),
            (
                json!({"openapi": "3.1.0"}),
                "d.yaml: `paths` must be a mapping",
            ),
            (
                json!({"openapi": "3.1.0", "paths": {"/a/{b": {"get": {"responses": {"200": {}}}}}}),
                "paths./a/{b: segment",
            ),
        ];
        for (doc, expected) in cases {
            let docs = BTreeMap::from([("d.yaml".to_owned(), doc)]);
            let error = OpenApiDocs::load(&docs).expect_err("refused").to_string();
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }
}
