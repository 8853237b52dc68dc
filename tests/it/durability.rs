//! The vector index survives `kill -9` (issue 18): the `thinkus` binary runs as a child
//! process, writers remember memories concurrently, and the process is killed with SIGKILL
//! while writes are in flight, five times over the same data directory. After each kill the
//! index directory is opened here and every acknowledged memory must have its point: none may
//! depend on a later repair. Each restart reconciles the index with the database (rows
//! committed but not acknowledged) before health reports SERVING, so at the end the index holds
//! exactly the stored memories.

use std::collections::HashSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thinkus_backends::vector::VectorIndex;
use thinkus_backends::vector::edge::EdgeIndex;
use thinkus_common::model::{DEFAULT_TENANT, Owner};
use thinkus_proto::common::{MemoryType, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{MemoryDraft, RememberRequest};
use thinkus_server::ServiceKind;
use tonic::transport::Channel;

use crate::support::{self, ChildGuard, free_port, loud};

const KILLS: usize = 5;
const WRITERS: usize = 4;
pub(crate) const USER: &str = "crash-user";

/// A `thinkus serve` of the knowledge manager and the retriever on `port` (SQLite in `dir`
/// unless `database` names another), as the SIGKILL tests run it.
pub(crate) fn spawn(dir: &std::path::Path, database: Option<&str>, port: u16) -> ChildGuard {
    spawn_with(dir, database, port, &[])
}

/// [`spawn`] with more `--set KEY=VALUE` settings, which override its own.
pub(crate) fn spawn_with(dir: &std::path::Path, database: Option<&str>, port: u16, settings: &[String]) -> ChildGuard {
    let mut command = Command::new(env!("CARGO_BIN_EXE_thinkus"));
    command
        .args(["serve", "--services", "knowledge-manager,retriever"])
        .args(["--set", &format!("server.grpc_addr=127.0.0.1:{port}")])
        .args(["--set", &format!("server.metrics_addr=127.0.0.1:{}", free_port())])
        .args(["--set", &format!("server.data_dir={}", dir.display())])
        .args(["--set", "embedder.uri=hash://384"])
        .args(["--set", "server.tenant_rate_per_second=0"])
        // No memory quota: the writers must still be writing when the process is killed.
        .args(["--set", "knowledge.quotas.default_plan=enterprise"]);
    if let Some(url) = database {
        command.args(["--set", &format!("storage.database={url}")]);
    }
    for setting in settings {
        command.args(["--set", setting]);
    }
    ChildGuard::spawn_quiet(&mut command)
}

/// [`spawn_with`] on a free port, once its knowledge manager and retriever serve (after
/// reconciling the index); and a channel to it.
pub(crate) async fn serve_with(
    dir: &std::path::Path,
    database: Option<&str>,
    settings: &[String],
) -> (ChildGuard, Channel) {
    let port = free_port();
    let child = spawn_with(dir, database, port, settings);
    let url = format!("http://127.0.0.1:{port}");
    for service in [ServiceKind::KnowledgeManager, ServiceKind::Retriever] {
        thinkus_common::grpc::wait_serving(&url, service.grpc_name(), Duration::from_secs(60))
            .await
            .expect("the process serves after reconciling");
    }
    let channel = tonic::transport::Endpoint::from_shared(url)
        .unwrap()
        .connect()
        .await
        .expect("connect");
    (child, channel)
}

/// [`serve_with`] with [`spawn`]'s settings.
pub(crate) async fn serve(dir: &std::path::Path, database: Option<&str>) -> (ChildGuard, Channel) {
    serve_with(dir, database, &[]).await
}

/// One role per cycle, so that each cycle's memories can be listed apart.
fn scope(cycle: usize) -> Scope {
    Scope {
        user_id: USER.into(),
        role_id: format!("cto-{cycle}"),
        ..Default::default()
    }
}

/// Remembers memories until the process dies; returns the ids that were acknowledged.
async fn writer(url: String, writer: usize, cycle: usize, acknowledged: Arc<Mutex<Vec<String>>>) {
    let Ok(channel) = tonic::transport::Endpoint::from_shared(url).unwrap().connect().await else {
        return;
    };
    let mut client = KnowledgeManagerServiceClient::new(channel);
    for i in 0.. {
        let written = client
            .remember(RememberRequest {
                scope: Some(scope(cycle)),
                memory: Some(MemoryDraft {
                    r#type: MemoryType::DiscussionConclusion as i32,
                    content: format!("Conclusion {cycle}.{writer}.{i}: the launch checklist item {i} is done"),
                    ..Default::default()
                }),
                skip_dedup: true,
                ..Default::default()
            })
            .await;
        match written {
            Ok(response) => {
                if let Some(memory) = response.into_inner().result.and_then(|r| r.memory) {
                    acknowledged.lock().unwrap().push(memory.id);
                }
            }
            Err(status) => {
                if acknowledged.lock().unwrap().is_empty() {
                    loud(&format!(
                        "durability: writer {writer} of cycle {cycle} stopped before any write: {status:?}"
                    ));
                }
                return;
            }
        }
    }
}

/// The ids of the points `USER` has in the index a stopped process left under `dir`.
pub(crate) async fn indexed_ids(dir: &std::path::Path) -> HashSet<String> {
    let index = EdgeIndex::open(&dir.join("vectors")).expect("open the index the process left");
    index.ensure_ready(384).await.expect("ready");
    index
        .list_ids(&Owner::new(DEFAULT_TENANT, USER))
        .await
        .expect("list")
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_point_is_lost_to_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut acknowledged_total = 0;
    for cycle in 0..KILLS {
        let port = free_port();
        let mut child = spawn(dir.path(), None, port);
        let url = format!("http://127.0.0.1:{port}");
        thinkus_common::grpc::wait_serving(&url, ServiceKind::KnowledgeManager.grpc_name(), Duration::from_secs(60))
            .await
            .expect("the process serves after reconciling");
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| tokio::spawn(writer(url.clone(), w, cycle, acknowledged.clone())))
            .collect();
        // Kill while the writers are mid-request, at a different moment each cycle.
        tokio::time::sleep(Duration::from_millis(700 + 350 * cycle as u64)).await;
        child.0.kill().expect("SIGKILL");
        child.0.wait().expect("reaped");
        for writer in writers {
            let _ = writer.await;
        }
        let acknowledged = acknowledged.lock().unwrap().clone();
        assert!(
            acknowledged.len() >= 5,
            "cycle {cycle}: only {} writes",
            acknowledged.len()
        );
        acknowledged_total += acknowledged.len();
        let indexed = indexed_ids(dir.path()).await;
        let lost: Vec<&String> = acknowledged.iter().filter(|id| !indexed.contains(*id)).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: {} of {} acknowledged points lost to SIGKILL: {lost:?}",
            lost.len(),
            acknowledged.len()
        );
    }

    // A last start repairs what was committed but never acknowledged, before SERVING: then the
    // index holds exactly the stored memories.
    let (mut child, channel) = serve(dir.path(), None).await;
    let mut stored = HashSet::new();
    for cycle in 0..KILLS {
        stored.extend(
            support::listed_memories(&channel, scope(cycle))
                .await
                .into_iter()
                .map(|m| m.id),
        );
    }
    let _ = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status();
    child.0.wait().expect("stopped");
    let indexed = indexed_ids(dir.path()).await;
    assert_eq!(
        indexed, stored,
        "after reconciliation the index holds exactly the stored memories"
    );
    loud(&format!(
        "index durability: {acknowledged_total} acknowledged writes over {KILLS} SIGKILLs, 0 points lost; \
         {} memories stored and indexed after the last restart",
        stored.len()
    ));
}

