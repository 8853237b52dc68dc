//! Fuzzing every request decoder through the server (issue 18): for each RPC of every
//! service, requests generated from the contracts' own descriptors (strings that are empty,
//! huge, full of spaces or not UTF-8; extreme numbers and timestamps; unknown enum values;
//! nested messages; some of them truncated or corrupted on the wire) are sent to a node that
//! runs every service, and each answer must be an OK or a status the caller can act on: never
//! INTERNAL, UNKNOWN or a broken connection, never a panic. Afterwards the node still serves.
//!
//! The generator draws its choices from a byte string that proptest provides and shrinks
//! (as `arbitrary` does), so a failure is reported with a small reproducing input. Bounded
//! in time for `make test`: THINKUS_FUZZ_CASES requests per RPC (default 128) and at most
//! THINKUS_FUZZ_SECONDS in all (default 60).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::BufMut;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};
use thinkus_proto::codec::RawCodec;
use thinkus_server::ServiceKind;
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

use crate::nodes;

/// Panics raised outside the tests' own code while the fuzzer runs.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Choices drawn from a byte string; zeros once it is used up (the simplest choice).
struct Entropy<'a> {
    data: &'a [u8],
}

impl Entropy<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |acc, _| (acc << 8) | u64::from(self.byte()))
    }

    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let wide = if n <= 256 {
            usize::from(self.byte())
        } else {
            self.u64() as usize
        };
        wide % n
    }

    fn chance(&mut self, percent: u8) -> bool {
        self.byte() % 100 < percent
    }
}

/// The contracts: messages by full name (".thinkus.common.v1.Scope") and the RPCs.
struct Schema {
    messages: HashMap<String, DescriptorProto>,
    methods: Vec<Rpc>,
}

#[derive(Debug, Clone)]
struct Rpc {
    path: String,
    input: String,
    client_streaming: bool,
    server_streaming: bool,
}

fn collect_messages(prefix: &str, messages: &[DescriptorProto], out: &mut HashMap<String, DescriptorProto>) {
    for message in messages {
        let name = format!("{prefix}.{}", message.name());
        collect_messages(&name, &message.nested_type, out);
        out.insert(name, message.clone());
    }
}

