//! Progress of long work (exports, imports, index rebuilds, benches, ingestion) on stderr, drawn
//! only when stderr is a terminal: logs, pipes and CI output stay clean, and a bench's last
//! stdout line stays its JSON. `THINKUS_PROGRESS=never` turns it off, `always` forces it on.
//!
//! A few dozen lines rather than a dependency: a bar, a count, the elapsed time and an estimate
//! of what is left are all these commands need.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a bar is redrawn at most.
const REDRAW: Duration = Duration::from_millis(120);
const WIDTH: usize = 24;

fn enabled() -> bool {
    match std::env::var("THINKUS_PROGRESS").as_deref() {
        Ok("never") => false,
        Ok("always") => true,
        _ => std::io::stderr().is_terminal(),
    }
}

/// A progress bar (with a total) or a counter (without one).
#[derive(Clone)]
pub struct Progress(Arc<Inner>);

struct Inner {
    label: String,
    total: Option<u64>,
    done: AtomicU64,
    started: Instant,
    last_draw: Mutex<Option<Instant>>,
    enabled: bool,
}

impl Progress {
    /// A bar for `total` steps (a counter when `None`).
    pub fn new(label: impl Into<String>, total: Option<u64>) -> Self {
        Self(Arc::new(Inner {
            label: label.into(),
            total,
            done: AtomicU64::new(0),
            started: Instant::now(),
            last_draw: Mutex::new(None),
            enabled: enabled(),
        }))
    }

    /// Counts `n` more steps done.
    pub fn inc(&self, n: u64) {
        self.0.done.fetch_add(n, Ordering::Relaxed);
        self.draw(false);
    }

    /// Clears the line and says how long it took.
    pub fn finish(&self) {
        if !self.0.enabled {
            return;
        }
        let done = self.0.done.load(Ordering::Relaxed);
        let line = format!(
            "{}: {} in {}",
            self.0.label,
            match self.0.total {
                Some(total) => format!("{done}/{total}"),
                None => done.to_string(),
            },
            seconds(self.0.started.elapsed())
        );
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K\n");
        let _ = err.flush();
    }

    fn draw(&self, force: bool) {
        if !self.0.enabled {
            return;
        }
        let now = Instant::now();
        {
            let mut last = self.0.last_draw.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if !force && last.is_some_and(|at| now - at < REDRAW) {
                return;
            }
            *last = Some(now);
        }
        let line = render(
            &self.0.label,
            self.0.done.load(Ordering::Relaxed),
            self.0.total,
            self.0.started.elapsed(),
        );
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
    }
}

/// Runs `work` while a spinner with the elapsed time turns (one long call, such as an index
/// rebuild on the server, has no steps to count).
pub async fn during<F: Future>(label: &str, work: F) -> F::Output {
    let progress = Progress::new(label, None);
    if !progress.0.enabled {
        return work.await;
    }
    let ticker = {
        let progress = progress.clone();
        tokio::spawn(async move {
            loop {
                progress.draw(true);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let output = work.await;
    ticker.abort();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r{label}: {}\x1b[K\n", seconds(progress.0.started.elapsed()));
    output
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.1} s", elapsed.as_secs_f64())
}

/// One line of progress: `label [#######.........] 42/100 42% 3.1 s, about 4.2 s left`, or
/// `label 42 3.1 s` without a total.
pub fn render(label: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    match total {
        Some(total) if total > 0 => {
            let done = done.min(total);
            let filled = (done as usize * WIDTH) / total as usize;
            let bar: String = "#".repeat(filled) + &".".repeat(WIDTH - filled);
            let left = if done > 0 && done < total {
                let rest = elapsed.as_secs_f64() * (total - done) as f64 / done as f64;
                format!(", about {rest:.1} s left")
            } else {
                String::new()
            };
            format!(
                "{label} [{bar}] {done}/{total} {}% {}{left}",
                done * 100 / total,
                seconds(elapsed)
            )
        }
        _ => {
            const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
            let spin = SPINNER[(elapsed.as_millis() / 200) as usize % SPINNER.len()];
            if done > 0 {
                format!("{label} {spin} {done} {}", seconds(elapsed))
            } else {
                format!("{label} {spin} {}", seconds(elapsed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_the_bar_the_count_and_what_is_left() {
        assert_eq!(
            render("export", 6, Some(24), Duration::from_secs(3)),
            "export [######..................] 6/24 25% 3.0 s, about 9.0 s left"
        );
        assert_eq!(
            render("export", 24, Some(24), Duration::from_millis(4200)),
            "export [########################] 24/24 100% 4.2 s"
        );
        assert_eq!(
            render("rebuild", 0, None, Duration::from_millis(500)),
            "rebuild - 0.5 s"
        );
        assert_eq!(render("ingest", 7, None, Duration::from_secs(1)), "ingest / 7 1.0 s");
    }
}
