//! The byte stream under the bench's HTTP/1.1 client: plain TCP through
//! readiness plus `try_read`/`try_write` (the cheapest path tokio offers, for
//! the load that matters), or rustls over TCP for an `https://` target
//! (`tls_target.rs`), through tokio-rustls' async reads and writes.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::tls_target;

/// Read buffer growth step.
pub const READ_CHUNK_BYTES: usize = 4096;

/// One connection to the server under test.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    /// Connects to `addr`, over TLS when it is the registered TLS target.
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let Some(target) = tls_target::for_addr(addr) else {
            return Ok(Self::Plain(tcp));
        };
        let connector = tokio_rustls::TlsConnector::from(target.config.clone());
        let tls = connector.connect(target.server_name.clone(), tcp).await?;
        Ok(Self::Tls(Box::new(tls)))
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Plain(tcp) => write_all(tcp, bytes).await,
            Self::Tls(tls) => {
                tls.write_all(bytes).await?;
                tls.flush().await
            }
        }
    }

    /// Appends what arrives next to `buf`; an error at end of stream.
    pub async fn read_more(&mut self, buf: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Self::Plain(tcp) => read_more(tcp, buf).await,
            Self::Tls(tls) => {
                let start = buf.len();
                buf.resize(start + READ_CHUNK_BYTES, 0);
                let read = tls.read(&mut buf[start..]).await;
                buf.truncate(start + *read.as_ref().unwrap_or(&0));
                match read? {
                    0 => Err(closed()),
                    _ => Ok(()),
                }
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
}

pub async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub async fn read_more(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    loop {
        stream.readable().await?;
        let start = buf.len();
        buf.resize(start + READ_CHUNK_BYTES, 0);
        match stream.try_read(&mut buf[start..]) {
            Ok(0) => {
                buf.truncate(start);
                return Err(closed());
            }
            Ok(n) => {
                buf.truncate(start + n);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => buf.truncate(start),
            Err(e) => {
                buf.truncate(start);
                return Err(e);
            }
        }
    }
}
