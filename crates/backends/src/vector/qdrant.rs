//! The server vector index: one collection of a Qdrant server, reached over gRPC with
//! qdrant-client.
//!
//! The collection holds the same named vectors and payload as [`super::edge::EdgeIndex`], so
//! the two backends select and rank alike. Writes wait for the server to apply them
//! (`wait=true`), which makes them visible to the next search; durability is the server's
//! (its write-ahead log, replayed when it restarts), so [`VectorIndex::flush`] has nothing to
//! do.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::qdrant::condition::ConditionOneOf;
use qdrant_client::qdrant::r#match::MatchValue;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::value::Kind;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    CollectionInfo, Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType, Filter, KeywordIndexParamsBuilder, ListValue, Modifier, PointId,
    PointStruct, PointsIdsList, Query, QueryPointsBuilder, Range, RepeatedStrings, ScoredPoint, ScrollPointsBuilder,
    SetPayloadPointsBuilder, SparseVectorParamsBuilder, SparseVectorsConfigBuilder, UpsertPointsBuilder, Value, Vector,
    VectorInput, VectorParamsBuilder, VectorsConfigBuilder,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use thinkus_common::model::{DEFAULT_TENANT, MemoryStatus, Owner};

use super::edge::{check_dense, check_sparse, field, payload};
use super::{
    DENSE_VECTOR, IndexedPoint, MemoryFilter, SPARSE_VECTOR, SparseVector, VectorError, VectorHit, VectorIndex,
    memory_id, point_uuid,
};
use crate::filter::Plan;

/// The collection used when the URI names none.
pub const DEFAULT_COLLECTION: &str = "thinkus_memories";
/// Points per upsert request: keeps each request well under the server's 32 MiB gRPC limit
/// with 1,024-dimension vectors.
const UPSERT_CHUNK: usize = 256;
/// Ids per scroll page in [`VectorIndex::list_ids`].
const SCROLL_PAGE: u32 = 1024;
const DEFAULT_PORT: u16 = 6334;

/// The Qdrant server backend.
pub struct QdrantIndex {
    client: Qdrant,
    /// The server address without credentials, for logs.
    url: String,
    collection: String,
    /// The dense dimension of the collection, once known.
    dim: OnceLock<usize>,
}

impl fmt::Debug for QdrantIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QdrantIndex")
            .field("url", &self.url)
            .field("collection", &self.collection)
            .field("dim", &self.dim.get())
            .finish()
    }
}

/// What a `qdrant://` URI says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// `http://host:port` or `https://host:port`, as the client wants it.
    url: String,
    collection: String,
    /// The environment variable holding the API key, if any.
    api_key_env: Option<String>,
}

