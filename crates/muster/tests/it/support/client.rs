//! The test clients: a Nakama-style JSON WebSocket client ([`Client`]) and a native TCP client
//! ([`Tcp`], length-delimited protobuf frames), both waiting on events with timeouts, never on
//! sleeps.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use muster_proto::frame;
use muster_proto::realtime::{self, Envelope, Message as Kind};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

use crate::support::TestServer;

/// How long a client waits for a message before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// A player's JSON realtime socket: a device session and its WebSocket. Frames that arrive
/// while waiting for something else are kept, in order, for later calls.
pub struct Client {
    pub socket: Socket,
    pub token: String,
    pub user_id: String,
    pub username: String,
    next_cid: u64,
    /// Messages received while waiting for something else.
    pending: VecDeque<Value>,
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

impl Client {
    /// Authenticates device `device-{device}` (creating the account) and opens its socket.
    pub async fn connect(server: &TestServer, device: &str) -> Client {
        Client::connect_at(&server.addr.to_string(), device).await
    }

    /// [`Client::connect`] against the server at `addr` (e.g. a binary started by a crash test).
    pub async fn connect_at(addr: &str, device: &str) -> Client {
        let response = reqwest::Client::new()
            .post(format!(
                "http://{addr}/v2/account/authenticate/device?create=true"
            ))
            .basic_auth("defaultkey", Some(""))
            .json(&json!({ "id": format!("device-{device}") }))
            .send()
            .await
            .expect("authenticate");
        let body: Value = response.json().await.expect("session");
        let token = body["token"].as_str().expect("token").to_owned();
        Client::with_token(addr, &token).await
    }

    /// Opens a JSON socket with an existing session token.
    pub async fn with_token(addr: &str, token: &str) -> Client {
        let claims = crate::support::claims(token);
        let (socket, _) = connect_async(format!("ws://{addr}/ws?token={token}&format=json"))
            .await
            .expect("socket connects");
        Client {
            socket,
            user_id: claims["uid"].as_str().expect("uid").to_owned(),
            username: claims["usn"].as_str().expect("usn").to_owned(),
            token: token.to_owned(),
            next_cid: 0,
            pending: VecDeque::new(),
        }
    }

