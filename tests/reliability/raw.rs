//! gRPC calls over a plain HTTP/2 client: bodies framed by hand (for the malformed ones a gRPC
//! library will not send), and answers heard from the server however late (a tonic channel
//! gives up at the call's own deadline).

use bytes::Bytes;

/// `message` in gRPC framing with the compressed flag `flag`.
pub(crate) fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(flag);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// A connection to `addr` for [`unary`].
pub(crate) async fn connect(addr: std::net::SocketAddr) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (send, connection) = h2::client::handshake(stream).await?;
    tokio::spawn(connection);
    Ok(send)
}

/// Sends `body` as it is to `path` with `headers` added, and returns the `grpc-status` of the
/// answer (`u32::MAX` when it has none).
pub(crate) async fn unary(
    send: &h2::client::SendRequest<Bytes>,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> anyhow::Result<u32> {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{authority}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut send = send.clone().ready().await?;
    let (response, mut stream) = send.send_request(request.body(())?, false)?;
    stream.send_data(Bytes::from(body), true)?;
    let response = response.await?;
    let status = |headers: &http::HeaderMap| {
        headers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok()?.parse::<u32>().ok())
    };
    if let Some(code) = status(response.headers()) {
        return Ok(code);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await?.unwrap_or_default();
    Ok(status(&trailers).unwrap_or(u32::MAX))
}