impl QdrantIndex {
    /// Connects to a server given as `qdrant://host:port` or `qdrants://host:port` (TLS),
    /// with the optional query parameters `collection=NAME` (default
    /// [`DEFAULT_COLLECTION`]) and `api_key_env=VARNAME` (the variable holding the API key).
    /// The port defaults to 6334, Qdrant's gRPC port.
    ///
    /// The connection is made lazily: an unreachable server shows at the first call, as
    /// [`VectorError::Unavailable`]. Fails with [`VectorError::Invalid`] on a malformed URI or
    /// an API key variable that is not set.
    pub fn connect(uri: &str) -> Result<Self, VectorError> {
        let endpoint = parse_uri(uri)?;
        let api_key = match &endpoint.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                VectorError::Invalid(format!(
                    "the API key variable {var} named by the vector index URI is not set"
                ))
            })?),
            None => None,
        };
        let client = Qdrant::from_url(&endpoint.url)
            .api_key(api_key)
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            // The check would print to stdout and block on a health request here.
            .skip_compatibility_check()
            .build()
            .map_err(|err| VectorError::Invalid(format!("bad Qdrant URI {uri:?}: {err}")))?;
        Ok(Self {
            client,
            url: endpoint.url,
            collection: endpoint.collection,
            dim: OnceLock::new(),
        })
    }

    /// The name of the collection.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// The underlying client, for administration (snapshots, collection deletion in tests).
    pub fn client(&self) -> &Qdrant {
        &self.client
    }

    async fn info(&self) -> Result<Option<CollectionInfo>, VectorError> {
        let exists = self
            .client
            .collection_exists(self.collection.as_str())
            .await
            .map_err(from_client)?;
        if !exists {
            return Ok(None);
        }
        let response = self
            .client
            .collection_info(self.collection.as_str())
            .await
            .map_err(from_client)?;
        Ok(response.result)
    }

    /// The dense dimension, read from the server the first time.
    async fn dense_dim(&self) -> Result<usize, VectorError> {
        if let Some(dim) = self.dim.get() {
            return Ok(*dim);
        }
        let info = self.info().await?.ok_or_else(|| {
            VectorError::Unavailable(format!(
                "the collection {} does not exist: ensure_ready was not called",
                self.collection
            ))
        })?;
        let dim = check_collection(&info, None)?;
        Ok(*self.dim.get_or_init(|| dim))
    }

    async fn create_collection(&self, dim: usize) -> Result<(), VectorError> {
        let mut vectors = VectorsConfigBuilder::default();
        vectors.add_named_vector_params(DENSE_VECTOR, VectorParamsBuilder::new(dim as u64, Distance::Cosine));
        let mut sparse = SparseVectorsConfigBuilder::default();
        sparse.add_named_vector_params(
            SPARSE_VECTOR,
            SparseVectorParamsBuilder::default().modifier(Modifier::Idf),
        );
        self.client
            .create_collection(
                CreateCollectionBuilder::new(self.collection.as_str())
                    .vectors_config(vectors)
                    .sparse_vectors_config(sparse),
            )
            .await
            .map_err(from_client)?;
        tracing::info!(collection = %self.collection, dim, "created the qdrant collection");
        Ok(())
    }

    async fn create_payload_indexes(&self) -> Result<(), VectorError> {
        let collection = self.collection.as_str();
        let mut requests = vec![
            CreateFieldIndexCollectionBuilder::new(collection, field::USER_ID, FieldType::Keyword)
                .field_index_params(KeywordIndexParamsBuilder::default().is_tenant(true)),
        ];
        requests.extend(
            field::KEYWORDS
                .iter()
                .map(|key| CreateFieldIndexCollectionBuilder::new(collection, *key, FieldType::Keyword)),
        );
        requests.push(CreateFieldIndexCollectionBuilder::new(
            collection,
            field::CROSS_PROJECT,
            FieldType::Bool,
        ));
        requests.push(CreateFieldIndexCollectionBuilder::new(
            collection,
            field::OCCURRED_AT_MS,
            FieldType::Integer,
        ));
        for request in requests {
            // Creating an index that exists with the same schema is a no-op on the server.
            self.client
                .create_field_index(request.wait(true))
                .await
                .map_err(from_client)?;
        }
        Ok(())
    }

    async fn query(
        &self,
        query: VectorInput,
        using: &str,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        let Some(filter) = qdrant_filter(filter) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(self.collection.as_str())
                    .query(Query::new_nearest(query))
                    .using(using)
                    .filter(filter)
                    .limit(limit as u64)
                    .with_payload(false),
            )
            .await
            .map_err(from_client)?;
        Ok(hits(response.result))
    }

    fn owner_filter(owner: &Owner) -> Filter {
        Filter::must([
            keyword(field::TENANT_ID, &owner.tenant_id),
            keyword(field::USER_ID, &owner.user_id),
        ])
    }

    /// Gives the points without a tenant (written before tenancy) the default tenant.
    async fn adopt_untenanted_points(&self) -> Result<(), VectorError> {
        let mut payload = Payload::new();
        payload.insert(field::TENANT_ID, DEFAULT_TENANT);
        self.client
            .set_payload(
                SetPayloadPointsBuilder::new(self.collection.as_str(), payload)
                    .points_selector(Filter::must([Condition::is_empty(field::TENANT_ID)]))
                    .wait(true),
            )
            .await
            .map_err(from_client)?;
        Ok(())
    }
}

