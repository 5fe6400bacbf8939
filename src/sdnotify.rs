//! systemd's readiness protocol (`Type=notify`), without a C library: one
//! datagram per state change to `$NOTIFY_SOCKET`. Outside systemd (no socket in
//! the environment) every call is a no-op, so the same binary runs anywhere.
//!
//! - `READY=1` once every role of the process is serving;
//! - `WATCHDOG=1` at half of `WatchdogSec` while the process is healthy;
//! - `STOPPING=1` when shutdown begins.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Sends `state` (e.g. `READY=1`); returns whether a socket was configured.
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let path = path.to_string_lossy().into_owned();
    let socket = UnixDatagram::unbound()?;
    let addr = if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())?
    } else {
        SocketAddr::from_pathname(&path)?
    };
    socket.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

/// Half the watchdog period systemd asked for, if it asked this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    Some(Duration::from_micros(usec / 2))
}

/// Tells systemd we are ready, keeps the watchdog fed until `cancel`, then
/// reports STOPPING.
pub fn ready_and_watch(cancel: CancellationToken) {
    if let Err(err) = notify("READY=1") {
        tracing::warn!(error = %err, "sd_notify: READY failed");
    }
    tokio::spawn(async move {
        match watchdog_interval() {
            Some(every) => loop {
                if !crate::shutdown::sleep_or_cancel(every, &cancel).await {
                    break;
                }
                let _ = notify("WATCHDOG=1");
            },
            None => cancel.cancelled().await,
        }
        let _ = notify("STOPPING=1");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_reaches_the_socket() {
        let dir = std::env::temp_dir().join(format!("stockd-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let server = UnixDatagram::bind(&dir).unwrap();
        // SAFETY: the test sets a variable only it reads; no other thread uses it.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &dir) };
        assert!(notify("READY=1").unwrap());
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        let _ = std::fs::remove_file(&dir);
        assert!(!notify("READY=1").unwrap(), "no socket: no-op");
    }
}
