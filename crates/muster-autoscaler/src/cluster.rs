//! What a Kubernetes cluster does with the external scaler's answers ([`crate::keda`]), so that
//! reaction times can be measured as the cluster sees them rather than at the gRPC socket.
//!
//! The path, as KEDA's and Kubernetes' sources have it (docs/autoscaling.md cites them):
//!
//! - **Replicas come from the HPA, on its own clock.** KEDA creates an HPA whose external metric
//!   is this scaler's `GetMetrics`. The HPA controller syncs every 15 s (kube-controller-manager's
//!   `--horizontal-pod-autoscaler-sync-period`); at each sync it asks KEDA's metrics server,
//!   which calls `GetMetrics` (live, unless the trigger sets `useCachedMetrics`, which serves the
//!   value of KEDA's last poll instead). Nothing the scaler sends makes the HPA sync sooner.
//! - **The HPA's arithmetic** for an `AverageValue` target (KEDA's default): with the value
//!   `metric` and `current` replicas, nothing changes while `metric / (target × current)` is
//!   within the tolerance (10 %) of 1; otherwise it proposes `ceil(metric / target)`. Scale-up has
//!   no stabilisation by default but is rate-limited: at most the larger of +4 pods and +100 %
//!   within any 15 s. Scale-down takes the highest proposal of the last 300 s.
//! - **`StreamIsActive` pushes** (an `external-push` trigger) are acted on only to activate:
//!   `true` while the target has 0 replicas scales it to `minReplicaCount` (or 1) at once; `true`
//!   with replicas above 0 only records the last active time (which the cooldown to zero reads);
//!   `false` is ignored (since KEDA 2.18, deactivation goes through the polling loop; before, a
//!   `false` push with `minReplicaCount` 0 scaled to zero once the cooldown had passed). A push
//!   never sets a replica count above the minimum.
//!
//! [`Hpa`] is that arithmetic; [`on_push`] is KEDA's handling of one push. Both are pure, driven
//! by the caller's clock, so tests and benches run them at any speed.

use std::collections::VecDeque;

/// Times this close are the same instant (sums of periods in floating point drift by less).
const SAME_INSTANT_S: f64 = 1e-6;

/// An HPA's settings: Kubernetes' defaults, bounded by the ScaledObject's replica counts.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaSettings {
    /// Seconds between syncs (kube-controller-manager's `--horizontal-pod-autoscaler-sync-period`).
    pub sync_period_s: f64,
    /// A proposal within this fraction of the current replicas is ignored
    /// (`--horizontal-pod-autoscaler-tolerance`).
    pub tolerance: f64,
    /// Scale-up limit: at most this many pods added within `scale_up_period_s` …
    pub scale_up_pods: u32,
    /// … or this percentage of the replicas at the period's start, whichever is more.
    pub scale_up_percent: f64,
    pub scale_up_period_s: f64,
    /// Scale-down uses the highest proposal of this many last seconds.
    pub scale_down_stabilisation_s: f64,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// The metric's target per pod (this scaler's `GetMetricSpec` says 1).
    pub target_per_pod: f64,
}

impl HpaSettings {
    /// Kubernetes' defaults between `min_replicas` and `max_replicas`.
    pub fn new(min_replicas: u32, max_replicas: u32) -> HpaSettings {
        HpaSettings {
            sync_period_s: 15.0,
            tolerance: 0.1,
            scale_up_pods: 4,
            scale_up_percent: 100.0,
            scale_up_period_s: 15.0,
            scale_down_stabilisation_s: 300.0,
            min_replicas,
            max_replicas,
            target_per_pod: 1.0,
        }
    }
}

/// One HPA acting on one scale target.
#[derive(Debug, Clone)]
pub struct Hpa {
    settings: HpaSettings,
    replicas: u32,
    /// Proposals with their time, newest last, for the scale-down window.
    proposals: VecDeque<(f64, u32)>,
    /// Pods added at each scale-up, with their time, for the rate limit.
    ups: VecDeque<(f64, u32)>,
}

impl Hpa {
    pub fn new(settings: HpaSettings, replicas: u32) -> Hpa {
        Hpa {
            settings,
            replicas,
            proposals: VecDeque::new(),
            ups: VecDeque::new(),
        }
    }

    pub fn settings(&self) -> &HpaSettings {
        &self.settings
    }

    /// The scale target's replicas now.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// Sets the replicas from outside the HPA (KEDA activating from 0).
    pub fn set_replicas(&mut self, replicas: u32) {
        self.replicas = replicas;
    }

