//! The GraphQL schema built from a [`GatewayConfig`]: one query field per configured field,
//! resolved through the cache and the origin's budget, and one object type per configured type,
//! read from the cached JSON without copying it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::dynamic::{
    Field, FieldFuture, FieldValue, InputValue, Object, ResolverContext, Scalar, Schema, TypeRef,
};
use parking_lot::Mutex;
use serde_json::Value as Json;

use crate::cache::{Cache, Status};
use crate::config::{element_type, FieldConfig, GatewayConfig, SCALARS};
use crate::fetch::{fetch_json, Read};
use crate::origin::Origin;
use crate::origin_url::OriginUrl;

/// Who is asking, put in each request's data by the HTTP layer: the account id, for fields
/// cached per caller.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub user: Option<String>,
}

/// Where each field of one request came from (cache status by field name), when the HTTP layer
/// puts one in the request's data; it becomes the response's `cacheStatus` extension.
#[derive(Debug, Clone, Default)]
pub struct CacheReport(pub Arc<Mutex<Vec<(String, Status)>>>);

/// The schema and what it shares: the cache and the origins (for metrics).
pub struct Gateway {
    pub schema: Schema,
    pub cache: Cache<String, Json>,
    pub origins: HashMap<String, Arc<Origin>>,
}

/// A place in a cached answer: the answer and the path to one of its values. Object fields read
/// through it, so a cache hit copies nothing.
#[derive(Clone)]
struct Node {
    root: Arc<Json>,
    path: Vec<Step>,
}

#[derive(Clone)]
enum Step {
    Key(Arc<str>),
    Index(usize),
}

impl Node {
    fn value(&self) -> Option<&Json> {
        self.path
            .iter()
            .try_fold(&*self.root, |value, step| match step {
                Step::Key(key) => value.get(&**key),
                Step::Index(index) => value.get(*index),
            })
    }

    fn child(&self, step: Step) -> Node {
        let mut path = self.path.clone();
        path.push(step);
        Node {
            root: self.root.clone(),
            path,
        }
    }
}

impl Gateway {
    /// Builds the schema from `config` alone (it is validated first).
    pub fn build(config: &GatewayConfig, http: reqwest::Client) -> Result<Gateway, String> {
        Gateway::build_with(config, http, Vec::new(), Vec::new(), Vec::new())
    }

    /// Builds the schema from `config`, with `query_fields` and the `types` they return added:
    /// fields a backend answers from its own data (the caller's account, wallet…), so one query
    /// can join origin data and backend data.
    pub fn build_with(
        config: &GatewayConfig,
        http: reqwest::Client,
        query_fields: Vec<Field>,
        types: Vec<Object>,
        scalars: Vec<Scalar>,
    ) -> Result<Gateway, String> {
        config.validate()?;
        let cache = Cache::new(config.cache_bytes);
        let max_retry_after = Duration::from_secs(config.max_retry_after_s);
        let origins: HashMap<String, Arc<Origin>> = config
            .origins
            .iter()
            .map(|o| {
                let origin = Origin::new(o.limits(max_retry_after));
                (o.name.clone(), Arc::new(origin))
            })
            .collect();
        let mut query = Object::new("Query");
        for field in &config.fields {
            let origin_config = config
                .origins
                .iter()
                .find(|o| o.name == field.origin)
                .ok_or_else(|| format!("gateway field {:?}: unknown origin", field.name))?;
            let url = OriginUrl::new(&origin_config.base_url, &field.path, &field.arguments)
                .map_err(|e| format!("gateway field {:?}: {e}", field.name))?;
            let resolver = Arc::new(Resolver {
                field: Arc::new(field.clone()),
                origin: origins[&field.origin].clone(),
                url,
                timeout: Duration::from_millis(origin_config.timeout_ms),
                max_bytes: config.max_origin_bytes,
                cache: cache.clone(),
                http: http.clone(),
            });
            let mut graphql_field = Field::new(&field.name, type_ref(&field.returns), move |ctx| {
                let resolver = resolver.clone();
                FieldFuture::new(async move { resolver.resolve(&ctx).await })
            });
            for argument in &field.arguments {
                graphql_field = graphql_field.argument(InputValue::new(
                    argument,
                    TypeRef::named_nn(TypeRef::STRING),
                ));
            }
            query = query.field(graphql_field);
        }
        for field in query_fields {
            query = query.field(field);
        }
        let mut builder = Schema::build("Query", None, None)
            .limit_depth(config.max_depth)
            .limit_complexity(config.max_complexity);
        for object in types {
            builder = builder.register(object);
        }
        for scalar in scalars {
            builder = builder.register(scalar);
        }
        for t in &config.types {
            let mut object = Object::new(&t.name);
            for (name, type_name) in &t.fields {
                let key: Arc<str> = Arc::from(name.as_str());
                let type_name = type_name.clone();
                object = object.field(Field::new(name, type_ref(&type_name), move |ctx| {
                    let (key, type_name) = (key.clone(), type_name.clone());
                    FieldFuture::new(async move {
                        let parent = ctx.parent_value.try_downcast_ref::<Node>()?;
                        Ok(field_value(parent.child(Step::Key(key)), &type_name))
                    })
                }));
            }
            builder = builder.register(object);
        }
        let schema = builder
            .register(query)
            .finish()
            .map_err(|e| format!("gateway schema: {e}"))?;
        Ok(Gateway {
            schema,
            cache,
            origins,
        })
    }
}