fn schema() -> Schema {
    let mut set = FileDescriptorSet::decode(thinkus_proto::FILE_DESCRIPTOR_SET).expect("the descriptor set decodes");
    set.file.extend(
        FileDescriptorSet::decode(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .expect("health descriptors")
            .file,
    );
    let mut messages = HashMap::new();
    let mut methods = Vec::new();
    for file in &set.file {
        let package = file.package();
        collect_messages(&format!(".{package}"), &file.message_type, &mut messages);
        if !package.starts_with("thinkus.") {
            continue;
        }
        for service in &file.service {
            for method in &service.method {
                methods.push(Rpc {
                    path: format!("/{package}.{}/{}", service.name(), method.name()),
                    input: method.input_type().to_string(),
                    client_streaming: method.client_streaming(),
                    server_streaming: method.server_streaming(),
                });
            }
        }
    }
    Schema { messages, methods }
}

/// Ids that exist on the node, so that some requests reach past the lookups.
#[derive(Default)]
struct Known {
    ids: Vec<String>,
}

const USERS: [&str; 3] = ["fuzz", "fuzz-other", ""];
const LOCATORS: [&str; 10] = [
    "1-5",
    "0-",
    "3",
    "18446744073709551615-",
    "$..*",
    "$.items[0].name",
    "$..a..b",
    "$[?@.id > 1]",
    "login",
    "$[",
];

fn string_value(entropy: &mut Entropy<'_>, field: &str, known: &Known) -> Vec<u8> {
    // Mostly plausible values for ids, so that requests get past validation to the work.
    let plausible = entropy.chance(65);
    if plausible && field == "user_id" {
        return USERS[entropy.below(USERS.len() - 1)].as_bytes().to_vec();
    }
    if plausible && field.ends_with("_id") && !known.ids.is_empty() && entropy.chance(50) {
        return known.ids[entropy.below(known.ids.len())].as_bytes().to_vec();
    }
    if plausible && field.ends_with("_id") {
        return ["cto", "s1", "p1", "cfo"][entropy.below(4)].as_bytes().to_vec();
    }
    let choice = entropy.below(16);
    match choice {
        0 => Vec::new(),
        1 | 2 => ["alice", "cto", "the budget", "decision", "user", "预算是多少"][entropy.below(6)]
            .as_bytes()
            .to_vec(),
        3 => LOCATORS[entropy.below(LOCATORS.len())].as_bytes().to_vec(),
        4 => {
            // Not UTF-8.
            let mut bytes = b"ok".to_vec();
            bytes.extend([0xff, 0xfe, 0xc3]);
            bytes
        }
        5 => " ".repeat(1 + entropy.below(200_000)).into_bytes(),
        6 => "a".repeat(1 + entropy.below(100_000)).into_bytes(),
        7 => "我们决定预算是$800。".repeat(1 + entropy.below(2_000)).into_bytes(),
        8 => b"with\0nul".to_vec(),
        9 => format!("mem_{:032x}", entropy.u64()).into_bytes(),
        10 => b"../../etc/passwd".to_vec(),
        11 => "\u{202e}\u{200b}\u{1f600}\t\r\n".as_bytes().to_vec(),
        _ => {
            let len = entropy.below(48);
            let text: String = (0..len)
                .map(|_| {
                    let pool = "abc xyz 0129 _-.:/$@[]{}\"'\\ 用户预算决定 éü";
                    pool.chars().nth(entropy.below(pool.chars().count())).unwrap_or('x')
                })
                .collect();
            text.into_bytes()
        }
    }
}

fn int_value(entropy: &mut Entropy<'_>) -> u64 {
    match entropy.below(10) {
        0 => 0,
        1 => 1,
        2 => u64::MAX, // -1 as a varint
        3 => i32::MAX as u64,
        4 => i32::MIN as i64 as u64,
        5 => i64::MAX as u64,
        6 => i64::MIN as u64,
        7 => entropy.below(1000) as u64,
        _ => entropy.u64(),
    }
}

fn timestamp(entropy: &mut Entropy<'_>) -> Vec<u8> {
    let seconds: i64 = match entropy.below(11) {
        0 => 0,
        9 => -8_334_601_228_800, // chrono's first day
        10 => 8_210_266_876_799, // chrono's last day
        1 => 1_764_000_000,
        2 => -62_135_596_801,
        3 => -62_135_596_800,
        4 => 253_402_300_799,
        5 => 253_402_300_800,
        6 => i64::MAX,
        7 => i64::MIN,
        _ => entropy.u64() as i64,
    };
    let nanos: i32 = match entropy.below(5) {
        0 => 0,
        1 => 999_999_999,
        2 => 1_000_000_000,
        3 => -1,
        _ => entropy.u64() as i32,
    };
    let mut out = Vec::new();
    encode_key(1, WireType::Varint, &mut out);
    encode_varint(seconds as u64, &mut out);
    encode_key(2, WireType::Varint, &mut out);
    encode_varint(nanos as i64 as u64, &mut out);
    out
}

/// A message of type `name` in wire format, its fields drawn from `entropy`.
fn message(schema: &Schema, name: &str, entropy: &mut Entropy<'_>, known: &Known, depth: usize) -> Vec<u8> {
    if name == ".google.protobuf.Timestamp" {
        return timestamp(entropy);
    }
    let Some(descriptor) = schema.messages.get(name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for field in &descriptor.field {
        let number = field.number() as u32;
        let repeated = field.label() == Label::Repeated;
        let count = if repeated {
            if entropy.chance(5) {
                entropy.below(300)
            } else {
                entropy.below(4)
            }
        } else if entropy.chance(if field.name() == "scope" { 95 } else { 70 }) {
            1
        } else {
            0
        };
        for _ in 0..count {
            match field.r#type() {
                Type::String | Type::Bytes => {
                    let value = if field.r#type() == Type::Bytes {
                        match entropy.below(4) {
                            0 => br#"{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}],"nested":{"deep":[[[1]]]}}"#
                                .to_vec(),
                            1 => (0..entropy.below(4096)).map(|_| entropy.byte()).collect(),
                            _ => string_value(entropy, field.name(), known),
                        }
                    } else {
                        string_value(entropy, field.name(), known)
                    };
                    encode_key(number, WireType::LengthDelimited, &mut out);
                    encode_varint(value.len() as u64, &mut out);
                    out.extend_from_slice(&value);
                }
                Type::Message if depth < 4 => {
                    let nested = message(schema, field.type_name(), entropy, known, depth + 1);
                    encode_key(number, WireType::LengthDelimited, &mut out);
                    encode_varint(nested.len() as u64, &mut out);
                    out.extend_from_slice(&nested);
                }
                Type::Message | Type::Group => {}
                Type::Enum => {
                    encode_key(number, WireType::Varint, &mut out);
                    let value = if entropy.chance(80) {
                        entropy.below(6) as i64
                    } else {
                        entropy.below(14) as i64 - 2
                    };
                    encode_varint(value as u64, &mut out);
                }
                Type::Bool => {
                    encode_key(number, WireType::Varint, &mut out);
                    encode_varint(entropy.below(3) as u64, &mut out);
                }
                Type::Double | Type::Fixed64 | Type::Sfixed64 => {
                    encode_key(number, WireType::SixtyFourBit, &mut out);
                    let bits = match entropy.below(5) {
                        0 => f64::NAN.to_bits(),
                        1 => f64::INFINITY.to_bits(),
                        2 => (-1e300f64).to_bits(),
                        3 => 0.5f64.to_bits(),
                        _ => entropy.u64(),
                    };
                    out.put_u64_le(bits);
                }
                Type::Float | Type::Fixed32 | Type::Sfixed32 => {
                    encode_key(number, WireType::ThirtyTwoBit, &mut out);
                    let bits = match entropy.below(5) {
                        0 => f32::NAN.to_bits(),
                        1 => f32::NEG_INFINITY.to_bits(),
                        2 => 7.0f32.to_bits(),
                        _ => entropy.u64() as u32,
                    };
                    out.put_u32_le(bits);
                }
                _ => {
                    encode_key(number, WireType::Varint, &mut out);
                    encode_varint(int_value(entropy), &mut out);
                }
            }
        }
    }
    // Some messages are damaged on the wire: cut short, a byte changed, or junk appended.
    if depth == 0 && entropy.chance(12) && !out.is_empty() {
        match entropy.below(3) {
            0 => out.truncate(entropy.below(out.len())),
            1 => {
                let at = entropy.below(out.len());
                out[at] ^= entropy.byte() | 1;
            }
            _ => out.extend((0..1 + entropy.below(16)).map(|_| entropy.byte())),
        }
    }
    out
}

