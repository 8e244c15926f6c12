//! The KEDA external scaler: KEDA's published gRPC service (`proto/externalscaler.proto`), so that
//! KEDA scales Muster's Deployment (or an Agones Fleet) to the replicas the policy decides.
//!
//! The metric is `muster_desired_replicas` with a target size of 1: the HPA that KEDA manages sets
//! replicas = value / target = the desired replicas, read through `GetMetrics` at each of the
//! HPA's syncs (every 15 s by default). `StreamIsActive` sends a message when the stream opens and
//! again whenever the desired replicas change; KEDA (an `external-push` trigger) acts on a push
//! only to activate a target at 0 replicas — with replicas above 0 it records the last active
//! time and nothing else, so a push does not bring the HPA's next read forward
//! ([`crate::cluster`] has the details).

use std::pin::Pin;

use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

/// The code generated from KEDA's proto: the server trait and, for tests and tools, the client.
/// Generated, so not held to this crate's lints (its doc comments are KEDA's).
#[allow(clippy::all, rustdoc::all)]
pub mod proto {
    tonic::include_proto!("externalscaler");
}

use proto::external_scaler_server::{ExternalScaler, ExternalScalerServer};
use proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};

/// The one metric this scaler reports.
pub const METRIC: &str = "muster_desired_replicas";

/// What the scaler reports: the replicas wanted now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Desired {
    pub replicas: u64,
}

/// The gRPC service, reading the policy's latest decision from a watch channel.
pub struct Scaler {
    desired: watch::Receiver<Desired>,
}

impl Scaler {
    pub fn new(desired: watch::Receiver<Desired>) -> Scaler {
        Scaler { desired }
    }

    /// The tonic service to serve.
    pub fn service(self) -> ExternalScalerServer<Scaler> {
        ExternalScalerServer::new(self)
    }

    fn active(&self) -> bool {
        self.desired.borrow().replicas > 0
    }
}

type ActiveStream = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;
type SpecStream = Pin<Box<dyn Stream<Item = Result<GetMetricSpecResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalScaler for Scaler {
    async fn is_active(
        &self,
        _: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        Ok(Response::new(IsActiveResponse {
            result: self.active(),
        }))
    }

    type StreamIsActiveStream = ActiveStream;

    async fn stream_is_active(
        &self,
        _: Request<ScaledObjectRef>,
    ) -> Result<Response<ActiveStream>, Status> {
        // The current value at once, then every change.
        let stream = WatchStream::new(self.desired.clone()).map(|desired| {
            Ok(IsActiveResponse {
                result: desired.replicas > 0,
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_metric_spec(
        &self,
        _: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        Ok(Response::new(GetMetricSpecResponse {
            metric_specs: vec![MetricSpec {
                metric_name: METRIC.into(),
                target_size: 1,
                target_size_float: 1.0,
            }],
        }))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let asked = &request.get_ref().metric_name;
        if !asked.is_empty() && asked != METRIC {
            return Err(Status::not_found(format!(
                "unknown metric {asked:?}; this scaler reports {METRIC:?}"
            )));
        }
        let replicas = self.desired.borrow().replicas;
        Ok(Response::new(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: METRIC.into(),
                metric_value: replicas as i64,
                metric_value_float: replicas as f64,
            }],
        }))
    }

    type StreamMetricSpecStream = SpecStream;

    /// Optional in KEDA's proto; the spec never changes here (target 1), so KEDA's pull of
    /// `GetMetricSpec` is all it needs.
    async fn stream_metric_spec(
        &self,
        _: Request<ScaledObjectRef>,
    ) -> Result<Response<SpecStream>, Status> {
        Err(Status::unimplemented(
            "the metric spec is constant; use GetMetricSpec",
        ))
    }
}
