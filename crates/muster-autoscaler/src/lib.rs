//! Capacity autoscaling for a game backend, usable on its own.
//!
//! - [`policy`]: what capacity to ask for, second by second, from a demand signal — Muster's
//!   policy ([`policy::Muster`]: scale up on one breach, sized from actual demand and its steady
//!   trend, a jump being a level; scale down slowly; never below what a scheduled event needs)
//!   and, for comparison, the CloudWatch-alarm policies of DynamoDB auto scaling
//!   ([`policy::Alarm`]: vanilla and the two hypotheses of Space Ape's experiment). Every
//!   decision says why.
//! - [`calendar`]: scheduled live events (start, end, expected demand or multiplier, lead time).
//! - [`keda`], [`run`], [`http`]: the live autoscaler — KEDA's external scaler over gRPC, the
//!   loop that reads the nodes and decides every second, and its HTTP endpoint.
//! - [`cluster`]: what Kubernetes does with the scaler's answers (KEDA's handling of pushes, the
//!   HPA's sync and arithmetic), to measure reaction as a cluster sees it.
//! - [`simulate`]: a provisioned-capacity model with DynamoDB's behaviour (burst credit,
//!   throttling, delay before new capacity applies, minute metrics that arrive late) and with
//!   Kubernetes' as the live loop drives it (a new count any second), Space Ape's two traffic
//!   traces beside a step and a sawtooth, and the table and charts comparing the policies.
//!
//! Capacity is counted in the demand's own units: one unit serves one request per second (a rate
//! signal) or holds one socket (a gauge); [`policy::Unit`] says which, for the decisions' text.

pub mod calendar;
pub mod cluster;
pub mod http;
pub mod keda;
pub mod policy;
pub mod run;
pub mod simulate;