fn type_ref(type_name: &str) -> TypeRef {
    // Every value is nullable: an origin that leaves a key out gives null, not an error for the
    // whole object.
    match element_type(type_name) {
        (inner, true) => TypeRef::named_list(inner),
        (inner, false) => TypeRef::named(inner),
    }
}

/// The GraphQL value of the JSON at `node`, as `type_name`; None for null or a missing key.
fn field_value(node: Node, type_name: &str) -> Option<FieldValue<'static>> {
    let value = node.value()?;
    if value.is_null() {
        return None;
    }
    match element_type(type_name) {
        (inner, true) => {
            let items = value.as_array()?.len();
            Some(FieldValue::list((0..items).filter_map(|i| {
                field_value(node.child(Step::Index(i)), inner).or(Some(FieldValue::NULL))
            })))
        }
        (inner, false) if SCALARS.contains(&inner) => scalar(value, inner).map(FieldValue::value),
        (_, false) => value.is_object().then(|| FieldValue::owned_any(node)),
    }
}

/// A JSON value as a GraphQL scalar; None when it does not fit (a string where an Int goes).
fn scalar(value: &Json, type_name: &str) -> Option<async_graphql::Value> {
    use async_graphql::Value;
    match (type_name, value) {
        ("String", Json::String(s)) => Some(Value::String(s.clone())),
        ("ID", Json::String(s)) => Some(Value::String(s.clone())),
        ("ID", Json::Number(n)) => Some(Value::String(n.to_string())),
        ("Int", Json::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Value::from),
        ("Float", Json::Number(n)) => n.as_f64().map(Value::from),
        ("Boolean", Json::Bool(b)) => Some(Value::Boolean(*b)),
        _ => None,
    }
}

/// Everything one query field needs to answer (shared by its requests).
struct Resolver {
    field: Arc<FieldConfig>,
    origin: Arc<Origin>,
    url: OriginUrl,
    timeout: Duration,
    max_bytes: usize,
    cache: Cache<String, Json>,
    http: reqwest::Client,
}

impl Resolver {
    async fn resolve(
        self: Arc<Self>,
        ctx: &ResolverContext<'_>,
    ) -> async_graphql::Result<Option<FieldValue<'static>>> {
        let mut values = Vec::with_capacity(self.field.arguments.len());
        for argument in &self.field.arguments {
            values.push(ctx.args.try_get(argument)?.string()?.to_owned());
        }
        let user = match self.field.per_user {
            true => Some(
                ctx.data_opt::<Caller>()
                    .and_then(|c| c.user.clone())
                    .ok_or_else(|| format!("{} needs a signed-in caller", self.field.name))?,
            ),
            false => None,
        };
        // Built and checked before the cache is asked: arguments that would change the origin's
        // path reach neither the cache nor the origin.
        let url = self
            .url
            .fill(&values)
            .map_err(|e| format!("{}: {e}", self.field.name))?;
        let key = cache_key(&self.field.name, &values, user.as_deref());
        // The cache holds the key beside the value: it weighs too.
        let key_bytes = key.capacity() as u64;
        let fetcher = self.clone();
        let fetch = move || async move {
            let field = &fetcher.field;
            let read = Read {
                timeout: fetcher.timeout,
                max_bytes: fetcher.max_bytes,
                select: &field.select,
                returns: &field.returns,
            };
            let mut fetched = fetcher
                .origin
                .call(|| fetch_json(&fetcher.http, url, read))
                .await?;
            fetched.bytes = fetched.bytes.saturating_add(key_bytes);
            Ok(fetched)
        };
        let lookup = self
            .cache
            .get(key, &self.field.policy(), fetch)
            .await
            .map_err(|e| format!("{}: {e}", self.field.name))?;
        if let Some(report) = ctx.data_opt::<CacheReport>() {
            report
                .0
                .lock()
                .push((self.field.name.clone(), lookup.status));
        }
        let node = Node {
            root: lookup.value,
            path: Vec::new(),
        };
        Ok(field_value(node, &self.field.returns))
    }
}

/// The cache key: the field, its arguments and, for a per-caller field, the caller; each part
/// length-prefixed so no two different requests share a key.
fn cache_key(field: &str, values: &[String], user: Option<&str>) -> String {
    let mut key = String::with_capacity(field.len() + 16);
    for part in std::iter::once(field)
        .chain(values.iter().map(String::as_str))
        .chain(user)
    {
        key.push_str(&part.len().to_string());
        key.push(':');
        key.push_str(part);
    }
    key
}
