//! A module's authoritative match (`initializer.registerMatch`) as a Muster match handler:
//! each match loads the module in a VM of its own, which lives in the match's task and is
//! called there, inline, at every tick — no hop to another thread. The dispatcher's requests
//! are carried out through the [`MatchContext`] when each call returns.

use std::collections::HashMap;
use std::sync::Arc;

use muster_js::{Dispatch, MatchMessage, Presence, Vm};
use muster_proto::realtime::UserPresence;
use serde_json::json;
use uuid::Uuid;

use super::Module;
use crate::matches::handler::{
    Flow, Input, MatchContext, MatchHandler, MatchParams, MatchSettings,
};

/// The grace period `matchTerminate` is told of: none (Muster ends a match at once).
const GRACE_SECONDS: u32 = 0;

/// One match of a module's match handler.
pub struct JsMatch {
    name: String,
    module: Arc<Module>,
    vm: Option<Vm>,
    tick: u64,
    /// A handler answered null or failed: the match ends at its next tick.
    ended: bool,
    /// A handler failed (threw): its players are disconnected when it ends.
    failed: bool,
    /// `muster_js_match_loop_seconds` of this handler.
    loop_time: prometheus::Histogram,
}

impl JsMatch {
    pub fn new(module: Arc<Module>, name: &str) -> JsMatch {
        JsMatch {
            name: name.to_owned(),
            loop_time: module.metrics.loop_time(&format!("match:{name}")),
            module,
            vm: None,
            tick: 0,
            ended: false,
            failed: false,
        }
    }

    /// Records a handler's failure: logged, and the match ends.
    fn failed(&mut self, what: &str, error: muster_js::JsError) {
        tracing::warn!(handler = %self.name, call = what, code = error.code, message = %error.message, "a JavaScript match failed; it ends");
        self.module.metrics.failed(&format!("match:{}", self.name));
        self.ended = true;
        self.failed = true;
    }

    /// Runs one handler call, then carries out what it asked of the dispatcher.
    fn step(
        &mut self,
        ctx: &mut MatchContext<'_>,
        what: &str,
        call: impl FnOnce(&Vm, u64) -> Result<bool, muster_js::JsError>,
    ) {
        let Some(vm) = &self.vm else { return };
        let answer = call(vm, self.tick);
        let dispatches = vm.take_dispatches();
        carry_out(ctx, dispatches);
        match answer {
            Ok(true) => {}
            Ok(false) => self.ended = true,
            Err(error) => self.failed(what, error),
        }
    }
}

impl MatchHandler for JsMatch {
    fn init(&mut self, params: &MatchParams) -> MatchSettings {
        let settings = MatchSettings {
            // As Nakama's: a match ticks whether or not anyone is in it.
            tick_when_empty: true,
            ..MatchSettings::default()
        };
        let vm = match self.module.load_vm() {
            Ok(vm) => vm,
            Err(error) => {
                self.failed("load", error);
                return settings;
            }
        };
        let context = json!({
            "executionMode": "match",
            "node": self.module.node,
            "matchId": params.match_id,
            "env": self.module.env,
        });
        let data = params.data.clone().unwrap_or_else(|| json!(params.params));
        let init = vm.match_init(&self.name, &context, &data);
        self.vm = Some(vm);
        match init {
            Ok(init) => MatchSettings {
                tick_rate_hz: init.tick_rate,
                label: init.label,
                ..settings
            },
            Err(error) => {
                self.failed("matchInit", error);
                settings
            }
        }
    }

    fn join_attempt(
        &mut self,
        _ctx: &MatchContext<'_>,
        presence: &UserPresence,
        metadata: &HashMap<String, String>,
    ) -> Result<(), String> {
        if self.ended {
            return Err("the match is ending".into());
        }
        let Some(vm) = &self.vm else {
            return Err("the match did not start".into());
        };
        let answer = vm.match_join_attempt(
            self.tick,
            &presence_of(presence, &self.module.node),
            &json!(metadata),
        );
        // Messages sent from a join attempt wait for the next call that can deliver them.
        match answer {
            Ok(verdict) => verdict,
            Err(error) => {
                let refusal = error.message.clone();
                self.failed("matchJoinAttempt", error);
                Err(refusal)
            }
        }
    }

