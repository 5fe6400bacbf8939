//! A collector stand-in for the traced reserve phases: a loopback HTTP/1.1
//! listener that takes OTLP/HTTP exports (`POST /v1/traces`) and answers each
//! with an empty `ExportTraceServiceResponse` (200, zero bytes of protobuf),
//! counting requests and bytes. It decodes nothing: the phases measure what
//! recording and exporting spans costs stockd, and a sink that costs little
//! itself keeps the bench's share of the two cores small. The tests use a real
//! OTLP receiver (`tests/otlp_receiver.py`) to check what the spans say.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest export accepted; the exporter's batches are far smaller.
const REQUEST_MAX_BYTES: usize = 16 << 20;
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";

/// The running sink; dropped, it stops listening.
pub struct OtlpSink {
    pub addr: SocketAddr,
    exports: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpSink {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let exports = Arc::new(AtomicU64::new(0));
        let counter = exports.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, counter.clone()));
            }
        });
        Ok(Self {
            addr,
            exports,
            task,
        })
    }

    /// `telemetry.otlp.endpoint` for a child.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Export requests answered so far.
    pub fn exports(&self) -> u64 {
        self.exports.load(Ordering::Relaxed)
    }
}

impl Drop for OtlpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers every request of one kept-alive connection until it closes.
async fn serve(mut stream: TcpStream, exports: Arc<AtomicU64>) {
    let mut buf = Vec::with_capacity(64 << 10);
    loop {
        let Some(consumed) = complete_request(&buf) else {
            let mut chunk = [0u8; 16 << 10];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) if buf.len() + n <= REQUEST_MAX_BYTES => buf.extend_from_slice(&chunk[..n]),
                Ok(_) => return,
            }
            continue;
        };
        buf.drain(..consumed);
        exports.fetch_add(1, Ordering::Relaxed);
        if stream.write_all(RESPONSE).await.is_err() {
            return;
        }
    }
}

/// Bytes of the first whole request in `buf` (head plus `content-length`
/// body), if it has arrived.
fn complete_request(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let body: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= head_end + body).then_some(head_end + body)
}

#[cfg(test)]
mod tests {
    use super::complete_request;

    #[test]
    fn a_request_is_complete_once_its_body_has_arrived() {
        let head = b"POST /v1/traces HTTP/1.1\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(complete_request(head), None);
        let whole = [&head[..], b"abc"].concat();
        assert_eq!(complete_request(&whole), Some(whole.len()));
        let two = [&whole[..], b"POST"].concat();
        assert_eq!(complete_request(&two), Some(whole.len()));
    }
}
