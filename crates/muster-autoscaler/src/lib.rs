//! Capacity autoscaling for a game backend, usable on its own.
//!
//! - [`policy`]: what capacity to ask for, second by second, from a demand signal — Muster's
//!   policy ([`policy::Muster`]: scale up on one breach, sized from actual demand and its trend;
//!   scale down slowly; never below what a scheduled event needs) and, for comparison, the
//!   CloudWatch-alarm policies of DynamoDB auto scaling ([`policy::Alarm`]: vanilla and the two
//!   hypotheses of Space Ape's experiment). Every decision says why.
//! - [`calendar`]: scheduled live events (start, end, expected demand or multiplier, lead time).
//! - [`simulate`]: a provisioned-capacity model with DynamoDB's behaviour (burst credit,
//!   throttling, delay before new capacity applies, minute metrics that arrive late), the seed's
//!   two traffic traces, and the table and charts comparing the policies.
//!
//! Units are "capacity units per second" throughout: one unit serves one request per second.

pub mod calendar;
pub mod http;
pub mod keda;
pub mod policy;
pub mod run;
pub mod simulate;