/// Whether a status is an acceptable answer to a request nobody vetted.
fn acceptable(code: Code) -> bool {
    !matches!(
        code,
        Code::Internal | Code::Unknown | Code::DataLoss | Code::Unavailable | Code::Cancelled
    )
}

async fn call(channel: Channel, rpc: &Rpc, requests: Vec<Vec<u8>>) -> Result<(), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|err| tonic::Status::unavailable(format!("not ready: {err}")))?;
    let path = PathAndQuery::from_str(&rpc.path).expect("a valid path");
    let mut first = requests.into_iter();
    if rpc.client_streaming {
        let stream = tokio_stream::iter(first.collect::<Vec<_>>());
        grpc.client_streaming(tonic::Request::new(stream), path, RawCodec)
            .await?;
        return Ok(());
    }
    let request = tonic::Request::new(first.next().unwrap_or_default());
    if rpc.server_streaming {
        let mut stream = grpc.server_streaming(request, path, RawCodec).await?.into_inner();
        while stream.message().await?.is_some() {}
        return Ok(());
    }
    grpc.unary(request, path, RawCodec).await?;
    Ok(())
}

fn count_foreign_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let ours = info
            .location()
            .is_some_and(|l| !l.file().contains("tests/it/") && !l.file().contains("/conformance/"));
        if ours {
            PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
}

