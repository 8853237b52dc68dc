//! The artifact service end to end over gRPC (issue 6), on both blob backends: store, compact,
//! every locator, streaming both ways with the size limit, content addressing and deletion,
//! session listing, expiry (on request and on schedule), and another tenant's artifact being
//! NOT_FOUND. The S3 run needs TEST_S3_URI like the blob conformance suite.

use std::sync::Arc;
use std::time::Duration;

use thinkus_artifact::ArtifactGrpcClient;
use thinkus_artifact::api::{ArtifactApi, NewArtifact};
use thinkus_backends::blob::BlobStore;
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::read_artifact_request::Locator;
use thinkus_proto::artifact::upload_artifact_request::Part;
use thinkus_proto::artifact::*;
use thinkus_proto::common::{ArtifactKind, LocatorType, PageRequest, Scope};
use thinkus_server::ServiceKind;
use thinkus_server::node::NodeHandle;
use tonic::Code;
use tonic::transport::Channel;

use crate::{nodes, support};

const RUST_SOURCE: &str = r#"//! User service.

use std::collections::HashMap;

/// A registered user.
pub struct User {
    pub id: u64,
    pub name: String,
}

impl User {
    pub fn new(id: u64, name: &str) -> Self {
        Self { id, name: name.to_string() }
    }
}

pub async fn register(users: &mut HashMap<u64, User>, user: User) {
    users.insert(user.id, user);
}

pub async fn login(users: &HashMap<u64, User>, id: u64) -> bool {
    // Login succeeds for known users.
    users.contains_key(&id)
}
"#;

fn scope(user: &str, session: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: "cto".into(),
        project_id: "p1".into(),
        session_id: session.into(),
        ..Default::default()
    }
}

fn header(user: &str, session: &str, path: &str) -> ArtifactHeader {
    ArtifactHeader {
        scope: Some(scope(user, session)),
        tool_call_id: "call-1".into(),
        tool_name: "read_file".into(),
        path: path.into(),
        ..Default::default()
    }
}

async fn create(
    client: &mut ArtifactServiceClient<Channel>,
    header: ArtifactHeader,
    content: &[u8],
) -> CreateArtifactResponse {
    client
        .create_artifact(CreateArtifactRequest {
            header: Some(header),
            content: content.to_vec(),
        })
        .await
        .expect("create the artifact")
        .into_inner()
}

async fn read(
    client: &mut ArtifactServiceClient<Channel>,
    user: &str,
    id: &str,
    locator: Locator,
) -> Result<ReadArtifactResponse, tonic::Status> {
    client
        .read_artifact(ReadArtifactRequest {
            scope: Some(scope(user, "")),
            artifact_id: id.into(),
            locator: Some(locator),
            max_bytes: 0,
        })
        .await
        .map(|r| r.into_inner())
}

async fn download(
    client: &mut ArtifactServiceClient<Channel>,
    user: &str,
    id: &str,
) -> Result<(Vec<u8>, usize), tonic::Status> {
    let mut stream = client
        .download_artifact(DownloadArtifactRequest {
            scope: Some(scope(user, "")),
            artifact_id: id.into(),
        })
        .await?
        .into_inner();
    let (mut content, mut chunks) = (Vec::new(), 0);
    while let Some(message) = stream.message().await? {
        content.extend_from_slice(&message.chunk);
        chunks += 1;
    }
    Ok((content, chunks))
}

fn upload_messages(header: ArtifactHeader, content: &[u8], chunk: usize) -> Vec<UploadArtifactRequest> {
    std::iter::once(UploadArtifactRequest {
        part: Some(Part::Header(header)),
    })
    .chain(content.chunks(chunk).map(|c| UploadArtifactRequest {
        part: Some(Part::Chunk(c.to_vec())),
    }))
    .collect()
}

fn invalid(result: Result<ReadArtifactResponse, tonic::Status>, field: &str) {
    let status = result.expect_err("the read is refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().starts_with(&format!("{field}: ")),
        "{}",
        status.message()
    );
}

async fn start(blobs: Option<String>, dir: &std::path::Path) -> NodeHandle {
    let mut config = nodes::embedded_config(dir);
    config.storage.blobs = blobs;
    config.artifact.max_bytes = 4 * 1024 * 1024;
    config.artifact.chunk_bytes = 64 * 1024;
    config.artifact.purge_interval_secs = 1;
    nodes::start(config, &[ServiceKind::Artifact], None).await
}