#[async_trait]
impl VectorIndex for QdrantIndex {
    fn name(&self) -> &'static str {
        "qdrant"
    }

    async fn ensure_ready(&self, dim: usize) -> Result<(), VectorError> {
        if dim == 0 {
            return Err(VectorError::Invalid("the dense dimension must be positive".into()));
        }
        let info = match self.info().await? {
            Some(info) => info,
            None => {
                let created = self.create_collection(dim).await;
                match (created, self.info().await?) {
                    (_, Some(info)) => info,
                    // A failed creation is fine when another replica created it meanwhile.
                    (Err(err), None) => return Err(err),
                    (Ok(()), None) => {
                        return Err(VectorError::Backend(format!(
                            "the collection {} vanished after its creation",
                            self.collection
                        )));
                    }
                }
            }
        };
        let dim = check_collection(&info, Some(dim))?;
        self.create_payload_indexes().await?;
        self.adopt_untenanted_points().await?;
        let _ = self.dim.set(dim);
        Ok(())
    }

    async fn upsert(&self, points: Vec<IndexedPoint>) -> Result<(), VectorError> {
        if points.is_empty() {
            return Ok(());
        }
        let dim = self.dense_dim().await?;
        let mut structs = Vec::with_capacity(points.len());
        for point in &points {
            structs.push(point_struct(point, dim)?);
        }
        let mut structs = structs.into_iter().peekable();
        while structs.peek().is_some() {
            let chunk: Vec<PointStruct> = structs.by_ref().take(UPSERT_CHUNK).collect();
            self.client
                .upsert_points(UpsertPointsBuilder::new(self.collection.as_str(), chunk).wait(true))
                .await
                .map_err(from_client)?;
        }
        Ok(())
    }

    async fn set_status(&self, ids: &[String], status: MemoryStatus) -> Result<(), VectorError> {
        let ids = point_ids(ids)?;
        if ids.is_empty() {
            return Ok(());
        }
        let mut payload = Payload::new();
        payload.insert(field::STATUS, status.as_str());
        // A filter on the ids rather than a list: unknown ids are skipped instead of failing
        // the whole request with "not found".
        self.client
            .set_payload(
                SetPayloadPointsBuilder::new(self.collection.as_str(), payload)
                    .points_selector(Filter::must([Condition::has_id(ids)]))
                    .wait(true),
            )
            .await
            .map_err(from_client)?;
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<(), VectorError> {
        let ids = point_ids(ids)?;
        if ids.is_empty() {
            return Ok(());
        }
        self.client
            .delete_points(
                DeletePointsBuilder::new(self.collection.as_str())
                    .points(PointsIdsList { ids })
                    .wait(true),
            )
            .await
            .map_err(from_client)?;
        Ok(())
    }

    async fn replace(&self, points: Vec<IndexedPoint>, stale: &[String]) -> Result<(), VectorError> {
        self.upsert(points).await?;
        self.delete(stale).await
    }

    async fn delete_user(&self, owner: &Owner) -> Result<(), VectorError> {
        self.client
            .delete_points(
                DeletePointsBuilder::new(self.collection.as_str())
                    .points(Self::owner_filter(owner))
                    .wait(true),
            )
            .await
            .map_err(from_client)?;
        Ok(())
    }

    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        check_dense(vector, self.dense_dim().await?)?;
        self.query(VectorInput::new_dense(vector.to_vec()), DENSE_VECTOR, filter, limit)
            .await
    }

    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        check_sparse(vector)?;
        if vector.is_empty() {
            return Ok(Vec::new());
        }
        self.query(
            VectorInput::new_sparse(vector.indices.clone(), vector.values.clone()),
            SPARSE_VECTOR,
            filter,
            limit,
        )
        .await
    }

    async fn count(&self, owner: Option<&Owner>) -> Result<u64, VectorError> {
        let mut request = CountPointsBuilder::new(self.collection.as_str()).exact(true);
        if let Some(owner) = owner {
            request = request.filter(Self::owner_filter(owner));
        }
        let response = self.client.count(request).await.map_err(from_client)?;
        Ok(response.result.map_or(0, |result| result.count))
    }

    async fn list_ids(&self, owner: &Owner) -> Result<Vec<String>, VectorError> {
        let mut ids = Vec::new();
        let mut offset: Option<PointId> = None;
        loop {
            let mut request = ScrollPointsBuilder::new(self.collection.as_str())
                .filter(Self::owner_filter(owner))
                .limit(SCROLL_PAGE)
                .with_payload(false)
                .with_vectors(false);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let response = self.client.scroll(request).await.map_err(from_client)?;
            ids.extend(response.result.iter().filter_map(|point| id_of(point.id.as_ref())));
            match response.next_page_offset {
                Some(next) => offset = Some(next),
                None => return Ok(ids),
            }
        }
    }

    async fn flush(&self) -> Result<(), VectorError> {
        // Every write waited for the server, whose write-ahead log makes it durable.
        Ok(())
    }
}

/// Checks the vectors of an existing collection and returns its dense dimension; with
/// `expected`, also that the dimension is that one.
fn check_collection(info: &CollectionInfo, expected: Option<usize>) -> Result<usize, VectorError> {
    let params = info
        .config
        .as_ref()
        .and_then(|config| config.params.as_ref())
        .ok_or_else(|| VectorError::Backend("the collection has no parameters".into()))?;
    let dense = match params.vectors_config.as_ref().and_then(|config| config.config.as_ref()) {
        Some(VectorsConfigKind::ParamsMap(map)) => map.map.get(DENSE_VECTOR),
        _ => None,
    }
    .ok_or_else(|| VectorError::Backend(format!("the collection has no dense vector named {DENSE_VECTOR:?}")))?;
    let dim = usize::try_from(dense.size)
        .map_err(|_| VectorError::Backend(format!("dense size {} is too large", dense.size)))?;
    if let Some(expected) = expected
        && expected != dim
    {
        return Err(VectorError::Dimension {
            expected: dim,
            actual: expected,
        });
    }
    let sparse = params
        .sparse_vectors_config
        .as_ref()
        .and_then(|config| config.map.get(SPARSE_VECTOR))
        .ok_or_else(|| VectorError::Backend(format!("the collection has no sparse vector named {SPARSE_VECTOR:?}")))?;
    if sparse.modifier != Some(Modifier::Idf as i32) {
        return Err(VectorError::Backend(format!(
            "the sparse vector {SPARSE_VECTOR:?} of the collection does not apply IDF"
        )));
    }
    Ok(dim)
}

