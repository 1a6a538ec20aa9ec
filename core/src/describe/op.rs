//! What a family says about one of its endpoints: the description, its query and
//! header parameters, what its path parameters mean, its request body and its
//! answers. The route table says the rest (method, path, parameter names,
//! credentials, permission, rate limit), and the document puts the two together.

use serde_json::Value;

use crate::ratelimit::Bucket;

/// The media type of JSON bodies.
pub const JSON: &str = "application/json";

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum In {
    /// A `{}` segment of the path (named by the route table).
    Path,
    /// The query string.
    Query,
    /// A request header.
    Header,
}

impl In {
    /// OpenAPI's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            In::Path => "path",
            In::Query => "query",
            In::Header => "header",
        }
    }
}

/// One parameter.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// Where it goes.
    pub at: In,
    /// Whether it must be sent.
    pub required: bool,
    /// What it means.
    pub description: String,
    /// Its schema.
    pub schema: Value,
}

/// One answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// When it is sent.
    pub description: String,
    /// Its body: media type and schema (none for an empty body).
    pub body: Option<(&'static str, Value)>,
    /// Headers it carries besides the ones every answer of its kind carries.
    pub headers: Vec<(&'static str, String)>,
    /// Example bodies, by name.
    pub examples: Vec<(&'static str, Value)>,
}

/// A request body.
#[derive(Clone, Debug)]
pub struct Body {
    /// The media types accepted, each with the same schema.
    pub media: Vec<&'static str>,
    /// Its schema.
    pub schema: Value,
    /// Whether a body must be sent.
    pub required: bool,
    /// A body the server accepts (sent as it is by `tests/openapi/examples.py`).
    pub example: Option<Value>,
}

/// The description of one operation, as its family writes it.
#[derive(Clone, Debug, Default)]
pub struct Op {
    /// What it does and its rules (CommonMark).
    pub description: String,
    /// Parameters: what path parameters mean, query and header parameters.
    pub params: Vec<Param>,
    /// The request body.
    pub body: Option<Body>,
    /// The answers it gives itself (the shared ones, by credentials, are added).
    pub replies: Vec<Reply>,
    /// The schema of its 400 body, when not the platform's `{"message"}`.
    pub error_schema: Option<Value>,
    /// A rate limit the route table does not state (a public or SCIM route's),
    /// with whom it is counted for ("per link").
    pub limit: Option<(Bucket, &'static str)>,
}

impl Op {
    /// An operation that does what `description` says.
    pub fn new(description: impl Into<String>) -> Op {
        Op { description: description.into(), ..Op::default() }
    }

    /// What the path parameter `name` (a name in the route table) means.
    pub fn path(mut self, name: &'static str, description: &str) -> Op {
        let schema = serde_json::json!({"type": "string"});
        self.params.push(Param { name, at: In::Path, required: true, description: description.into(), schema });
        self
    }

    /// What the path parameter `name` means, and the values it takes.
    pub fn path_with(mut self, name: &'static str, description: &str, schema: Value) -> Op {
        self.params.push(Param { name, at: In::Path, required: true, description: description.into(), schema });
        self
    }

    /// A query parameter.
    pub fn query(mut self, name: &'static str, required: bool, description: &str, schema: Value) -> Op {
        self.params.push(Param { name, at: In::Query, required, description: description.into(), schema });
        self
    }

    /// A request header.
    pub fn header(mut self, name: &'static str, required: bool, description: &str) -> Op {
        let schema = serde_json::json!({"type": "string"});
        self.params.push(Param { name, at: In::Header, required, description: description.into(), schema });
        self
    }

    /// A required JSON body.
    pub fn body(self, schema: Value) -> Op {
        self.body_in(&[JSON], schema, true)
    }

    /// The body must carry at least one of these properties, not empty (an array
    /// with one item at least): the rule "one of ... is required". (`items: {}` is
    /// spelled out: client generators need an item type.)
    pub fn at_least_one(mut self, names: &[&str]) -> Op {
        if let Some(body) = &mut self.body {
            let options: Vec<Value> = names
                .iter()
                .map(|n| serde_json::json!({"type": "object", "required": [n], "properties": {*n: {"type": "array", "items": {}, "minItems": 1}}}))
                .collect();
            body.schema["anyOf"] = Value::Array(options);
        }
        self
    }

    /// A body in these media types.
    pub fn body_in(mut self, media: &[&'static str], schema: Value, required: bool) -> Op {
        self.body = Some(Body { media: media.to_vec(), schema, required, example: None });
        self
    }

    /// An example of the request body, in every media type it is accepted in.
    pub fn example(mut self, body: Value) -> Op {
        if let Some(b) = &mut self.body {
            b.example = Some(body);
        }
        self
    }

    /// A JSON answer.
    pub fn reply(self, status: u16, description: &str, schema: Value) -> Op {
        self.reply_in(status, description, JSON, schema)
    }

    /// An answer in another media type.
    pub fn reply_in(mut self, status: u16, description: &str, media: &'static str, schema: Value) -> Op {
        let body = Some((media, schema));
        self.replies.push(Reply { status, description: description.into(), body, headers: vec![], examples: vec![] });
        self
    }

    /// An answer without a body.
    pub fn empty(mut self, status: u16, description: &str) -> Op {
        self.replies.push(Reply {
            status,
            description: description.into(),
            body: None,
            headers: vec![],
            examples: vec![],
        });
        self
    }

    /// A header on the answer added last.
    pub fn with_header(mut self, name: &'static str, description: &str) -> Op {
        if let Some(r) = self.replies.last_mut() {
            r.headers.push((name, description.into()));
        }
        self
    }

    /// An example body of the answer added last.
    pub fn with_example(mut self, name: &'static str, body: Value) -> Op {
        if let Some(r) = self.replies.last_mut() {
            r.examples.push((name, body));
        }
        self
    }

    /// A 400 in the platform's shape, with the messages it may carry as examples.
    pub fn bad_request(mut self, description: &str, messages: &[(&'static str, &str)]) -> Op {
        self = self.reply(400, description, crate::describe::schema::refer("Error"));
        for (name, message) in messages {
            self = self.with_example(name, serde_json::json!({"message": message}));
        }
        self
    }

    /// The schema of its 400 answers, when not `{"message"}`.
    pub fn errors(mut self, schema: Value) -> Op {
        self.error_schema = Some(schema);
        self
    }

    /// A rate limit the route table does not state.
    pub fn limited(mut self, bucket: Bucket, per: &'static str) -> Op {
        self.limit = Some((bucket, per));
        self
    }
}
