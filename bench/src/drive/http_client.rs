//! A minimal HTTP/1.1 keep-alive client for the benchmark's few fixed request
//! shapes.
//!
//! Why hand-written: the load generator shares a 2-core machine with the system
//! under test, so every microsecond it spends is taken from stockd. The requests
//! are ours (small JSON bodies with `Content-Length`, one request in flight per
//! connection), so a general client's flexibility buys nothing. The bytes go
//! over [`Transport`]: plain TCP, or TLS to an `https://` target.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use super::transport::{Transport, READ_CHUNK_BYTES};

/// A request that takes longer than this is counted as a transport failure: on
/// loopback even a saturated stockd answers in well under a second.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head accepted; stockd's heads are a few hundred bytes.
const HEAD_MAX_BYTES: usize = 16 * 1024;
/// Largest response body accepted; stockd's bodies are under a kilobyte.
const BODY_MAX_BYTES: usize = 1024 * 1024;

/// One response: status and body (the head is not kept).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    /// The `code` of an RFC 9457 problem body, if there is one.
    pub fn problem_code(&self) -> Option<String> {
        let value: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        value.get("code")?.as_str().map(str::to_string)
    }
}

/// One keep-alive connection; reconnects when the server closed it.
pub struct HttpConn {
    addr: SocketAddr,
    stream: Option<Transport>,
    buf: Vec<u8>,
}

impl HttpConn {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            stream: None,
            buf: Vec::with_capacity(READ_CHUNK_BYTES),
        }
    }

    /// Sends one request and reads its response, within [`REQUEST_TIMEOUT`].
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        extra_headers: &str,
        body: &[u8],
    ) -> io::Result<Response> {
        let mut wire = Vec::with_capacity(160 + extra_headers.len() + body.len());
        wire.extend_from_slice(
            format!(
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n{extra_headers}\r\n",
                self.addr,
                body.len()
            )
            .as_bytes(),
        );
        wire.extend_from_slice(body);
        let result = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(&wire)).await;
        let result = result
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out")));
        if result.is_err() {
            // The connection's state is unknown now: start the next request afresh.
            self.stream = None;
            self.buf.clear();
        }
        result
    }

    async fn exchange(&mut self, wire: &[u8]) -> io::Result<Response> {
        if self.stream.is_none() {
            self.stream = Some(Transport::connect(self.addr).await?);
            self.buf.clear();
        }
        let stream = self.stream.as_mut().expect("connected above");
        stream.write_all(wire).await?;
        let head_end = loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                break end + 4;
            }
            if self.buf.len() > HEAD_MAX_BYTES {
                return Err(invalid("response head too large"));
            }
            stream.read_more(&mut self.buf).await?;
        };
        let head = Head::parse(&self.buf[..head_end])?;
        self.buf.drain(..head_end);
        let body = if head.chunked {
            read_chunked(stream, &mut self.buf).await?
        } else {
            let len = head.content_length.unwrap_or(0);
            if len > BODY_MAX_BYTES {
                return Err(invalid("response body too large"));
            }
            while self.buf.len() < len {
                stream.read_more(&mut self.buf).await?;
            }
            self.buf.drain(..len).collect()
        };
        if head.close {
            self.stream = None;
        }
        Ok(Response {
            status: head.status,
            body,
        })
    }
}

/// What the benchmark needs from a response head.
struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
    close: bool,
}

impl Head {
    fn parse(raw: &[u8]) -> io::Result<Self> {
        let text = std::str::from_utf8(raw).map_err(|_| invalid("non-UTF-8 head"))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| invalid("bad status line"))?;
        let mut head = Head {
            status,
            content_length: None,
            chunked: false,
            close: false,
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                head.close = value.eq_ignore_ascii_case("close");
            }
        }
        Ok(head)
    }
}

/// Decodes a chunked body (stockd sends sized bodies; this is for robustness).
async fn read_chunked(stream: &mut Transport, buf: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(end) = find(buf, b"\r\n") {
                break end;
            }
            stream.read_more(buf).await?;
        };
        let size_text = std::str::from_utf8(&buf[..line_end]).map_err(|_| invalid("chunk"))?;
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| invalid("chunk size"))?;
        if body.len() + size > BODY_MAX_BYTES {
            return Err(invalid("response body too large"));
        }
        while buf.len() < line_end + 2 + size + 2 {
            stream.read_more(buf).await?;
        }
        body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
        buf.drain(..line_end + 2 + size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Resolves `http://host:port` (or `https://`) to a loopback socket address.
/// The benchmark drives loopback only: it must never load a shared or remote
/// server.
pub async fn loopback_addr(base_url: &str) -> anyhow::Result<SocketAddr> {
    let host_port = host_port(base_url)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port).await?.collect();
    addrs
        .into_iter()
        .find(|a| a.ip().is_loopback())
        .ok_or_else(|| anyhow::anyhow!("--target {base_url} is not a loopback address"))
}

/// `host:port` of an `http://` or `https://` base URL without a path.
pub fn host_port(base_url: &str) -> anyhow::Result<&str> {
    let rest = base_url
        .strip_prefix("http://")
        .or_else(|| base_url.strip_prefix("https://"))
        .ok_or_else(|| {
            anyhow::anyhow!("--target must be an http:// or https:// URL, got {base_url}")
        })?;
    let host_port = rest.trim_end_matches('/');
    anyhow::ensure!(
        !host_port.contains('/'),
        "--target must be a base URL without a path, got {base_url}"
    );
    Ok(host_port)
}

#[cfg(test)]
mod tests {
    use super::super::transport::{read_more, write_all};
    use super::*;

    /// A fake server that answers two requests on one connection: a sized
    /// body, then a chunked one split across writes.
    async fn serve_twice(listener: std::net::TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let answers: [&[&[u8]]; 2] = [
            &[b"HTTP/1.1 201 Created\r\ncontent-length: 5\r\n\r\nhello"],
            &[
                b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"co\r\n9\r\nde\":\"S",
                b"OLD\r\n6\r\n_OUT\"}\r\n0\r\n\r\n",
            ],
        ];
        let mut buf = Vec::new();
        for parts in answers {
            while find(&buf, b"\r\n\r\n").is_none() {
                read_more(&stream, &mut buf).await.unwrap();
            }
            buf.clear();
            for part in parts {
                write_all(&stream, part).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    #[tokio::test]
    async fn sized_and_chunked_answers_are_read_on_one_kept_alive_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_twice(listener));
        let mut conn = HttpConn::new(addr);
        let first = conn.request("GET", "/a", "", b"").await.unwrap();
        assert_eq!((first.status, first.body.as_slice()), (201, &b"hello"[..]));
        let second = conn.request("GET", "/b", "", b"").await.unwrap();
        assert_eq!(second.status, 409);
        assert_eq!(second.problem_code().as_deref(), Some("SOLD_OUT"));
        server.await.unwrap();
    }

    #[tokio::test]
    async fn only_loopback_targets_are_accepted() {
        assert!(loopback_addr("http://127.0.0.1:8080").await.is_ok());
        assert!(loopback_addr("http://127.0.0.1:8080/v1").await.is_err());
        assert!(loopback_addr("https://127.0.0.1:8080").await.is_ok());
        assert!(loopback_addr("ftp://127.0.0.1:8080").await.is_err());
        assert!(loopback_addr("http://10.1.2.3:8080").await.is_err());
    }
}
