//! Crash safety of the write path (issue 17), on SQLite and on PostgreSQL: the `thinkus` binary
//! runs as a child process, writers remember memories concurrently, each write under a request
//! id, and the process is killed with SIGKILL while writes are in flight, five times. After each
//! restart the writes of the cycle before are sent again with the same request ids (acknowledged
//! ones and those the kill cut off): an acknowledged one must answer the memory it wrote, as a
//! duplicate request, and nothing may be written twice. At the end every acknowledged write must
//! be in the database, recallable, stored once, and the vector index must hold exactly the
//! stored memories (reconciled at start).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thinkus_proto::common::{MemoryType, RetrievalMode, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{MemoryDraft, RememberRequest, WriteOutcome};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use tonic::transport::Channel;

use crate::durability::{USER, indexed_ids, serve};
use crate::knowledge::Backend;
use crate::support;

const KILLS: usize = 5;
const WRITERS: usize = 4;

/// What one write says: unique words, so that recall finds it by them.
fn content(request_id: &str) -> String {
    format!("Checkpoint {request_id}: the crate {request_id} shipped after review")
}

fn scope(cycle: usize) -> Scope {
    Scope {
        user_id: USER.into(),
        role_id: format!("cto-{cycle}"),
        ..Default::default()
    }
}

async fn remember(
    client: &mut KnowledgeManagerServiceClient<Channel>,
    cycle: usize,
    request_id: &str,
) -> Result<thinkus_proto::knowledge::WriteResult, tonic::Status> {
    let response = client
        .remember(RememberRequest {
            scope: Some(scope(cycle)),
            memory: Some(MemoryDraft {
                r#type: MemoryType::DiscussionConclusion as i32,
                content: content(request_id),
                ..Default::default()
            }),
            request_id: request_id.into(),
            // Only the request id may keep a retry from writing twice.
            skip_dedup: true,
            ..Default::default()
        })
        .await?;
    Ok(response.into_inner().result.expect("a write result"))
}

/// The writes of one cycle: acknowledged (request id -> memory id) and cut off by the kill.
#[derive(Default)]
struct Cycle {
    acknowledged: BTreeMap<String, String>,
    cut_off: Vec<String>,
}

/// Remembers under fresh request ids until the process dies.
async fn writer(channel: Channel, writer: usize, cycle: usize, log: Arc<Mutex<Cycle>>) {
    let mut client = KnowledgeManagerServiceClient::new(channel);
    for i in 0.. {
        let request_id = format!("c{cycle}w{writer}n{i}");
        match remember(&mut client, cycle, &request_id).await {
            Ok(result) => {
                let id = result.memory.expect("an acknowledged write names its memory").id;
                log.lock().unwrap().acknowledged.insert(request_id, id);
            }
            Err(_) => {
                log.lock().unwrap().cut_off.push(request_id);
                return;
            }
        }
    }
}

async fn stored_ids(channel: &Channel, cycle: usize) -> Vec<(String, String)> {
    support::listed_memories(channel, scope(cycle))
        .await
        .into_iter()
        .map(|m| (m.id, m.content))
        .collect()
}

