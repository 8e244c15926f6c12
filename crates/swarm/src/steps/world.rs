//! The `world` step: a player of Muster's persistent world (docs/world.md) pans a viewport over
//! a shard and claims buildings now and then, receiving the world's updates.
//!
//! ```toml
//! [[steps]]
//! do = "world"
//! duration_s = 60
//! shard = 0
//! center = [0, 0]        # plane metres; viewports start within spread_m of it
//! spread_m = 500
//! box_m = 600            # the viewport's side
//! pan_every_s = 5        # moves by up to pan_m in a random direction
//! pan_m = 150
//! claim_every_s = 20     # world_claim of a random building in [0, buildings); absent: none
//! buildings = 433
//! ```
//!
//! On a socket opened with `format = "protobuf"` the step sends and reads binary protobuf
//! envelopes (Muster's `world_subscribe` and `world_state` tags); a state's decoding is then
//! no longer the load generator's largest cost, as parsing every state's JSON is.
//!
//! Metrics: `world_subscribe` (a subscribe or pan, intended → the box's snapshot), and
//! `world_update` (the server's tick time carried in each state → its arrival here, on the
//! worker's wall clock: across machines, the clocks' offset is in it); counters `worldStates`
//! and `worldBytes` (the states' frames as received: bytes per second per client is
//! `worldBytes / players / duration`). A claim refused because the building is taken is part of
//! the game; any other refusal, or no answer within `timeout_s`, fails the player.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::Message;

use muster_proto::realtime::{self, Envelope, Message as Kind, Rpc, WorldSubscribe};

use crate::measure::stats::Metric;
use crate::net::failure::{ws_failure, Failure};
use crate::net::transport::Ws;
use crate::scenario::world::WorldStep;
use crate::scenario::SocketFormat;
use crate::steps::ctx::Ctx;
use crate::steps::player::unsolicited;

/// The parts of an incoming envelope this step reads.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    cid: Option<String>,
    world_state: Option<State>,
    rpc: Option<serde::de::IgnoredAny>,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct State {
    #[serde(default)]
    tick_unix_ms: u64,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    context: std::collections::HashMap<String, String>,
}

impl Incoming {
    /// The same parts of a binary protobuf envelope (`None`: not one).
    fn from_protobuf(frame: &[u8]) -> Option<Incoming> {
        let envelope = realtime::decode_protobuf(frame).ok()?;
        let mut incoming = Incoming {
            cid: Some(envelope.cid).filter(|c| !c.is_empty()),
            world_state: None,
            rpc: None,
            error: None,
        };
        match envelope.message {
            Some(Kind::WorldState(state)) => {
                incoming.world_state = Some(State {
                    tick_unix_ms: state.tick_unix_ms,
                });
            }
            Some(Kind::Rpc(_)) => incoming.rpc = Some(serde::de::IgnoredAny),
            Some(Kind::Error(e)) => {
                incoming.error = Some(ErrorBody {
                    code: i64::from(e.code),
                    context: e.context,
                });
            }
            _ => {}
        }
        Some(incoming)
    }
}

/// What is awaited, by correlation id.
#[derive(Clone, Copy)]
enum Waiting {
    Subscribe(Instant),
    Claim(Instant),
}