fn parse_uri(uri: &str) -> Result<Endpoint, VectorError> {
    let invalid = |why: &str| VectorError::Invalid(format!("bad Qdrant URI {uri:?}: {why}"));
    let (scheme, rest) = uri
        .split_once("://")
        .ok_or_else(|| invalid("expected qdrant://host:port or qdrants://host:port"))?;
    let http = match scheme {
        "qdrant" => "http",
        "qdrants" => "https",
        _ => return Err(invalid("the scheme must be qdrant or qdrants")),
    };
    let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
    let address = address.strip_suffix('/').unwrap_or(address);
    if address.is_empty() {
        return Err(invalid("the host is missing"));
    }
    if address.contains(['/', '@']) {
        return Err(invalid(
            "expected only host and port (credentials go through api_key_env)",
        ));
    }
    // A port is the digits after the last colon, unless that colon is inside an IPv6 literal.
    let has_port = address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    if !has_port && address.contains(':') && !address.starts_with('[') {
        return Err(invalid("the port is not a number"));
    }
    let url = if has_port {
        format!("{http}://{address}")
    } else {
        format!("{http}://{address}:{DEFAULT_PORT}")
    };

    let mut collection = None;
    let mut api_key_env = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(&format!("parameter {pair:?} has no value")))?;
        if value.is_empty() {
            return Err(invalid(&format!("parameter {key:?} is empty")));
        }
        let slot = match key {
            "collection" => &mut collection,
            "api_key_env" => &mut api_key_env,
            _ => return Err(invalid(&format!("unknown parameter {key:?}"))),
        };
        if slot.replace(value.to_string()).is_some() {
            return Err(invalid(&format!("parameter {key:?} is repeated")));
        }
    }
    let collection = collection.unwrap_or_else(|| DEFAULT_COLLECTION.to_string());
    if !collection
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(invalid(
            "the collection name may hold letters, digits, '_', '-' and '.'",
        ));
    }
    Ok(Endpoint {
        url,
        collection,
        api_key_env,
    })
}

fn point_struct(point: &IndexedPoint, dim: usize) -> Result<PointStruct, VectorError> {
    let id = point_uuid(&point.id)?;
    check_dense(&point.dense, dim)?;
    check_sparse(&point.sparse)?;
    let mut vectors: HashMap<String, Vector> = HashMap::new();
    vectors.insert(DENSE_VECTOR.to_string(), Vector::new_dense(point.dense.clone()));
    // A memory without terms has no sparse vector at all rather than an empty one.
    if !point.sparse.is_empty() {
        vectors.insert(
            SPARSE_VECTOR.to_string(),
            Vector::new_sparse(point.sparse.indices.clone(), point.sparse.values.clone()),
        );
    }
    let mut fields = Payload::new();
    for (key, value) in payload(point) {
        fields.insert(key, to_value(&value));
    }
    Ok(PointStruct::new(id.to_string(), vectors, fields))
}

