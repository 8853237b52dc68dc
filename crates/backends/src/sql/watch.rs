//! Which statements a piece of work sends to the relational store: every statement of
//! [`SqlStore`](super::SqlStore) is noted here, and [`statements_of`] collects those of one
//! task. It is how a test holds a request's path to the statements it needs (on SQLite each one
//! is handed to its connection's worker thread, which costs more than most of them take).

use std::future::Future;
use std::sync::{Arc, Mutex};

tokio::task_local! {
    static WATCHED: Arc<Mutex<Vec<String>>>;
}

/// Runs `work` and returns its output with the statements the SQL store ran for it, in order,
/// as sent (with `?` placeholders on either backend; `BEGIN` and `COMMIT` of its transactions
/// included). Only the statements of this task are seen: what `work` spawns onto other tasks
/// (background loops, queued jobs) is not its own and is left out.
pub async fn statements_of<F: Future>(work: F) -> (F::Output, Vec<String>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let output = WATCHED.scope(log.clone(), work).await;
    let statements = std::mem::take(&mut *log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    (output, statements)
}

/// Notes one statement of the store for the task watching it, if one is.
pub(super) fn note(sql: &str) {
    let _ = WATCHED.try_with(|log| {
        log.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(sql.to_string());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_watched_tasks_statements_are_collected() {
        note("SELECT 0");
        let ((), seen) = statements_of(async {
            note("SELECT 1");
            // Another task's statement is not this work's.
            tokio::spawn(async { note("SELECT 2") }).await.unwrap();
            note("SELECT 3");
        })
        .await;
        assert_eq!(seen, ["SELECT 1", "SELECT 3"]);
    }
}