async fn seed(channel: Channel, known: &mut Known) {
    use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
    use thinkus_proto::artifact::{ArtifactHeader, CreateArtifactRequest};
    use thinkus_proto::common::{MemoryType, Scope};
    use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
    use thinkus_proto::knowledge::{MemoryDraft, RememberRequest};

    let scope = Scope {
        tenant_id: String::new(),
        user_id: "fuzz".into(),
        role_id: "cto".into(),
        project_id: "p1".into(),
        session_id: "s1".into(),
    };
    let mut knowledge = KnowledgeManagerServiceClient::new(channel.clone());
    for content in [
        "The budget is $800",
        "我们决定用Stripe支付",
        "Deploy on Fridays is forbidden",
    ] {
        let written = knowledge
            .remember(RememberRequest {
                scope: Some(scope.clone()),
                memory: Some(MemoryDraft {
                    r#type: MemoryType::ProjectDecision as i32,
                    content: content.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("seed a memory")
            .into_inner();
        known.ids.extend(written.result.and_then(|r| r.memory).map(|m| m.id));
    }
    let mut artifacts = ArtifactServiceClient::new(channel);
    for (path, content) in [
        (
            "out.json",
            br#"{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}]}"#.to_vec(),
        ),
        ("log.txt", "line one\nlogin failed\n".repeat(50).into_bytes()),
    ] {
        let stored = artifacts
            .create_artifact(CreateArtifactRequest {
                header: Some(ArtifactHeader {
                    scope: Some(scope.clone()),
                    path: path.into(),
                    ..Default::default()
                }),
                content,
            })
            .await
            .expect("seed an artifact")
            .into_inner();
        known.ids.extend(stored.artifact.map(|a| a.id));
    }
}

#[test]
fn every_request_decoder_answers_bad_input_without_failing() {
    let cases: u32 = std::env::var("THINKUS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let budget = Duration::from_secs(
        std::env::var("THINKUS_FUZZ_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    count_foreign_panics();
    // Declared before the runtime, so dropped after it: the node's index flushes on drop.
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    config.server.tenant_rate_per_second = 0.0;
    let node = runtime.block_on(nodes::start(config, &ServiceKind::ALL, None));
    let channel = runtime.block_on(nodes::channel(&node));
    let mut known = Known::default();
    runtime.block_on(seed(channel.clone(), &mut known));

    let schema = schema();
    assert!(schema.methods.len() >= 39, "{} RPCs", schema.methods.len());
    let started = Instant::now();
    let sent = std::cell::Cell::new(0usize);
    let codes: std::cell::RefCell<HashMap<Code, usize>> = Default::default();
    // Each RPC gets its share of the time, so a slow one cannot starve the others.
    let share = budget / schema.methods.len() as u32;
    for rpc in &schema.methods {
        let rpc_started = Instant::now();
        let mut runner = TestRunner::new(ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let strategy = proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..1024);
        let result = runner.run(&strategy, |data: Vec<u8>| {
            if rpc_started.elapsed() > share {
                return Ok(());
            }
            let mut entropy = Entropy { data: &data };
            let messages = if rpc.client_streaming { 1 + entropy.below(3) } else { 1 };
            let requests: Vec<Vec<u8>> = (0..messages)
                .map(|_| message(&schema, &rpc.input, &mut entropy, &known, 0))
                .collect();
            sent.set(sent.get() + 1);
            let outcome = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(30), call(channel.clone(), rpc, requests)).await
            });
            match outcome {
                Err(_) => Err(TestCaseError::fail(format!("{}: no answer within 30 s", rpc.path))),
                Ok(Ok(())) => {
                    *codes.borrow_mut().entry(Code::Ok).or_default() += 1;
                    Ok(())
                }
                Ok(Err(status)) => {
                    *codes.borrow_mut().entry(status.code()).or_default() += 1;
                    if acceptable(status.code()) {
                        Ok(())
                    } else {
                        Err(TestCaseError::fail(format!(
                            "{}: {:?} {}",
                            rpc.path,
                            status.code(),
                            status.message()
                        )))
                    }
                }
            }
        });
        if let Err(err) = result {
            panic!("{}: {err}", rpc.path);
        }
    }
    let codes = codes.into_inner();
    crate::support::loud(&format!(
        "fuzz: {} requests over {} RPCs in {:.1?}, answers {codes:?}, panics {}",
        sent.get(),
        schema.methods.len(),
        started.elapsed(),
        PANICS.load(Ordering::SeqCst)
    ));
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "panics outside the tests while fuzzing"
    );
    assert!(codes.get(&Code::InvalidArgument).copied().unwrap_or(0) > 0);
    // The node still serves, health included.
    runtime.block_on(async {
        thinkus_common::grpc::wait_serving(&node.url(), "", Duration::from_secs(10))
            .await
            .expect("health still SERVING after the fuzzing");
        let mut retriever =
            thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient::new(channel.clone());
        retriever
            .recall(thinkus_proto::retriever::RecallRequest {
                scope: Some(thinkus_proto::common::Scope {
                    tenant_id: String::new(),
                    user_id: "fuzz".into(),
                    role_id: "cto".into(),
                    project_id: "p1".into(),
                    session_id: String::new(),
                }),
                query: "budget".into(),
                ..Default::default()
            })
            .await
            .expect("a valid request is still served");
        node.shutdown().await.unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_invalid_argument_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let node = nodes::start(config, &[ServiceKind::Retriever, ServiceKind::KnowledgeManager], None).await;
    let channel = nodes::channel(&node).await;
    // RecallRequest { scope: Scope { user_id: "u" }, query: <not UTF-8> }
    let mut scope = Vec::new();
    encode_key(1, WireType::LengthDelimited, &mut scope);
    encode_varint(1, &mut scope);
    scope.push(b'u');
    let mut request = Vec::new();
    encode_key(1, WireType::LengthDelimited, &mut request);
    encode_varint(scope.len() as u64, &mut request);
    request.extend_from_slice(&scope);
    encode_key(2, WireType::LengthDelimited, &mut request);
    encode_varint(3, &mut request);
    request.extend_from_slice(&[0xff, 0xfe, 0xfd]);
    let rpc = Rpc {
        path: "/thinkus.retriever.v1.RetrieverService/Recall".into(),
        input: String::new(),
        client_streaming: false,
        server_streaming: false,
    };
    let status = call(channel, &rpc, vec![request]).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
    assert!(status.message().contains("RecallRequest.query"), "{}", status.message());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extreme_now_is_invalid_argument_naming_the_field() {
    use thinkus_proto::knowledge::RunMaintenanceRequest;
    use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
    use thinkus_proto::retriever::RecallRequest;
    use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;

    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let node = nodes::start(config, &[ServiceKind::Retriever, ServiceKind::KnowledgeManager], None).await;
    let channel = nodes::channel(&node).await;
    let scope = thinkus_proto::common::Scope {
        tenant_id: String::new(),
        user_id: "u".into(),
        role_id: "cto".into(),
        ..Default::default()
    };
    let mut knowledge = KnowledgeManagerServiceClient::new(channel.clone());
    let mut retriever = RetrieverServiceClient::new(channel);
    knowledge
        .remember(thinkus_proto::knowledge::RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(thinkus_proto::knowledge::MemoryDraft {
                r#type: thinkus_proto::common::MemoryType::Constraint as i32,
                content: "The budget is $800".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    // Times chrono can hold but a window or a TTL around them cannot: a forgetting window
    // before chrono's first day panicked the maintenance sweep.
    for seconds in [
        -8_334_601_228_800,
        8_210_266_876_799,
        6_249_223_104_000,
        -8_000_000_000_000,
        i64::MAX,
    ] {
        let now = Some(prost_types::Timestamp { seconds, nanos: 0 });
        let err = knowledge
            .run_maintenance(RunMaintenanceRequest {
                scope: Some(scope.clone()),
                decay: true,
                forget: true,
                now,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
        assert!(err.message().starts_with("now: "), "{}", err.message());
        let err = retriever
            .recall(RecallRequest {
                scope: Some(scope.clone()),
                query: "budget".into(),
                now,
                time_range: Some(thinkus_proto::common::TimeRange {
                    preset: thinkus_proto::common::TimeRangePreset::Last30Days as i32,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
        assert!(err.message().starts_with("now: "), "{}", err.message());
    }
    node.shutdown().await.unwrap();
}