/// Issue 21: the access statistics a recall leaves to the retriever's recorder are written
/// when the process stops on SIGTERM: three recalls in detail, then SIGTERM, and the database
/// the process left counts three reads of the memory, at its version of before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_written_before_sigterm_ends_the_process() {
    use thinkus_backends::sql::{MemoryStore, SqlStore};

    let dir = tempfile::tempdir().unwrap();
    let (mut child, channel) = serve(dir.path(), None).await;
    let me = Scope {
        user_id: "reads-user".into(),
        role_id: "cfo".into(),
        ..Default::default()
    };
    let written = KnowledgeManagerServiceClient::new(channel.clone())
        .remember(RememberRequest {
            scope: Some(me.clone()),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: "The Q3 marketing budget is $800".into(),
                ..Default::default()
            }),
            skip_dedup: true,
            bypass_admission: true,
            ..Default::default()
        })
        .await
        .expect("remember")
        .into_inner()
        .result
        .and_then(|r| r.memory)
        .expect("the memory written");
    for _ in 0..3 {
        let details = support::recalled_in_detail(&channel, &me, "marketing budget").await;
        assert!(details.iter().any(|d| d.id == written.id), "{details:?}");
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    assert!(child.0.wait().expect("stopped").success(), "a clean stop");
    let url = format!("sqlite://{}", dir.path().join("thinkus.db").display());
    let store = SqlStore::connect(&url, 1)
        .await
        .expect("open the database the process left");
    let stored = store
        .get_memory(&Owner::new(DEFAULT_TENANT, "reads-user"), &written.id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.access_count, 3, "every read is written by the stop");
    assert_eq!(
        stored.version, 0,
        "reads leave the version a new memory is written with"
    );
}
