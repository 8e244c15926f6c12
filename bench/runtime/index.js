// The JavaScript module of bench/runtime.sh: the same work as Muster's Rust built-ins, written
// as a Nakama module would be.

// wallet_spend's work: spend `amount` coins of the caller's wallet, one atomic write.
function rpcWalletSpend(ctx, logger, nk, payload) {
  var input = JSON.parse(payload || "{}");
  var result = nk.walletUpdate(ctx.userId, { coins: -(input.amount || 1) }, {}, true);
  return JSON.stringify({ wallet: result.updated });
}

// Nothing at all: the cost of reaching a JavaScript function.
function rpcEmpty(ctx, logger, nk, payload) {
  return "";
}

// The built-in "arena" game (crates/muster/src/matches/games/arena.rs) in JavaScript, byte for
// byte the same wire format: INPUT (op 1) moves its sender one step, STATE (op 2) every tick with
// every player's position and newest input, WELCOME (op 3) with the slot and the tick rate.
var STEP = 0.5;
var HALF = 1000;

function arenaInit(ctx, logger, nk, params) {
  var rate = Number(params.tick_rate_hz) || 15;
  return { state: { players: [], rate: rate }, tickRate: rate, label: "arena" };
}

function arenaJoinAttempt(ctx, logger, nk, dispatcher, tick, state, presence, metadata) {
  return { state: state, accept: state.players.length < 255 };
}

function freeSlot(players) {
  for (var slot = 0; slot < 255; slot++) {
    var taken = false;
    for (var i = 0; i < players.length; i++) if (players[i].slot === slot) taken = true;
    if (!taken) return slot;
  }
  return 255;
}

function arenaJoin(ctx, logger, nk, dispatcher, tick, state, presences) {
  for (var i = 0; i < presences.length; i++) {
    var slot = freeSlot(state.players);
    state.players.push({ session: presences[i].sessionId, slot: slot, x: 0, y: 0, seq: 0 });
    dispatcher.broadcastMessage(3, new Uint8Array([slot, state.rate]), [presences[i]]);
  }
  return { state: state };
}

function arenaLeave(ctx, logger, nk, dispatcher, tick, state, presences) {
  state.players = state.players.filter(function (p) {
    return !presences.some(function (q) { return q.sessionId === p.session; });
  });
  return { state: state };
}

function clamp(v) {
  return v < -HALF ? -HALF : v > HALF ? HALF : v;
}

function arenaLoop(ctx, logger, nk, dispatcher, tick, state, messages) {
  for (var i = 0; i < messages.length; i++) {
    var m = messages[i];
    if (m.opCode !== 1 || m.data.byteLength !== 6) continue;
    var view = new DataView(m.data);
    var seq = view.getUint32(0, true), dx = view.getInt8(4), dy = view.getInt8(5);
    if (dx < -1 || dx > 1 || dy < -1 || dy > 1) continue;
    for (var j = 0; j < state.players.length; j++) {
      var p = state.players[j];
      if (p.session !== m.sender.sessionId || seq <= p.seq) continue;
      p.seq = seq;
      p.x = clamp(p.x + dx * STEP);
      p.y = clamp(p.y + dy * STEP);
    }
  }
  var count = Math.min(state.players.length, 255);
  if (count === 0) return { state: state };
  var out = new DataView(new ArrayBuffer(5 + 13 * count));
  out.setUint32(0, tick, true);
  out.setUint8(4, count);
  for (var k = 0; k < count; k++) {
    var q = state.players[k], at = 5 + 13 * k;
    out.setUint8(at, q.slot);
    out.setFloat32(at + 1, q.x, true);
    out.setFloat32(at + 5, q.y, true);
    out.setUint32(at + 9, q.seq, true);
  }
  dispatcher.broadcastMessage(2, out.buffer, null, null, false);
  return { state: state };
}

function arenaTerminate(ctx, logger, nk, dispatcher, tick, state, grace) {
  return { state: state };
}

function arenaSignal(ctx, logger, nk, dispatcher, tick, state, data) {
  return { state: state, data: data };
}

// The stream of bench/runtime.sh's PART=streams: the caller's socket joins it; a call sends the
// payload to every session on it (examples/stream_send.rs does the same in Rust).
var BENCH_STREAM = { mode: 200, label: "bench" };

function rpcStreamJoin(ctx, logger, nk, payload) {
  nk.streamUserJoin(ctx.userId, ctx.sessionId, BENCH_STREAM, false, false, "");
  return JSON.stringify({ count: nk.streamCount(BENCH_STREAM) });
}

function rpcStreamSend(ctx, logger, nk, payload) {
  nk.streamSend(BENCH_STREAM, payload, null, true);
  return "";
}

function InitModule(ctx, logger, nk, initializer) {
  initializer.registerRpc("wallet_spend_js", rpcWalletSpend);
  initializer.registerRpc("empty_js", rpcEmpty);
  initializer.registerRpc("stream_join", rpcStreamJoin);
  initializer.registerRpc("stream_send_js", rpcStreamSend);
  initializer.registerMatch("arena_js", {
    matchInit: arenaInit,
    matchJoinAttempt: arenaJoinAttempt,
    matchJoin: arenaJoin,
    matchLeave: arenaLeave,
    matchLoop: arenaLoop,
    matchTerminate: arenaTerminate,
    matchSignal: arenaSignal,
  });
}