async fn recalled(channel: &Channel, cycle: usize, query: &str) -> Vec<String> {
    RetrieverServiceClient::new(channel.clone())
        .recall(RecallRequest {
            scope: Some(scope(cycle)),
            query: query.into(),
            mode: RetrievalMode::Catalog as i32,
            budget_tokens: 2000,
            ..Default::default()
        })
        .await
        .expect("recall")
        .into_inner()
        .catalog
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// Sends a cycle's writes again under their request ids: an acknowledged one answers its
/// memory as a duplicate; one the kill cut off was written once or is written now. Returns the
/// request ids whose writes now stand, with their memories.
async fn retry(channel: &Channel, cycle: usize, writes: &Cycle) -> BTreeMap<String, String> {
    let mut client = KnowledgeManagerServiceClient::new(channel.clone());
    let mut standing = BTreeMap::new();
    for (request_id, memory_id) in &writes.acknowledged {
        let again = remember(&mut client, cycle, request_id).await.expect("a retry");
        assert_eq!(
            again.outcome,
            WriteOutcome::DuplicateRequest as i32,
            "an acknowledged request id retried after SIGKILL writes nothing again: {again:?}"
        );
        assert_eq!(again.memory.as_ref().map(|m| m.id.as_str()), Some(memory_id.as_str()));
        standing.insert(request_id.clone(), memory_id.clone());
    }
    for request_id in &writes.cut_off {
        let again = remember(&mut client, cycle, request_id).await.expect("a retry");
        standing.insert(request_id.clone(), again.memory.expect("a memory").id);
    }
    standing
}

async fn acknowledged_writes_survive_sigkill(backend: Backend) {
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => {
            let Some(admin) = support::server_from_env("TEST_DATABASE_URL", "crash safety on PostgreSQL") else {
                return;
            };
            Some(support::fresh_postgres_database(&admin).await)
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cycles: Vec<Cycle> = Vec::new();
    let mut standing: Vec<BTreeMap<String, String>> = Vec::new();
    let mut lost_points = 0;
    for cycle in 0..KILLS {
        let (mut child, channel) = serve(dir.path(), database.as_deref()).await;
        if let Some(before) = cycles.last() {
            standing.push(retry(&channel, cycle - 1, before).await);
        }
        let log = Arc::new(Mutex::new(Cycle::default()));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| tokio::spawn(writer(channel.clone(), w, cycle, log.clone())))
            .collect();
        // Kill while the writers are mid-request, at a different moment each cycle.
        tokio::time::sleep(Duration::from_millis(600 + 300 * cycle as u64)).await;
        child.0.kill().expect("SIGKILL");
        child.0.wait().expect("reaped");
        for writer in writers {
            writer.await.expect("a writer");
        }
        let writes = std::mem::take(&mut *log.lock().unwrap());
        assert!(
            writes.acknowledged.len() >= 5,
            "cycle {cycle}: only {} writes before the kill",
            writes.acknowledged.len()
        );
        // No acknowledged write may wait for a repair: its point is in the index at the kill.
        let indexed = indexed_ids(dir.path()).await;
        lost_points += writes.acknowledged.values().filter(|id| !indexed.contains(*id)).count();
        cycles.push(writes);
    }

    // The last process serves: every acknowledged write is stored, once, and recallable.
    let (child, channel) = serve(dir.path(), database.as_deref()).await;
    standing.push(retry(&channel, KILLS - 1, cycles.last().expect("a cycle")).await);
    let mut lost = Vec::new();
    let mut unrecallable = Vec::new();
    let mut twice = Vec::new();
    let mut stored_total = HashSet::new();
    for (cycle, writes) in cycles.iter().enumerate() {
        let stored = stored_ids(&channel, cycle).await;
        let mut by_content: HashMap<&str, usize> = HashMap::new();
        for (_, text) in &stored {
            *by_content.entry(text.as_str()).or_default() += 1;
        }
        twice.extend(
            by_content
                .iter()
                .filter(|(_, n)| **n > 1)
                .map(|(text, n)| format!("{text} x{n}")),
        );
        let ids: HashSet<&str> = stored.iter().map(|(id, _)| id.as_str()).collect();
        for (request_id, memory_id) in &writes.acknowledged {
            if !ids.contains(memory_id.as_str()) {
                lost.push(request_id.clone());
            } else if !recalled(&channel, cycle, &content(request_id))
                .await
                .contains(memory_id)
            {
                unrecallable.push(request_id.clone());
            }
        }
        // Every stored memory is one whose request id was acknowledged or retried.
        let expected: HashSet<&str> = standing[cycle].values().map(String::as_str).collect();
        assert_eq!(
            ids, expected,
            "cycle {cycle}: the stored memories are those of the acknowledged and retried request ids"
        );
        stored_total.extend(stored.into_iter().map(|(id, _)| id));
    }
    let _ = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status();
    let mut child = child;
    child.0.wait().expect("stopped");
    let indexed = indexed_ids(dir.path()).await;
    let acknowledged: usize = cycles.iter().map(|c| c.acknowledged.len()).sum();
    let cut_off: usize = cycles.iter().map(|c| c.cut_off.len()).sum();
    support::loud(&format!(
        "crash safety ({backend:?}): {acknowledged} acknowledged writes over {KILLS} SIGKILLs, {} lost from the \
         database, {lost_points} without their point at the kill, {} not recallable, {} stored twice; {cut_off} \
         cut off and retried; {} memories stored and indexed after the last restart",
        lost.len(),
        unrecallable.len(),
        twice.len(),
        stored_total.len()
    ));
    assert!(lost.is_empty(), "acknowledged writes lost to SIGKILL: {lost:?}");
    assert_eq!(lost_points, 0, "acknowledged writes without their point after SIGKILL");
    assert!(
        unrecallable.is_empty(),
        "acknowledged writes not recallable: {unrecallable:?}"
    );
    assert!(twice.is_empty(), "writes stored twice after retries: {twice:?}");
    assert_eq!(
        indexed, stored_total,
        "after reconciliation the index holds exactly the stored memories"
    );
}

on_both_backends!(acknowledged_writes_survive_sigkill);