/// Runs the step on the player's socket from `start` for its duration.
pub async fn run(
    ctx: &Ctx,
    ws: &mut Ws,
    format: SocketFormat,
    step: &WorldStep,
    start: Instant,
    index: u64,
    limit: Duration,
) -> Result<(), Failure> {
    let mut rng = fastrand::Rng::with_seed(index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x77);
    let until = start + step.duration_s.as_duration();
    let angle = rng.f32() * std::f32::consts::TAU;
    let reach = step.spread_m * rng.f32().sqrt();
    let mut at = (
        step.center.0 + reach * angle.cos(),
        step.center.1 + reach * angle.sin(),
    );
    let mut seq: u64 = 0;
    let mut waiting: Vec<(String, Waiting)> = Vec::new();
    // The first subscribe now; pans and claims on their schedules.
    let mut next_pan = start;
    let claims = step.claim_every_s.0 > 0.0;
    let mut next_claim = start + step.claim_every_s.as_duration().mul_f32(rng.f32());
    loop {
        if ctx.is_over() || Instant::now() >= until {
            return Ok(());
        }
        if let Some((_, w)) = waiting.first() {
            let since = match w {
                Waiting::Subscribe(t) | Waiting::Claim(t) => *t,
            };
            if Instant::now() > since + limit {
                return Err(Failure::Timeout(match w {
                    Waiting::Subscribe(_) => "world_subscribe",
                    Waiting::Claim(_) => "world_claim",
                }));
            }
        }
        let next_action = if claims {
            next_pan.min(next_claim)
        } else {
            next_pan
        };
        let wake = next_action.min(until);
        tokio::select! {
            biased;
            _ = ctx.stop.notified() => return Ok(()),
            () = sleep_until(wake) => {
                let now = Instant::now();
                if now >= until {
                    return Ok(());
                }
                seq += 1;
                let cid = format!("w{seq}");
                let action = if now >= next_pan {
                    let intended = next_pan;
                    if seq > 1 {
                        let angle = rng.f32() * std::f32::consts::TAU;
                        let step_m = step.pan_m * rng.f32();
                        at = (at.0 + step_m * angle.cos(), at.1 + step_m * angle.sin());
                    }
                    next_pan += step.pan_every_s.as_duration();
                    waiting.push((cid.clone(), Waiting::Subscribe(intended)));
                    let half = step.box_m / 2.0;
                    Kind::WorldSubscribe(WorldSubscribe {
                        shard: step.shard,
                        min_x: at.0 - half,
                        min_y: at.1 - half,
                        max_x: at.0 + half,
                        max_y: at.1 + half,
                    })
                } else {
                    let intended = next_claim;
                    next_claim += step.claim_every_s.as_duration();
                    waiting.push((cid.clone(), Waiting::Claim(intended)));
                    Kind::Rpc(Rpc {
                        id: "world_claim".into(),
                        payload: format!(
                            "{{\"shard\":{},\"building\":{}}}",
                            step.shard,
                            rng.u32(0..step.buildings)
                        ),
                        ..Default::default()
                    })
                };
                let envelope = Envelope::new(cid, action);
                let message = match format {
                    SocketFormat::Json => Message::text(realtime::encode_json(&envelope)),
                    SocketFormat::Protobuf => Message::binary(realtime::encode_protobuf(&envelope)),
                };
                ctx.rec.borrow_mut().count(|c| c.sends += 1);
                ws.send(message).await.map_err(ws_failure)?;
            }
            msg = ws.next() => {
                let arrived = Instant::now();
                let (incoming, bytes) = match &msg {
                    Some(Ok(Message::Text(text))) => (
                        serde_json::from_str::<Incoming>(text.as_str()).ok(),
                        text.len() as u64,
                    ),
                    Some(Ok(Message::Binary(frame))) => {
                        (Incoming::from_protobuf(frame), frame.len() as u64)
                    }
                    _ => {
                        unsolicited(ctx, ws, msg).await?;
                        continue;
                    }
                };
                let Some(incoming) = incoming else {
                    ctx.rec.borrow_mut().count(|c| c.receives += 1);
                    continue;
                };
                let mut rec = ctx.rec.borrow_mut();
                rec.count(|c| c.receives += 1);
                if let Some(state) = &incoming.world_state {
                    rec.count(|c| {
                        c.world_states += 1;
                        c.world_bytes += bytes;
                    });
                    let now_ms = ctx.clock.unix_us(arrived) / 1000;
                    if incoming.cid.is_none() && state.tick_unix_ms > 0 {
                        let late = now_ms.saturating_sub(state.tick_unix_ms);
                        rec.latency(Metric::WorldUpdate, Duration::from_millis(late));
                    }
                }
                let Some(cid) = incoming.cid.as_deref().filter(|c| !c.is_empty()) else {
                    continue;
                };
                let Some(at) = waiting.iter().position(|(c, _)| c == cid) else {
                    continue;
                };
                let (_, what) = waiting.remove(at);
                match (what, &incoming.error) {
                    (Waiting::Subscribe(intended), None) if incoming.world_state.is_some() => {
                        rec.latency(Metric::WorldSubscribe, arrived.saturating_duration_since(intended));
                    }
                    (Waiting::Claim(_), None) if incoming.rpc.is_some() => {}
                    // A building already claimed (ALREADY_EXISTS) is the game, not a failure.
                    (Waiting::Claim(_), Some(e))
                        if e.context.get("grpc_code").map(String::as_str) == Some("6") => {}
                    (_, Some(e)) => return Err(Failure::ServerError(e.code)),
                    _ => return Err(Failure::BadResponse),
                }
            }
        }
    }
}