    fn join(&mut self, ctx: &mut MatchContext<'_>, presence: &UserPresence) {
        let presences = [presence_of(presence, &self.module.node)];
        self.step(ctx, "matchJoin", |vm, tick| {
            vm.match_presences(false, tick, &presences)
        });
    }

    fn leave(&mut self, ctx: &mut MatchContext<'_>, presence: &UserPresence) {
        let presences = [presence_of(presence, &self.module.node)];
        self.step(ctx, "matchLeave", |vm, tick| {
            vm.match_presences(true, tick, &presences)
        });
    }

    fn tick(&mut self, ctx: &mut MatchContext<'_>, tick: u64, inputs: &[Input]) -> Flow {
        self.tick = tick;
        if self.failed {
            return Flow::Failed;
        }
        if self.ended || self.vm.is_none() {
            return Flow::End;
        }
        let now_ms = crate::base::clock::now_ms();
        let messages: Vec<MatchMessage> = inputs
            .iter()
            .map(|input| MatchMessage {
                sender: input.from.to_string(),
                op_code: input.op_code,
                data: input.data.clone(),
                reliable: input.reliable,
                receive_time_ms: now_ms,
            })
            .collect();
        let started = std::time::Instant::now();
        self.step(ctx, "matchLoop", |vm, tick| vm.match_loop(tick, &messages));
        self.loop_time.observe(started.elapsed().as_secs_f64());
        if self.failed {
            Flow::Failed
        } else if self.ended {
            Flow::End
        } else {
            Flow::Continue
        }
    }

    fn terminate(&mut self, ctx: &mut MatchContext<'_>) {
        if let Some(vm) = &self.vm {
            let answer = vm.match_terminate(self.tick, GRACE_SECONDS);
            carry_out(ctx, vm.take_dispatches());
            if let Err(error) = answer {
                tracing::warn!(handler = %self.name, message = %error.message, "matchTerminate failed");
            }
        }
    }

    fn signal(&mut self, ctx: &mut MatchContext<'_>, data: &str) -> Result<String, String> {
        let Some(vm) = &self.vm else {
            return Err("the match did not start".into());
        };
        let answer = vm.match_signal(self.tick, data);
        carry_out(ctx, vm.take_dispatches());
        answer.map_err(|error| error.message)
    }

    fn state(&mut self) -> Option<String> {
        let vm = self.vm.as_ref()?;
        Some(
            vm.match_state()
                .unwrap_or_else(|error| format!("(the state cannot be shown: {})", error.message)),
        )
    }
}

fn presence_of(presence: &UserPresence, node: &str) -> Presence {
    Presence {
        user_id: presence.user_id.clone(),
        session_id: presence.session_id.clone(),
        username: presence.username.clone(),
        node: node.to_owned(),
    }
}

/// Carries out the dispatcher's requests, in order.
fn carry_out(ctx: &mut MatchContext<'_>, dispatches: Vec<Dispatch>) {
    for dispatch in dispatches {
        match dispatch {
            Dispatch::Broadcast {
                op_code,
                data,
                to: None,
                reliable,
            } => {
                if reliable {
                    ctx.broadcast(op_code, data);
                } else {
                    ctx.broadcast_unreliable(op_code, data);
                }
            }
            Dispatch::Broadcast {
                op_code,
                data,
                to: Some(sessions),
                ..
            } => {
                let sessions: Vec<Uuid> = sessions
                    .iter()
                    .filter_map(|s| Uuid::parse_str(s).ok())
                    .collect();
                ctx.send_to(&sessions, op_code, data);
            }
            Dispatch::Kick(sessions) => {
                for session in sessions.iter().filter_map(|s| Uuid::parse_str(s).ok()) {
                    ctx.kick(session);
                }
            }
            Dispatch::Label(label) => ctx.set_label(label),
        }
    }
}
