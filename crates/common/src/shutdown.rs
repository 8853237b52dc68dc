//! Graceful shutdown: SIGTERM or SIGINT cancel one token that every server and worker watches.

use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGTERM or SIGINT. A second signal exits at once.
pub fn on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested, draining");
        cancel.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal, exiting now");
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Calls `reload` on every SIGHUP until `shutdown` is cancelled (API key rotation).
pub fn on_sighup(shutdown: CancellationToken, reload: impl Fn() + Send + 'static) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                received = hup.recv() => {
                    if received.is_none() {
                        return;
                    }
                    reload();
                }
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (shutdown, reload);
}
