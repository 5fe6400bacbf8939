//! A minimal HTTP/1.1 POST for alert webhooks: plain `http://` only, one
//! request per connection, bounded attempts with a doubling pause. Kept tiny on
//! purpose: alerting must not pull a TLS stack (and C code) into the binary;
//! an https endpoint (DingTalk) goes through a local relay or egress proxy.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::ReconcileSettings;

/// Pause before the second attempt; doubles after each failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// Bytes of the response read (enough for the status line).
const RESPONSE_PEEK_BYTES: usize = 512;

/// POSTs `body` to `url`, retrying; failures are logged, never returned.
pub async fn post_with_retries(url: &str, body: &str, settings: &ReconcileSettings) {
    let mut pause = FIRST_BACKOFF;
    let timeout = Duration::from_millis(settings.webhook_timeout_ms);
    for attempt in 1..=settings.webhook_attempts.max(1) {
        match tokio::time::timeout(timeout, post(url, body)).await {
            Ok(Ok(status)) if (200..300).contains(&status) => return,
            Ok(Ok(status)) => tracing::warn!(attempt, status, "alert.webhook: refused"),
            Ok(Err(err)) => tracing::warn!(attempt, error = %err, "alert.webhook: failed"),
            Err(_) => tracing::warn!(attempt, "alert.webhook: timed out"),
        }
        if attempt < settings.webhook_attempts {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    metrics::counter!("stockd_alert_webhook_failures_total").increment(1);
    tracing::error!("alert.webhook: giving up; the finding is in the log and metrics");
}

/// One POST; returns the HTTP status code.
pub async fn post(url: &str, body: &str) -> std::io::Result<u16> {
    let invalid =
        |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("only http:// webhooks are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: stockd\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut buf = vec![0u8; RESPONSE_PEEK_BYTES];
    let n = stream.read(&mut buf).await?;
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line"))
}
