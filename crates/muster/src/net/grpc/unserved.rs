//! The service as Nakama's clients know it: a call of `nakama.api.Nakama` that Muster does not
//! serve answers `UNIMPLEMENTED` naming the call (tonic's own answer names nothing), so a
//! client's developer sees at once which call is missing; a message over the size limit is
//! `RESOURCE_EXHAUSTED`, as grpc-go (Nakama's server) answers it, not tonic's `OUT_OF_RANGE`.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::http::{Request, Response};
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::Status;
use tower::Service;

use crate::net::calls;

/// The service `S`, answering the calls it does not serve itself.
#[derive(Clone)]
pub struct Named<S> {
    inner: S,
}

impl<S> Named<S> {
    pub fn new(inner: S) -> Self {
        Named { inner }
    }
}

impl<S: NamedService> NamedService for Named<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<Request<Body>> for Named<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures_util::future::Either<
        futures_util::future::Map<
            S::Future,
            fn(Result<Response<Body>, Infallible>) -> Result<Response<Body>, Infallible>,
        >,
        std::future::Ready<Result<Response<Body>, Infallible>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        if calls::by_name(method).is_some() {
            let answered: fn(_) -> _ =
                |answer: Result<Response<Body>, Infallible>| answer.map(too_large_as_exhausted);
            return futures_util::future::Either::Left(futures_util::FutureExt::map(
                self.inner.call(request),
                answered,
            ));
        }
        let status = Status::unimplemented(format!(
            "{method} is not served by Muster (docs/grpc.md lists the calls it serves)"
        ));
        futures_util::future::Either::Right(std::future::ready(Ok(status.into_http())))
    }
}

/// tonic refuses an oversized message with `OUT_OF_RANGE` ("decoded message length too
/// large"), before any answer, so its status is in the answer's headers.
fn too_large_as_exhausted(mut answer: Response<Body>) -> Response<Body> {
    let headers = answer.headers_mut();
    let out_of_range = headers
        .get("grpc-status")
        .is_some_and(|code| code.as_bytes() == b"11");
    let too_large = headers.get("grpc-message").is_some_and(|message| {
        percent_encoding::percent_decode(message.as_bytes())
            .decode_utf8_lossy()
            .contains("decoded message length too large")
    });
    if out_of_range && too_large {
        headers.insert("grpc-status", axum::http::HeaderValue::from_static("8"));
    }
    answer
}