    /// Sends `body` (an envelope without `cid`) with a fresh cid and returns the envelope
    /// answering it.
    pub async fn request(&mut self, mut body: Value) -> Value {
        self.next_cid += 1;
        let cid = self.next_cid.to_string();
        body["cid"] = json!(cid);
        self.send(body).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = self.read(deadline).await;
            if message["cid"] == json!(cid) {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    /// Sends `{kind: body}` with a fresh cid and returns the envelope answering it.
    pub async fn call(&mut self, kind: &str, body: Value) -> Value {
        let mut envelope = json!({});
        envelope[kind] = body;
        self.request(envelope).await
    }

    /// A request that must succeed with an answer of kind `answer`; its body.
    pub async fn ok(&mut self, kind: &str, body: Value, answer: &str) -> Value {
        let reply = self.call(kind, body).await;
        assert!(reply.get(answer).is_some(), "{kind} → {reply}");
        reply[answer].clone()
    }

    /// A request that must fail: (code, message, context.reason).
    pub async fn refused(&mut self, kind: &str, body: Value) -> (i64, String, String) {
        let reply = self.call(kind, body).await;
        let error = &reply["error"];
        assert!(error.is_object(), "{kind} should fail: {reply}");
        let message = error["message"].as_str().expect("message").to_owned();
        assert!(!message.is_empty());
        (
            error["code"].as_i64().expect("code"),
            message,
            error["context"]["reason"].as_str().unwrap_or("").to_owned(),
        )
    }

    /// Sends without waiting for anything.
    pub async fn send(&mut self, body: Value) {
        self.socket
            .send(Message::text(body.to_string()))
            .await
            .expect("send");
    }

    /// The next message carrying `key` (earlier ones of other kinds are kept for later).
    pub async fn next(&mut self, key: &str) -> Value {
        if let Some(i) = self.pending.iter().position(|m| m.get(key).is_some()) {
            return self.pending.remove(i).expect("present");
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = self.read(deadline).await;
            if message.get(key).is_some() {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    /// The body of the next unsolicited envelope (no `cid`) of `kind`.
    pub async fn event(&mut self, kind: &str) -> Value {
        let unsolicited = |m: &Value| m.get(kind).is_some() && m.get("cid").is_none();
        if let Some(at) = self.pending.iter().position(unsolicited) {
            return self.pending.remove(at).expect("present")[kind].clone();
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = self.read(deadline).await;
            if unsolicited(&message) {
                return message[kind].clone();
            }
            self.pending.push_back(message);
        }
    }

    /// The next JSON data frame, whatever it is (pending ones first).
    pub async fn frame(&mut self) -> Value {
        if let Some(message) = self.pending.pop_front() {
            return message;
        }
        self.read(tokio::time::Instant::now() + WAIT).await
    }

    /// Messages of kind `key` received so far (pending ones), whole, consumed.
    pub fn take_pending(&mut self, key: &str) -> Vec<Value> {
        let (hit, rest): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|m| m.get(key).is_some());
        self.pending = rest.into();
        hit
    }

    /// The bodies of the pending messages of kind `kind`, consumed.
    pub fn take(&mut self, kind: &str) -> Vec<Value> {
        self.take_pending(kind)
            .into_iter()
            .map(|m| m[kind].clone())
            .collect()
    }

    async fn read(&mut self, deadline: tokio::time::Instant) -> Value {
        read_json(&mut self.socket, deadline).await
    }

    /// A ping round trip. The server writes everything queued for a socket before the answer
    /// to its next request, so afterwards every message caused by something that already
    /// happened is pending: a way to check that a message did *not* come, without sleeping.
    pub async fn sync(&mut self) {
        let pong = self.request(json!({"ping": {}})).await;
        assert!(pong.get("pong").is_some(), "{pong}");
    }

    /// Waits (at most [`WAIT`]) for the server to close the socket; the messages before the
    /// close are kept as pending.
    pub async fn until_closed(&mut self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => panic!("the server did not close the socket"),
                Ok(None) | Ok(Some(Err(_))) => return,
                Ok(Some(Ok(Message::Close(_)))) => return,
                Ok(Some(Ok(Message::Text(text)))) => {
                    if let Ok(value) = serde_json::from_str(&text) {
                        self.pending.push_back(value);
                    }
                }
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// Closes and waits for the server to finish the close handshake (its socket task has left
    /// its read loop: the session's channels, matches and tickets are being dropped).
    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
        while let Ok(Some(Ok(_))) = tokio::time::timeout(WAIT, self.socket.next()).await {}
    }
}

/// The next data frame of a raw socket as JSON, skipping pings; fails the test past `deadline`
/// or on anything but a text frame.
pub async fn read_json<S>(socket: &mut S, deadline: tokio::time::Instant) -> Value
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout_at(deadline, socket.next())
            .await
            .expect("a message in time")
            .expect("socket open")
            .expect("valid frame");
        match frame {
            Message::Text(text) => return serde_json::from_str(&text).expect("JSON"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// [`read_json`] within [`WAIT`].
pub async fn next_json<S>(socket: &mut S) -> Value
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    read_json(socket, tokio::time::Instant::now() + WAIT).await
}

/// A native TCP transport connection.
pub struct Tcp {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pending: VecDeque<Envelope>,
}

impl Tcp {
    pub async fn connect(addr: SocketAddr) -> Tcp {
        let stream = TcpStream::connect(addr).await.expect("TCP connect");
        stream.set_nodelay(true).expect("nodelay");
        Tcp {
            stream,
            buf: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    pub async fn send(&mut self, envelope: &Envelope) {
        let mut out = Vec::new();
        frame::encode_frame(envelope, &mut out);
        self.stream.write_all(&out).await.expect("write");
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// The next envelope; `None` when the server closed the connection.
    pub async fn next(&mut self) -> Option<Envelope> {
        match self.pending.pop_front() {
            Some(e) => Some(e),
            None => self.read_more().await,
        }
    }

    /// The next envelope of the given kind, keeping others for later.
    pub async fn next_kind(&mut self, kind: &str) -> Envelope {
        let is = |e: &Envelope| e.message.as_ref().map(Kind::kind) == Some(kind);
        if let Some(i) = self.pending.iter().position(is) {
            return self.pending.remove(i).expect("present");
        }
        loop {
            match self.read_more().await {
                Some(e) if is(&e) => return e,
                Some(e) => self.pending.push_back(e),
                None => panic!("connection closed while waiting for {kind}"),
            }
        }
    }

    /// Reads the next envelope from the socket (after any already framed), ignoring `pending`.
    async fn read_more(&mut self) -> Option<Envelope> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some((header, body)) = frame::next_frame(&self.buf, 1 << 20).expect("framing") {
                let envelope =
                    frame::decode_body(&self.buf[header..header + body]).expect("envelope");
                self.buf.drain(..header + body);
                return Some(envelope);
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut chunk))
                .await
                .expect("data in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the server closes; returns what came before.
    pub async fn until_closed(&mut self) -> Vec<Envelope> {
        let mut seen: Vec<Envelope> = self.pending.drain(..).collect();
        while let Some(e) = self.read_more().await {
            seen.push(e);
        }
        seen
    }
}

/// `match_join { token }` as a protobuf envelope.
pub fn join_with_token(cid: &str, token: &str) -> Envelope {
    Envelope::new(
        cid,
        Kind::MatchJoin(realtime::MatchJoin {
            id: Some(realtime::match_join::Id::Token(token.to_owned())),
            metadata: Default::default(),
        }),
    )
}

/// The error code of an error envelope (JSON), or a panic naming what came instead.
pub fn error_code(message: &Value) -> i64 {
    message["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {message}"))
}

pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn unb64(text: &Value) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap_or_default())
        .expect("base64")
}
