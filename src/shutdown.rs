//! One shutdown signal for the whole process: SIGINT or SIGTERM cancels a token
//! every role watches. Order on shutdown: readiness goes false, HTTP drains,
//! consumers finish the batch in hand, then pools close. (SIGHUP is no
//! shutdown: with `http.tls` it re-reads the listener certificates,
//! `roles/api/tls/reload.rs`.)

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGINT or SIGTERM.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown: signal received; draining");
        token.cancel();
    });
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Sleeps for `pause` unless `cancel` fires first; true when the whole pause
/// passed (the caller goes on), false when cancelled (the caller stops).
pub async fn sleep_or_cancel(pause: std::time::Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(pause) => true,
        _ = cancel.cancelled() => false,
    }
}