/// Every behaviour, against the node's blob backend.
async fn scenario(node: &NodeHandle) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let alice = format!("alice-{run}");
    let bob = format!("bob-{run}");
    let blobs: Arc<dyn BlobStore> = node.backends.blobs.clone().expect("the node opened the blob store");
    let channel = nodes::channel(node).await;
    let mut client = ArtifactServiceClient::new(channel.clone());

    // Store: a code file; its compact lists the top-level items with their lines.
    let code = create(
        &mut client,
        header(&alice, "s1", "/src/user.rs"),
        RUST_SOURCE.as_bytes(),
    )
    .await;
    let artifact = code.artifact.clone().unwrap();
    let compact = code.compact.clone().unwrap();
    assert!(artifact.id.starts_with("art_"));
    assert!(!code.deduplicated);
    assert_eq!(artifact.kind, ArtifactKind::Code as i32);
    assert_eq!(artifact.line_count, RUST_SOURCE.lines().count() as i64);
    assert_eq!(artifact.size_bytes, RUST_SOURCE.len() as i64);
    assert_eq!(artifact.mime_type, "text/x-rust");
    assert!(compact.tokens > 0 && compact.tokens < 500, "{}", compact.tokens);
    assert_eq!(compact.r#ref, artifact.id);
    assert_eq!(compact.language, "en");
    assert!(compact.summary.contains("fn login (21-24)"), "{}", compact.summary);
    assert!(compact.summary.contains("struct User (6-9)"), "{}", compact.summary);
    assert!(
        compact.rendered.starts_with(&format!("[Artifact: {}]", artifact.id)),
        "{}",
        compact.rendered
    );
    assert!(compact.locators.iter().any(|l| l.r#type == LocatorType::Lines as i32));
    let got = client
        .get_artifact(GetArtifactRequest {
            scope: Some(scope(&alice, "")),
            artifact_id: artifact.id.clone(),
            language: "zh".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let zh = got.compact.unwrap();
    assert_eq!(zh.language, "zh");
    assert!(zh.rendered.contains("类型: 代码文件（Rust）"), "{}", zh.rendered);
    assert!(zh.size.starts_with("24行 / "), "{}", zh.size);

    // Lines: exact, then past the end.
    let lines = read(&mut client, &alice, &artifact.id, Locator::Lines("21-24".into()))
        .await
        .unwrap();
    assert!(lines.content.starts_with("pub async fn login"), "{}", lines.content);
    assert_eq!((lines.start, lines.end, lines.past_end), (21, 24, false));
    assert_eq!(lines.total_lines, 24);
    let past = read(&mut client, &alice, &artifact.id, Locator::Lines("24-400".into()))
        .await
        .unwrap();
    assert!(past.past_end);
    assert_eq!((past.start, past.end), (24, 24));
    assert!(past.note.contains("24"), "{}", past.note);
    // Search: each hit with 5 lines of context and its line number.
    let hits = read(&mut client, &alice, &artifact.id, Locator::Search("LOGIN".into()))
        .await
        .unwrap();
    assert_eq!(hits.hits.iter().map(|h| h.line).collect::<Vec<_>>(), vec![21, 22]);
    assert_eq!((hits.hits[0].start_line, hits.hits[0].end_line), (16, 24));
    assert!(
        hits.content.contains(">    21 | pub async fn login"),
        "{}",
        hits.content
    );

    // Bytes: a range inside a multi-byte character widens to the whole character.
    let text = "价格：¥800，预算有限\n第二行\n";
    let zh_text = create(&mut client, header(&alice, "s1", "/notes.txt"), text.as_bytes()).await;
    let zh_id = zh_text.artifact.unwrap().id;
    assert_eq!(zh_text.compact.unwrap().language, "zh");
    let bytes = read(&mut client, &alice, &zh_id, Locator::Bytes("1-4".into()))
        .await
        .unwrap();
    assert_eq!(bytes.content, "价格");
    assert_eq!((bytes.start, bytes.end), (0, 6));
    let bytes = read(&mut client, &alice, &zh_id, Locator::Bytes("9-100000".into()))
        .await
        .unwrap();
    assert!(bytes.past_end);
    assert_eq!(bytes.end as usize, text.len());
    assert_eq!(bytes.content, &text[9..]);

    // JSONPath on JSON; refused on anything else.
    let json = br#"{"data":{"users":[{"name":"ann","age":31},{"name":"bo","age":22}]},"total":2}"#;
    let doc = create(&mut client, header(&alice, "s1", "/api/users.json"), json).await;
    let doc_id = doc.artifact.clone().unwrap().id;
    assert_eq!(doc.artifact.unwrap().kind, ArtifactKind::Json as i32);
    let doc_compact = doc.compact.unwrap();
    assert!(
        doc_compact.rendered.contains("json_path=\"$.data.users[0]\""),
        "{}",
        doc_compact.rendered
    );
    let names = read(
        &mut client,
        &alice,
        &doc_id,
        Locator::JsonPath("$.data.users[*].name".into()),
    )
    .await
    .unwrap();
    assert_eq!(names.content, r#"["ann","bo"]"#);
    assert_eq!(names.matches, 2);

    // Bad locators name the locator; never a panic.
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::Lines("9-2".into())).await,
        "lines",
    );
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::Lines("0-3".into())).await,
        "lines",
    );
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::Lines("a-b".into())).await,
        "lines",
    );
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::Bytes("50-10".into())).await,
        "bytes",
    );
    invalid(
        read(&mut client, &alice, &doc_id, Locator::JsonPath("$[".into())).await,
        "json_path",
    );
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::JsonPath("$.a".into())).await,
        "json_path",
    );
    invalid(
        read(&mut client, &alice, &artifact.id, Locator::Search("".into())).await,
        "search",
    );

    // Another tenant's artifact is NOT_FOUND, for every call.
    for status in [
        read(&mut client, &bob, &artifact.id, Locator::Lines("1-2".into()))
            .await
            .unwrap_err(),
        client
            .get_artifact(GetArtifactRequest {
                scope: Some(scope(&bob, "")),
                artifact_id: artifact.id.clone(),
                language: String::new(),
            })
            .await
            .unwrap_err(),
        download(&mut client, &bob, &artifact.id).await.unwrap_err(),
        client
            .delete_artifact(DeleteArtifactRequest {
                scope: Some(scope(&bob, "")),
                artifact_id: artifact.id.clone(),
            })
            .await
            .unwrap_err(),
    ] {
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
    }

    // Streaming: a 3 MB upload in 64 KiB chunks, downloaded back in chunks.
    let big: Vec<u8> = (0..3 * 1024 * 1024 / 32)
        .flat_map(|i| format!("{i:>8} INFO worker handled job\n").into_bytes())
        .collect();
    let uploaded = client
        .upload_artifact(tokio_stream::iter(upload_messages(
            header(&alice, "s2", "/var/log/app.log"),
            &big,
            64 * 1024,
        )))
        .await
        .expect("upload in chunks")
        .into_inner();
    let big_artifact = uploaded.artifact.unwrap();
    assert_eq!(big_artifact.size_bytes as usize, big.len());
    assert_eq!(big_artifact.kind, ArtifactKind::Log as i32);
    assert!(uploaded.compact.unwrap().tokens < 500);
    let (downloaded, chunks) = download(&mut client, &alice, &big_artifact.id).await.unwrap();
    assert!(downloaded == big, "the download equals the upload");
    assert!(chunks >= 40, "{chunks} chunks for 3 MB at 64 KiB");
    // The size limit holds while streaming; nothing is left behind.
    let too_big = vec![b'x'; 5 * 1024 * 1024];
    let status = client
        .upload_artifact(tokio_stream::iter(upload_messages(
            header(&alice, "s2", "/big.bin"),
            &too_big,
            256 * 1024,
        )))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().starts_with("content: larger than the limit"),
        "{}",
        status.message()
    );
    assert!(blobs.list("tmp").await.unwrap().is_empty(), "no temporary blob is left");
    let status = client
        .upload_artifact(tokio_stream::iter(vec![UploadArtifactRequest {
            part: Some(Part::Chunk(b"no header".to_vec())),
        }]))
        .await
        .unwrap_err();
    assert!(status.message().starts_with("header: "), "{}", status.message());

    // The domain client over gRPC: a failing source aborts the upload and stores nothing.
    let grpc = ArtifactGrpcClient::new(thinkus_common::grpc::client_channel(channel.clone(), None), 16 << 20);
    let before = blobs.list("artifacts").await.unwrap().len();
    let failing = futures::stream::iter(vec![
        Ok(bytes::Bytes::from_static(b"partial content\n")),
        Err(thinkus_common::ApiError::unavailable("the tool died")),
    ]);
    let new = NewArtifact {
        scope: thinkus_common::model::Scope {
            user_id: alice.clone(),
            role_id: "cto".into(),
            project_id: None,
            session_id: Some("s9".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = grpc
        .upload(new.clone(), Box::pin(failing))
        .await
        .expect_err("a failing source fails the upload");
    assert!(err.message.contains("the tool died"), "{err}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(blobs.list("artifacts").await.unwrap().len(), before);
    let streamed = grpc
        .upload(
            new.clone(),
            Box::pin(futures::stream::iter(vec![
                Ok(bytes::Bytes::from_static(b"line one\n")),
                Ok(bytes::Bytes::from_static(b"line two\n")),
            ])),
        )
        .await
        .unwrap();
    assert_eq!(streamed.artifact.line_count, 2);
    let listed = grpc
        .list(thinkus_artifact::api::ListRequest {
            scope: new.scope.clone(),
            limit: 10,
            offset: 0,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "only the complete upload is in session s9");

    // Content addressing: same bytes in the same session return the artifact; in another
    // session a new artifact shares the blob, which goes with the last reference.
    let again = create(
        &mut client,
        header(&alice, "s1", "/src/user.rs"),
        RUST_SOURCE.as_bytes(),
    )
    .await;
    assert!(again.deduplicated);
    assert_eq!(again.artifact.unwrap().id, artifact.id);
    let other = create(
        &mut client,
        header(&alice, "s3", "/src/user.rs"),
        RUST_SOURCE.as_bytes(),
    )
    .await;
    assert!(!other.deduplicated);
    let other_id = other.artifact.unwrap().id;
    assert_ne!(other_id, artifact.id);
    let key = thinkus_artifact::service::blob_key(
        &thinkus_common::model::Owner::new("default", alice.clone()),
        &artifact.sha256,
    );
    let bob_copy = create(&mut client, header(&bob, "s1", "/src/user.rs"), RUST_SOURCE.as_bytes()).await;
    assert!(!bob_copy.deduplicated, "tenants never share");
    let bob_key = thinkus_artifact::service::blob_key(
        &thinkus_common::model::Owner::new("default", bob.clone()),
        &artifact.sha256,
    );
    assert_ne!(key, bob_key);
    assert!(blobs.size(&key).await.unwrap().is_some());
    client
        .delete_artifact(DeleteArtifactRequest {
            scope: Some(scope(&alice, "")),
            artifact_id: artifact.id.clone(),
        })
        .await
        .unwrap();
    assert!(
        blobs.size(&key).await.unwrap().is_some(),
        "still referenced by the copy in s3"
    );
    let still = read(&mut client, &alice, &other_id, Locator::Lines("1".into()))
        .await
        .unwrap();
    assert_eq!(still.content, "//! User service.\n");
    let gone = read(&mut client, &alice, &artifact.id, Locator::Lines("1".into()))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    client
        .delete_artifact(DeleteArtifactRequest {
            scope: Some(scope(&alice, "")),
            artifact_id: other_id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        blobs.size(&key).await.unwrap(),
        None,
        "the last reference took the blob"
    );
    assert!(blobs.size(&bob_key).await.unwrap().is_some(), "bob's copy is untouched");

    // Listing by session, newest first.
    let listed = client
        .list_artifacts(ListArtifactsRequest {
            scope: Some(scope(&alice, "s1")),
            page: Some(PageRequest {
                page_size: 10,
                page_token: String::new(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = listed.artifacts.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, vec![doc_id.as_str(), zh_id.as_str()]);
    assert_eq!(listed.compacts.len(), 2);
    assert_eq!(listed.compacts[0].r#ref, doc_id);

    // Expiry on request: a reference time after the expiry removes it with its blob.
    let mut expiring = header(&alice, "s4", "/tmp/out.txt");
    expiring.expires_at = Some(thinkus_common::convert::timestamp(
        chrono::Utc::now() + chrono::Duration::hours(1),
    ));
    let expiring = create(&mut client, expiring, b"temporary output that expires\n").await;
    let expiring = expiring.artifact.unwrap();
    let purged = client
        .purge_expired(PurgeExpiredRequest {
            scope: Some(scope(&alice, "")),
            now: Some(thinkus_common::convert::timestamp(
                chrono::Utc::now() + chrono::Duration::hours(2),
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((purged.removed, purged.blobs_removed), (1, 1));
    assert_eq!(
        blobs
            .size(&thinkus_artifact::service::blob_key(
                &thinkus_common::model::Owner::new("default", alice.clone()),
                &expiring.sha256
            ))
            .await
            .unwrap(),
        None
    );
    // Expiry on schedule: the node's job (every second in this configuration) removes it.
    let mut soon = header(&alice, "s5", "/tmp/soon.txt");
    soon.expires_at = Some(thinkus_common::convert::timestamp(
        chrono::Utc::now() + chrono::Duration::milliseconds(1500),
    ));
    let soon = create(&mut client, soon, b"gone soon\n").await.artifact.unwrap();
    let mut removed = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = read(&mut client, &alice, &soon.id, Locator::Lines("1".into())).await;
        if status.as_ref().is_err_and(|s| s.code() == Code::NotFound) {
            removed = true;
            break;
        }
    }
    assert!(removed, "the scheduled job removed the expired artifact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_on_a_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(None, dir.path()).await;
    scenario(&node).await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_on_s3() {
    let Some(uri) = support::server_from_env("TEST_S3_URI", "S3 artifact") else {
        return;
    };
    let (base, query) = uri.split_once('?').unwrap_or((uri.as_str(), ""));
    let prefixed = format!("{base}/artifacts-it-{}?{query}", uuid::Uuid::now_v7().simple());
    support::loud(&format!("running the artifact scenario on {prefixed}"));
    let dir = tempfile::tempdir().unwrap();
    let node = start(Some(prefixed), dir.path()).await;
    scenario(&node).await;
    node.shutdown().await.unwrap();
}