    /// One sync at `now_s` with `metric`, the value `GetMetrics` answered: the replicas the HPA
    /// sets. At 0 replicas the HPA does nothing (KEDA activates; see [`on_push`]).
    pub fn sync(&mut self, now_s: f64, metric: f64) -> u32 {
        let s = &self.settings;
        let current = self.replicas;
        if current == 0 {
            return 0;
        }
        let ratio = metric / (s.target_per_pod * f64::from(current));
        let proposal = if (1.0 - s.tolerance..=1.0 + s.tolerance).contains(&ratio) {
            current
        } else {
            (metric / s.target_per_pod).ceil().max(0.0) as u32
        };
        // Scale-down stabilisation: the highest proposal of the window (this one included).
        self.proposals.push_back((now_s, proposal));
        while self
            .proposals
            .front()
            .is_some_and(|&(at, _)| at <= now_s - s.scale_down_stabilisation_s + SAME_INSTANT_S)
        {
            self.proposals.pop_front();
        }
        let highest = self
            .proposals
            .iter()
            .map(|&(_, p)| p)
            .max()
            .unwrap_or(proposal);
        let mut desired = if proposal > current {
            proposal
        } else {
            highest.min(current)
        };
        // Scale-up rate limit, from the replicas at the start of the period (a scale-up exactly
        // one period ago no longer counts: Kubernetes keeps those strictly after the cutoff).
        while self
            .ups
            .front()
            .is_some_and(|&(at, _)| at <= now_s - s.scale_up_period_s + SAME_INSTANT_S)
        {
            self.ups.pop_front();
        }
        if desired > current {
            let added: u32 = self.ups.iter().map(|&(_, n)| n).sum();
            let start = current.saturating_sub(added);
            let by_pods = start + s.scale_up_pods;
            let by_percent = (f64::from(start) * (1.0 + s.scale_up_percent / 100.0)).ceil() as u32;
            desired = desired.min(by_pods.max(by_percent));
        }
        desired = desired.clamp(s.min_replicas, s.max_replicas.max(s.min_replicas));
        if desired > current {
            self.ups.push_back((now_s, desired - current));
        }
        self.replicas = desired;
        desired
    }
}

/// What KEDA does with one `StreamIsActive` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushEffect {
    /// The target was at 0 and the trigger is active: scaled to this many replicas at once.
    Activated(u32),
    /// Active with replicas above 0: only the last active time is recorded.
    LastActiveTime,
    /// Inactive: ignored (deactivation goes through KEDA's polling loop).
    Ignored,
}

/// KEDA's handling of a push of `active` while the target has `replicas`, for a ScaledObject
/// with `min_replica_count`.
pub fn on_push(active: bool, replicas: u32, min_replica_count: u32) -> PushEffect {
    match (active, replicas) {
        (false, _) => PushEffect::Ignored,
        (true, 0) => PushEffect::Activated(min_replica_count.max(1)),
        (true, _) => PushEffect::LastActiveTime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_is_rate_limited_to_double_or_four_pods_per_period() {
        let mut hpa = Hpa::new(HpaSettings::new(2, 50), 2);
        // Desired 9 from 2: max(2 + 4, 2 × 2) = 6 at the first sync, 9 one period later.
        assert_eq!(hpa.sync(0.0, 9.0), 6);
        assert_eq!(hpa.sync(15.0, 9.0), 9);
        // Period sums that drift in floating point are still one period apart.
        let mut hpa = Hpa::new(HpaSettings::new(2, 50), 2);
        let phase = 0.098_667_131_250_004_6;
        assert!(phase + 1.0 * 15.0 > phase + 2.0 * 15.0 - 15.0, "drifts");
        assert_eq!(hpa.sync(phase + 1.0 * 15.0, 9.0), 6);
        assert_eq!(hpa.sync(phase + 2.0 * 15.0, 9.0), 9);
        // From 10 to 46: +100 % wins over +4.
        let mut hpa = Hpa::new(HpaSettings::new(1, 100), 10);
        assert_eq!(hpa.sync(0.0, 46.0), 20);
        assert_eq!(hpa.sync(15.0, 46.0), 40);
        assert_eq!(hpa.sync(30.0, 46.0), 46);
    }

    #[test]
    fn a_change_within_the_tolerance_is_ignored() {
        let mut hpa = Hpa::new(HpaSettings::new(1, 100), 20);
        assert_eq!(hpa.sync(0.0, 21.0), 20, "+5 % is within the tolerance");
        assert_eq!(hpa.sync(15.0, 19.0), 20, "−5 % too");
        assert_eq!(hpa.sync(30.0, 23.0), 23, "+15 % is not");
        let mut hpa = Hpa::new(HpaSettings::new(1, 100), 4);
        assert_eq!(hpa.sync(0.0, 5.0), 5, "+25 %");
    }

    #[test]
    fn scale_down_waits_for_the_highest_proposal_of_five_minutes_to_pass() {
        let mut hpa = Hpa::new(HpaSettings::new(1, 100), 9);
        assert_eq!(hpa.sync(0.0, 9.0), 9);
        let mut t = 15.0;
        while t < 300.0 {
            assert_eq!(hpa.sync(t, 3.0), 9, "at {t}");
            t += 15.0;
        }
        assert_eq!(
            hpa.sync(300.0, 3.0),
            3,
            "the proposal of 9 at 0 s has left the window"
        );
    }

    #[test]
    fn a_push_activates_only_from_zero() {
        assert_eq!(on_push(true, 0, 2), PushEffect::Activated(2));
        assert_eq!(on_push(true, 0, 0), PushEffect::Activated(1));
        assert_eq!(on_push(true, 3, 2), PushEffect::LastActiveTime);
        assert_eq!(on_push(false, 3, 2), PushEffect::Ignored);
        // And the HPA does nothing at 0: activation is KEDA's.
        let mut hpa = Hpa::new(HpaSettings::new(0, 10), 0);
        assert_eq!(hpa.sync(0.0, 5.0), 0);
    }
}
