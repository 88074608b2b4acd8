//! Accepting connections without trusting the peer: a cap on open connections (past it, new
//! ones wait in the kernel's listen backlog), a deadline for a new connection's first bytes (a
//! peer that connects and says nothing is closed), and accept errors (the file-descriptor limit)
//! logged and backed off instead of retried in a hot loop.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
    time::{Instant, Sleep},
};
use tonic::{
    codegen::tokio_stream::wrappers::ReceiverStream,
    transport::server::{Connected, TcpConnectInfo},
};

/// The HTTP/2 client preface (`PRI * HTTP/2.0...`): what a gRPC client sends first.
pub const HTTP2_PREFACE_BYTES: usize = 24;

/// Slowest rate at which accept errors are logged while they persist.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(5);

/// Accepts connections from one listener, at most `max_connections` open at once.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    max_connections: usize,
    /// Which listener, for logs.
    name: &'static str,
}

/// An accepted connection and its slot among the capped ones (freed when dropped).
#[derive(Debug)]
pub struct Accepted {
    /// The connection.
    pub stream: TcpStream,
    /// The peer.
    pub peer: SocketAddr,
    /// The connection's slot.
    pub slot: OwnedSemaphorePermit,
}

impl Acceptor {
    /// Accepts from `listener`, at most `max_connections` open at once.
    pub fn new(listener: TcpListener, max_connections: usize, name: &'static str) -> Self {
        Self {
            listener,
            slots: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            name,
        }
    }

    /// The next connection. Waits while the cap is reached (warning once each time it is);
    /// on an accept error that is not about one connection (out of file descriptors or
    /// memory), logs at warn and backs off, from 10 ms doubling to 1 s, instead of spinning.
    pub async fn accept(&self) -> Accepted {
        let slot = self.slot().await;
        let mut backoff = Duration::from_millis(10);
        let (mut failures, mut logged_at) = (0u64, None::<Instant>);
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    if failures > 0 {
                        tracing::info!(listener = self.name, failures, "accepting connections again");
                    }
                    let _ = stream.set_nodelay(true);
                    return Accepted { stream, peer, slot };
                }
                // The peer gave up before we accepted: nothing wrong here.
                Err(e) if per_connection(&e) => continue,
                Err(e) => {
                    failures += 1;
                    if logged_at.is_none_or(|at| at.elapsed() >= ERROR_LOG_EVERY) {
                        logged_at = Some(Instant::now());
                        tracing::warn!(
                            listener = self.name,
                            error = %e,
                            failures,
                            retry_in_ms = backoff.as_millis() as u64,
                            "cannot accept connections (raise the file-descriptor limit, or lower --max-connections)"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// A free slot among the capped connections, waiting (and warning) while there is none.
    async fn slot(&self) -> OwnedSemaphorePermit {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return slot;
        }
        tracing::warn!(
            listener = self.name,
            max_connections = self.max_connections,
            "connection limit reached: new connections wait until one closes"
        );
        // The semaphore is never closed.
        match self.slots.clone().acquire_owned().await {
            Ok(slot) => slot,
            Err(_) => std::future::pending().await,
        }
    }

    /// The gRPC server's incoming connections: each must send its first `first_bytes` within
    /// `handshake_timeout` (see [`Guarded`]). The accept task ends when the stream is dropped.
    pub fn incoming(
        self,
        first_bytes: usize,
        handshake_timeout: Duration,
    ) -> ReceiverStream<io::Result<Guarded>> {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = tx.closed() => return,
                    accepted = self.accept() => accepted,
                };
                let guarded = Guarded::new(accepted, first_bytes, handshake_timeout);
                if tx.send(Ok(guarded)).await.is_err() {
                    return;
                }
            }
        });
        ReceiverStream::new(rx)
    }
}

/// Accept errors about one connection (it was reset before we took it), not the listener.
fn per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// A connection that fails its reads (so the server closes it) unless its first `first_bytes`
/// arrive before the handshake deadline; holds its slot among the capped connections.
#[derive(Debug)]
pub struct Guarded {
    stream: TcpStream,
    awaited: usize,
    deadline: Option<Pin<Box<Sleep>>>,
    _slot: OwnedSemaphorePermit,
}

impl Guarded {
    fn new(accepted: Accepted, first_bytes: usize, handshake_timeout: Duration) -> Self {
        Self {
            stream: accepted.stream,
            awaited: first_bytes,
            deadline: (first_bytes > 0).then(|| Box::pin(tokio::time::sleep(handshake_timeout))),
            _slot: accepted.slot,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let Some(deadline) = &mut self.deadline {
            match &polled {
                Poll::Ready(Ok(())) => {
                    self.awaited = self.awaited.saturating_sub(buf.filled().len() - before);
                    if self.awaited == 0 {
                        self.deadline = None;
                    }
                }
                Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer did not complete the handshake in time",
                    )));
                }
                _ => {}
            }
        }
        polled
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connected for Guarded {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn pair(first_bytes: usize, timeout: Duration) -> (TcpStream, Guarded) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = Acceptor::new(listener, 4, "test");
        let client = TcpStream::connect(addr).await.unwrap();
        let accepted = acceptor.accept().await;
        (client, Guarded::new(accepted, first_bytes, timeout))
    }

    #[tokio::test]
    async fn a_silent_peer_fails_the_read_at_the_deadline() {
        let (_client, mut server) = pair(24, Duration::from_millis(50)).await;
        let started = std::time::Instant::now();
        let mut buf = [0u8; 64];
        let error = server.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_peer_that_sends_its_preface_may_then_stay_quiet() {
        let (mut client, mut server) = pair(24, Duration::from_millis(50)).await;
        // In two pieces: the count adds up across reads.
        client.write_all(&[b'x'; 10]).await.unwrap();
        let mut buf = [0u8; 64];
        let n = server.read(&mut buf).await.unwrap();
        client.write_all(&vec![b'y'; 24 - n]).await.unwrap();
        server.read_exact(&mut buf[..24 - n]).await.unwrap();
        // Well past the deadline, the connection still works.
        tokio::time::sleep(Duration::from_millis(120)).await;
        client.write_all(b"later").await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 5);
    }

    #[tokio::test]
    async fn the_cap_holds_new_connections_back_until_one_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = Arc::new(Acceptor::new(listener, 1, "test"));
        let _a = TcpStream::connect(addr).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let first = acceptor.accept().await;
        let waiting = tokio::spawn({
            let acceptor = acceptor.clone();
            async move { acceptor.accept().await.peer }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(first);
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .unwrap()
            .unwrap();
    }
}