fn to_value(value: &serde_json::Value) -> Value {
    let kind = match value {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(flag) => Kind::BoolValue(*flag),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(integer) => Kind::IntegerValue(integer),
            None => Kind::DoubleValue(number.as_f64().unwrap_or_default()),
        },
        serde_json::Value::String(text) => Kind::StringValue(text.clone()),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(qdrant_client::qdrant::Struct {
            fields: map.iter().map(|(key, value)| (key.clone(), to_value(value))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

fn point_ids(ids: &[String]) -> Result<Vec<PointId>, VectorError> {
    ids.iter()
        .map(|id| point_uuid(id).map(|uuid| PointId::from(uuid.to_string())))
        .collect()
}

fn id_of(id: Option<&PointId>) -> Option<String> {
    match id.and_then(|id| id.point_id_options.as_ref()) {
        Some(PointIdOptions::Uuid(text)) => match uuid::Uuid::parse_str(text) {
            Ok(uuid) => Some(memory_id(&uuid)),
            Err(_) => {
                tracing::warn!(id = %text, "skipped a point with a malformed uuid in qdrant");
                None
            }
        },
        Some(PointIdOptions::Num(num)) => {
            tracing::warn!(id = num, "skipped a point with a numeric id in qdrant");
            None
        }
        None => None,
    }
}

fn hits(points: Vec<ScoredPoint>) -> Vec<VectorHit> {
    points
        .into_iter()
        .filter_map(|point| id_of(point.id.as_ref()).map(|id| VectorHit { id, score: point.score }))
        .collect()
}

fn from_client(err: QdrantError) -> VectorError {
    use tonic::Code;
    match &err {
        QdrantError::ResponseError { status } => match status.code() {
            Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => {
                VectorError::Invalid(status.message().to_string())
            }
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Aborted
            | Code::ResourceExhausted
            | Code::Unauthenticated
            | Code::PermissionDenied => VectorError::Unavailable(err.to_string()),
            // The client reports a failed connection as `Internal` ("Failed to connect to
            // ..."), and tonic reports a broken transport as `Unknown`.
            Code::Internal | Code::Unknown if is_transport_error(status) => VectorError::Unavailable(err.to_string()),
            _ => VectorError::Backend(err.to_string()),
        },
        QdrantError::ResourceExhaustedError { .. } | QdrantError::Io(_) => VectorError::Unavailable(err.to_string()),
        QdrantError::InvalidUri(_) => VectorError::Invalid(err.to_string()),
        _ => VectorError::Backend(err.to_string()),
    }
}

fn is_transport_error(status: &tonic::Status) -> bool {
    let message = status.message().to_ascii_lowercase();
    ["failed to connect", "transport error", "connection", "broken pipe"]
        .iter()
        .any(|word| message.contains(word))
}

fn keyword(key: &str, value: &str) -> Condition {
    // Explicitly a keyword: `MatchValue::from(String)` turns text with spaces into a
    // full-text match.
    Condition::matches(key, MatchValue::Keyword(value.to_string()))
}

fn any_keyword<'a>(key: &str, values: impl IntoIterator<Item = &'a str>) -> Condition {
    Condition::matches(
        key,
        MatchValue::Keywords(RepeatedStrings {
            strings: values.into_iter().map(str::to_string).collect(),
        }),
    )
}

/// The Qdrant filter of a read (the translation of its [`Plan`]), or `None` when nothing can
/// match (Qdrant has no filter that is always false).
fn qdrant_filter(filter: &MemoryFilter) -> Option<Filter> {
    match condition(&filter.plan())? {
        Condition {
            condition_one_of: Some(ConditionOneOf::Filter(filter)),
        } => Some(filter),
        other => Some(Filter::must([other])),
    }
}

/// One condition of a plan; `None` only for [`Plan::Never`], which [`Plan::all`] and
/// [`Plan::any`] keep out of every larger plan.
fn condition(plan: &Plan) -> Option<Condition> {
    Some(match plan {
        Plan::Never => return None,
        Plan::All(plans) => Condition::from(Filter::must(plans.iter().map(condition).collect::<Option<Vec<_>>>()?)),
        Plan::Any(plans) => Condition::from(Filter::should(plans.iter().map(condition).collect::<Option<Vec<_>>>()?)),
        Plan::Is(f, value) => keyword(field::key(*f), value),
        Plan::OneOf(f, values) => any_keyword(field::key(*f), values.iter().map(String::as_str)),
        Plan::CrossProject(cross) => Condition::matches(field::CROSS_PROJECT, *cross),
        // Exact for every millisecond timestamp below 2^53 (the year 287,396).
        Plan::OccurredWithin { from_ms, to_ms } => Condition::range(
            field::OCCURRED_AT_MS,
            Range {
                gte: from_ms.map(|ms| ms as f64),
                lt: to_ms.map(|ms| ms as f64),
                gt: None,
                lte: None,
            },
        ),
        Plan::HasTag(tag) => keyword(field::TAGS, tag),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use qdrant_client::qdrant::FieldCondition;
    use serde_json::Map;
    use thinkus_common::model::{MemoryType, Visibility};

    use crate::filter::{Layers, Reader};

    use super::*;
    use crate::conformance::vector::{self as conformance, SplitMix};

    #[tokio::test]
    async fn an_unreachable_server_is_unavailable() {
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        let index = QdrantIndex::connect("qdrant://127.0.0.1:1?collection=nowhere").expect("lazy");
        let err = index.ensure_ready(8).await.expect_err("no server");
        assert!(
            matches!(err, VectorError::Unavailable(_)),
            "a refused connection is Unavailable, got {err:?}"
        );
        let err = index.count(None).await.expect_err("no server");
        assert!(matches!(err, VectorError::Unavailable(_)), "got {err:?}");
    }

    #[test]
    fn uris_parse() {
        let endpoint = parse_uri("qdrant://localhost:6334").expect("plain");
        assert_eq!(
            endpoint,
            Endpoint {
                url: "http://localhost:6334".into(),
                collection: DEFAULT_COLLECTION.into(),
                api_key_env: None,
            }
        );
        let endpoint = parse_uri("qdrants://db.example.com:443/?collection=mem_v2&api_key_env=QDRANT_KEY")
            .expect("tls with parameters");
        assert_eq!(endpoint.url, "https://db.example.com:443");
        assert_eq!(endpoint.collection, "mem_v2");
        assert_eq!(endpoint.api_key_env.as_deref(), Some("QDRANT_KEY"));
        assert_eq!(parse_uri("qdrant://qdrant").expect("no port").url, "http://qdrant:6334");
        assert_eq!(parse_uri("qdrant://[::1]:7000").expect("ipv6").url, "http://[::1]:7000");
        assert_eq!(
            parse_uri("qdrant://[::1]").expect("ipv6 without port").url,
            "http://[::1]:6334"
        );
        for bad in [
            "http://localhost:6334",
            "localhost:6334",
            "qdrant://",
            "qdrant://host:port",
            "qdrant://user:pw@host:6334",
            "qdrant://host:6334/path",
            "qdrant://host:6334?collection=",
            "qdrant://host:6334?collection=a&collection=b",
            "qdrant://host:6334?colection=a",
            "qdrant://host:6334?collection=a b",
            "qdrant://host:6334?api_key_env",
        ] {
            assert!(
                matches!(parse_uri(bad), Err(VectorError::Invalid(_))),
                "{bad:?} must be rejected"
            );
        }
    }

    #[test]
    fn connect_reads_the_api_key_variable() {
        let missing = "THINKUS_TEST_SURELY_UNSET_QDRANT_KEY";
        let err =
            QdrantIndex::connect(&format!("qdrant://localhost?api_key_env={missing}")).expect_err("unset variable");
        assert!(
            matches!(&err, VectorError::Invalid(message) if message.contains(missing)),
            "got {err:?}"
        );
        // PATH is set in every test environment.
        let index =
            QdrantIndex::connect("qdrants://localhost:6334?api_key_env=PATH&collection=c1").expect("set variable");
        assert_eq!(index.collection(), "c1");
        let debug = format!("{index:?}");
        assert!(
            debug.contains("https://localhost:6334") && !debug.contains("api_key"),
            "{debug}"
        );
    }

    fn field_condition(condition: &Condition) -> &FieldCondition {
        match &condition.condition_one_of {
            Some(ConditionOneOf::Field(field)) => field,
            other => panic!("expected a field condition, got {other:?}"),
        }
    }

    fn nested(condition: &Condition) -> &Filter {
        match &condition.condition_one_of {
            Some(ConditionOneOf::Filter(filter)) => filter,
            other => panic!("expected a nested filter, got {other:?}"),
        }
    }

    fn match_of(condition: &Condition) -> (&str, &MatchValue) {
        let field = field_condition(condition);
        let value = field
            .r#match
            .as_ref()
            .and_then(|m| m.match_value.as_ref())
            .expect("a match condition");
        (field.key.as_str(), value)
    }

    #[test]
    fn a_user_filter_translates_to_tenant_and_status() {
        let filter = qdrant_filter(&MemoryFilter::user(&Owner::new("t1", "user with space"))).expect("matchable");
        assert!(filter.should.is_empty() && filter.must_not.is_empty());
        assert_eq!(filter.must.len(), 3);
        assert_eq!(
            match_of(&filter.must[0]),
            (field::TENANT_ID, &MatchValue::Keyword("t1".into()))
        );
        assert_eq!(
            match_of(&filter.must[1]),
            (field::USER_ID, &MatchValue::Keyword("user with space".into())),
            "the user is an exact keyword even with spaces"
        );
        assert_eq!(
            match_of(&filter.must[2]),
            (field::STATUS, &MatchValue::Keyword("active".into()))
        );
        let statuses = MemoryFilter::any_status(&Owner::new("t1", "u1"));
        let filter = qdrant_filter(&statuses).expect("matchable");
        assert!(matches!(match_of(&filter.must[2]), (field::STATUS, MatchValue::Keywords(k)) if k.strings.len() == 5));
    }

    #[test]
    fn every_condition_translates() {
        let mut filter = MemoryFilter::user(&Owner::new("t1", "u1"));
        filter.types = vec![MemoryType::Risk];
        filter.visibilities = vec![Visibility::Global];
        filter.session_id = Some("s1".into());
        filter.occurred_from_ms = Some(1_000);
        filter.occurred_to_ms = Some(2_000);
        filter.tags = vec!["a".into(), "b".into()];
        filter.reader = Some(Reader {
            role_id: "cto".into(),
            project_id: Some("p1".into()),
            layers: Layers::Both,
        });
        let translated = qdrant_filter(&filter).expect("matchable");
        let keys: Vec<&str> = translated
            .must
            .iter()
            .filter_map(|c| match &c.condition_one_of {
                Some(ConditionOneOf::Field(field)) => Some(field.key.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            keys,
            [
                field::TENANT_ID,
                field::USER_ID,
                field::STATUS,
                field::MEMORY_TYPE,
                field::VISIBILITY,
                field::SESSION_ID,
                field::OCCURRED_AT_MS,
                field::TAGS,
                field::TAGS
            ]
        );
        let range = field_condition(&translated.must[6]).range.expect("a range condition");
        assert_eq!(
            (range.gte, range.lt, range.gt, range.lte),
            (Some(1_000.0), Some(2_000.0), None, None),
            "inclusive start, exclusive end"
        );
        let reader = nested(translated.must.last().expect("reader condition"));
        assert_eq!(reader.should.len(), 3, "cross-project, own project and other projects");
        let other_projects = nested(&reader.should[2]);
        assert_eq!(
            match_of(&other_projects.must[0]),
            (field::CROSS_PROJECT, &MatchValue::Boolean(false))
        );
        assert_eq!(
            match_of(&other_projects.must[1]),
            (field::VISIBILITY, &MatchValue::Keyword("global".into()))
        );
    }

    #[test]
    fn layers_prune_the_branches() {
        let reader = |project: Option<&str>, layers| Reader {
            role_id: "cto".into(),
            project_id: project.map(str::to_string),
            layers,
        };
        let branches = |r: Reader| match condition(&r.plan()).map(|c| c.condition_one_of) {
            Some(Some(ConditionOneOf::Filter(filter))) if !filter.should.is_empty() => Some(filter.should.len()),
            Some(_) => Some(1),
            None => None,
        };
        assert_eq!(branches(reader(Some("p1"), Layers::Project)), Some(1));
        assert_eq!(branches(reader(Some("p1"), Layers::CrossProject)), Some(1));
        assert_eq!(branches(reader(None, Layers::Both)), Some(2));
        assert_eq!(branches(reader(None, Layers::Project)), None, "nothing can match");
        let mut filter = MemoryFilter::user(&Owner::new("t1", "u1"));
        filter.statuses.clear();
        assert!(qdrant_filter(&filter).is_none(), "no status matches nothing");
    }

    /// Qdrant's semantics for the subset of filters this backend builds, over a JSON payload.
    fn eval(filter: &Filter, payload: &Map<String, serde_json::Value>) -> bool {
        filter.must.iter().all(|c| eval_condition(c, payload))
            && (filter.should.is_empty() || filter.should.iter().any(|c| eval_condition(c, payload)))
            && !filter.must_not.iter().any(|c| eval_condition(c, payload))
            && filter.min_should.is_none()
    }

    fn eval_condition(condition: &Condition, payload: &Map<String, serde_json::Value>) -> bool {
        match &condition.condition_one_of {
            Some(ConditionOneOf::Filter(filter)) => eval(filter, payload),
            Some(ConditionOneOf::Field(field)) => {
                let values: Vec<&serde_json::Value> = match payload.get(&field.key) {
                    Some(serde_json::Value::Array(items)) => items.iter().collect(),
                    Some(value) => vec![value],
                    None => Vec::new(),
                };
                if let Some(range) = &field.range {
                    return values.iter().any(|value| {
                        value.as_f64().is_some_and(|x| {
                            range.gte.is_none_or(|b| x >= b)
                                && range.lt.is_none_or(|b| x < b)
                                && range.gt.is_none_or(|b| x > b)
                                && range.lte.is_none_or(|b| x <= b)
                        })
                    });
                }
                let matcher = field
                    .r#match
                    .as_ref()
                    .and_then(|m| m.match_value.as_ref())
                    .expect("only match and range conditions are built");
                values.iter().any(|value| match matcher {
                    MatchValue::Keyword(k) => value.as_str() == Some(k.as_str()),
                    MatchValue::Keywords(ks) => value.as_str().is_some_and(|v| ks.strings.iter().any(|k| k == v)),
                    MatchValue::Boolean(b) => value.as_bool() == Some(*b),
                    other => panic!("unexpected match {other:?}"),
                })
            }
            other => panic!("unexpected condition {other:?}"),
        }
    }

    /// The translated filters, evaluated with Qdrant's semantics, accept exactly what the
    /// reference predicate accepts, over random points and filters.
    #[test]
    fn translation_agrees_with_the_reference() {
        let mut rng = SplitMix::new(0x0bad_5eed);
        let roles = ["cto", "cfo", "designer"];
        let projects = [Some("p1"), Some("p2"), None];
        let sessions = [None, Some("s1"), Some("s2")];
        let tags = ["infra", "cost", "design"];
        let points: Vec<IndexedPoint> = (0..300)
            .map(|_| IndexedPoint {
                tenant_id: rng.pick(&["t1", "t2"]).to_string(),
                user_id: rng.pick(&["u1", "u2"]).to_string(),
                role_id: rng.pick(&roles).to_string(),
                project_id: rng.pick(&projects).map(str::to_string),
                session_id: rng.pick(&sessions).map(str::to_string),
                memory_type: *rng.pick(MemoryType::ALL),
                visibility: *rng.pick(Visibility::ALL),
                status: *rng.pick(MemoryStatus::ALL),
                occurred_at_ms: 1_700_000_000_000 + rng.below(100) as i64,
                tags: rng.subset(&tags).into_iter().map(str::to_string).collect(),
                ..conformance::base_point(&Owner::new("t1", "u1"))
            })
            .collect();
        let mut checked = 0;
        let mut accepted = BTreeSet::new();
        for _ in 0..2_000 {
            let owners = [Owner::new("t1", "u1"), Owner::new("t1", "u2"), Owner::new("t2", "u1")];
            let mut filter = MemoryFilter::user(rng.pick(&owners));
            filter.statuses = rng.subset(MemoryStatus::ALL);
            if rng.chance(70) {
                filter.reader = Some(Reader {
                    role_id: rng.pick(&roles).to_string(),
                    project_id: rng
                        .pick(&[Some("p1"), Some("p2"), Some("p3"), None])
                        .map(str::to_string),
                    layers: *rng.pick(&[Layers::Both, Layers::Project, Layers::CrossProject]),
                });
            }
            if rng.chance(30) {
                filter.types = rng.subset(MemoryType::ALL);
            }
            if rng.chance(30) {
                filter.visibilities = rng.subset(Visibility::ALL);
            }
            if rng.chance(30) {
                filter.session_id = rng.pick(&sessions).map(str::to_string);
            }
            if rng.chance(30) {
                filter.occurred_from_ms = Some(1_700_000_000_000 + rng.below(100) as i64);
            }
            if rng.chance(30) {
                filter.occurred_to_ms = Some(1_700_000_000_000 + rng.below(100) as i64);
            }
            if rng.chance(30) {
                filter.tags = rng.subset(&tags).into_iter().map(str::to_string).collect();
            }
            let translated = qdrant_filter(&filter);
            for point in &points {
                let by_qdrant = translated.as_ref().is_some_and(|f| eval(f, &payload(point)));
                assert_eq!(
                    by_qdrant,
                    crate::conformance::visibility::reference(&filter, point),
                    "translation disagrees for {filter:?} on {point:?}"
                );
                if by_qdrant {
                    accepted.insert(point.id.clone());
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 600_000);
        assert!(
            accepted.len() > 150,
            "the random filters accept a good share of the points: {}",
            accepted.len()
        );
    }

    #[test]
    fn payload_values_convert() {
        let point = IndexedPoint {
            tags: vec!["a".into(), "b".into()],
            project_id: None,
            ..conformance::base_point(&Owner::new("t1", "u1"))
        };
        let built = point_struct(&point, conformance::DIM).expect("point");
        let payload = built.payload;
        assert_eq!(
            payload.get(field::CROSS_PROJECT).and_then(|v| v.kind.clone()),
            Some(Kind::BoolValue(true))
        );
        assert!(!payload.contains_key(field::PROJECT_ID));
        assert_eq!(
            payload.get(field::OCCURRED_AT_MS).and_then(|v| v.kind.clone()),
            Some(Kind::IntegerValue(point.occurred_at_ms))
        );
        assert!(matches!(
            payload.get(field::TAGS).and_then(|v| v.kind.clone()),
            Some(Kind::ListValue(list)) if list.values.len() == 2
        ));
        assert!(matches!(
            point_struct(&point, conformance::DIM + 1),
            Err(VectorError::Dimension { .. })
        ));
    }
}
