//! SIGHUP re-reads the listeners' certificate, key and client CA: the way to
//! rotate a certificate without a restart (cert-manager, certbot deploy
//! hooks, `systemctl reload`). Open connections are not touched; the next
//! handshake uses the new files. A reload that fails keeps what was read
//! before and logs an ERROR naming the key, so a half-written file never
//! takes the listeners down.
//!
//! Only a role serving the API with `http.tls` listens for SIGHUP; without it SIGHUP
//! keeps its default meaning. SIGINT/SIGTERM stay with `shutdown.rs`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::certs::ListenerCerts;

/// Re-reads `certs` on every SIGHUP until `cancel` fires.
pub fn on_sighup(
    certs: Arc<ListenerCerts>,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                received = hangups.recv() => {
                    if received.is_none() {
                        return;
                    }
                }
            }
            reload_logged(&certs);
        }
    }))
}

/// One reload, its outcome logged: INFO on success, ERROR (old files kept) on failure.
pub fn reload_logged(certs: &ListenerCerts) {
    match certs.reload() {
        Ok(()) => tracing::info!("tls: listener certificates re-read (SIGHUP)"),
        Err(err) => tracing::error!(
            error = format!("{err:#}"),
            "tls: re-reading the listener certificates failed; the previous ones stay in use"
        ),
    }
}
