//! The `nk` utilities that need no server: encodings, hashes, binary and string conversion,
//! cron schedules, random bytes. Native functions on the global `__muster_util`, copied onto
//! `nk` by the prelude under Nakama's names and with its argument conventions.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use chrono::{DateTime, Utc};
use croner::Cron;
use hmac::{KeyInit, Mac};
use md5::Md5;
use rquickjs::function::Opt;
use rquickjs::{ArrayBuffer, Ctx, Function, Object, TypedArray, Value};
use sha2::{Digest, Sha256};

/// gRPC's InvalidArgument: bad input to a utility.
const INVALID: i32 = 3;

/// The most random bytes one call may ask for.
const MAX_RANDOM_BYTES: usize = 1 << 20;

/// Throws `{message, code}` into the script, as the host's refusals are thrown.
pub(crate) fn refuse<'js>(ctx: &Ctx<'js>, message: &str, code: i32) -> rquickjs::Error {
    let thrown = serde_json::json!({ "message": message, "code": code });
    match ctx.json_parse(thrown.to_string()) {
        Ok(value) => ctx.throw(value),
        Err(error) => error,
    }
}

/// The bytes of a string (UTF-8), an `ArrayBuffer` or a typed array (`Uint8Array` …).
pub(crate) fn bytes_of<'js>(
    ctx: &Ctx<'js>,
    value: &Value<'js>,
    what: &str,
) -> rquickjs::Result<Vec<u8>> {
    if let Some(text) = value.as_string() {
        return Ok(text.to_string()?.into_bytes());
    }
    if let Some(buffer) = ArrayBuffer::from_value(value.clone()) {
        return Ok(buffer.as_bytes().unwrap_or_default().to_vec());
    }
    if let Ok(array) = TypedArray::<u8>::from_value(value.clone()) {
        let bytes: &[u8] = array.as_ref();
        return Ok(bytes.to_vec());
    }
    Err(refuse(
        ctx,
        &format!("{what} must be a string or an ArrayBuffer"),
        INVALID,
    ))
}

fn buffer<'js>(ctx: &Ctx<'js>, bytes: Vec<u8>) -> rquickjs::Result<Value<'js>> {
    Ok(ArrayBuffer::new(ctx.clone(), bytes)?.into_value())
}

/// Installs `__muster_util` on the global object.
pub(crate) fn install(ctx: &Ctx<'_>) -> rquickjs::Result<()> {
    let util = Object::new(ctx.clone())?;
    util.set(
        "base64Encode",
        Function::new(ctx.clone(), base64_encode)?.with_name("base64Encode")?,
    )?;
    util.set(
        "base64UrlEncode",
        Function::new(ctx.clone(), base64_url_encode)?.with_name("base64UrlEncode")?,
    )?;
    util.set(
        "base64Decode",
        Function::new(ctx.clone(), base64_decode)?.with_name("base64Decode")?,
    )?;
    util.set(
        "base64UrlDecode",
        Function::new(ctx.clone(), base64_url_decode)?.with_name("base64UrlDecode")?,
    )?;
    util.set(
        "base16Encode",
        Function::new(ctx.clone(), base16_encode)?.with_name("base16Encode")?,
    )?;
    util.set(
        "base16Decode",
        Function::new(ctx.clone(), base16_decode)?.with_name("base16Decode")?,
    )?;
    util.set(
        "md5Hash",
        Function::new(ctx.clone(), md5_hash)?.with_name("md5Hash")?,
    )?;
    util.set(
        "sha256Hash",
        Function::new(ctx.clone(), sha256_hash)?.with_name("sha256Hash")?,
    )?;
    util.set(
        "hmacSha256Hash",
        Function::new(ctx.clone(), hmac_sha256)?.with_name("hmacSha256Hash")?,
    )?;
    util.set(
        "binaryToString",
        Function::new(ctx.clone(), binary_to_string)?.with_name("binaryToString")?,
    )?;
    util.set(
        "stringToBinary",
        Function::new(ctx.clone(), string_to_binary)?.with_name("stringToBinary")?,
    )?;
    util.set(
        "secureRandomBytes",
        Function::new(ctx.clone(), secure_random_bytes)?.with_name("secureRandomBytes")?,
    )?;
    util.set(
        "cronNext",
        Function::new(ctx.clone(), cron_next)?.with_name("cronNext")?,
    )?;
    util.set(
        "cronPrev",
        Function::new(ctx.clone(), cron_prev)?.with_name("cronPrev")?,
    )?;
    ctx.globals().set("__muster_util", util)?;
    Ok(())
}

fn base64_encode<'js>(
    ctx: Ctx<'js>,
    input: Value<'js>,
    padding: Opt<bool>,
) -> rquickjs::Result<String> {
    let bytes = bytes_of(&ctx, &input, "base64Encode's input")?;
    Ok(if padding.0.unwrap_or(true) {
        STANDARD.encode(bytes)
    } else {
        STANDARD_NO_PAD.encode(bytes)
    })
}

fn base64_url_encode<'js>(
    ctx: Ctx<'js>,
    input: Value<'js>,
    padding: Opt<bool>,
) -> rquickjs::Result<String> {
    let bytes = bytes_of(&ctx, &input, "base64UrlEncode's input")?;
    Ok(if padding.0.unwrap_or(true) {
        URL_SAFE.encode(bytes)
    } else {
        URL_SAFE_NO_PAD.encode(bytes)
    })
}

fn base64_decode<'js>(
    ctx: Ctx<'js>,
    input: String,
    padding: Opt<bool>,
) -> rquickjs::Result<Value<'js>> {
    let engine = if padding.0.unwrap_or(true) {
        STANDARD
    } else {
        STANDARD_NO_PAD
    };
    let bytes = engine
        .decode(input.trim())
        .map_err(|e| refuse(&ctx, &format!("base64Decode: {e}"), INVALID))?;
    buffer(&ctx, bytes)
}

fn base64_url_decode<'js>(
    ctx: Ctx<'js>,
    input: String,
    padding: Opt<bool>,
) -> rquickjs::Result<Value<'js>> {
    let engine = if padding.0.unwrap_or(true) {
        URL_SAFE
    } else {
        URL_SAFE_NO_PAD
    };
    let bytes = engine
        .decode(input.trim())
        .map_err(|e| refuse(&ctx, &format!("base64UrlDecode: {e}"), INVALID))?;
    buffer(&ctx, bytes)
}

fn base16_encode<'js>(ctx: Ctx<'js>, input: Value<'js>) -> rquickjs::Result<String> {
    Ok(hex::encode(bytes_of(&ctx, &input, "base16Encode's input")?))
}

fn base16_decode<'js>(ctx: Ctx<'js>, input: String) -> rquickjs::Result<Value<'js>> {
    let bytes = hex::decode(input.trim())
        .map_err(|e| refuse(&ctx, &format!("base16Decode: {e}"), INVALID))?;
    buffer(&ctx, bytes)
}

fn md5_hash<'js>(ctx: Ctx<'js>, input: Value<'js>) -> rquickjs::Result<String> {
    Ok(hex::encode(Md5::digest(bytes_of(
        &ctx,
        &input,
        "md5Hash's input",
    )?)))
}

fn sha256_hash<'js>(ctx: Ctx<'js>, input: Value<'js>) -> rquickjs::Result<String> {
    Ok(hex::encode(Sha256::digest(bytes_of(
        &ctx,
        &input,
        "sha256Hash's input",
    )?)))
}

fn hmac_sha256<'js>(
    ctx: Ctx<'js>,
    input: Value<'js>,
    key: Value<'js>,
) -> rquickjs::Result<Value<'js>> {
    let key = bytes_of(&ctx, &key, "hmacSha256Hash's key")?;
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(&key)
        .map_err(|e| refuse(&ctx, &format!("hmacSha256Hash: {e}"), INVALID))?;
    mac.update(&bytes_of(&ctx, &input, "hmacSha256Hash's input")?);
    buffer(&ctx, mac.finalize().into_bytes().to_vec())
}

fn binary_to_string<'js>(ctx: Ctx<'js>, input: Value<'js>) -> rquickjs::Result<String> {
    let bytes = bytes_of(&ctx, &input, "binaryToString's input")?;
    String::from_utf8(bytes)
        .map_err(|_| refuse(&ctx, "binaryToString: the data is not valid UTF-8", INVALID))
}

fn string_to_binary<'js>(ctx: Ctx<'js>, input: String) -> rquickjs::Result<Value<'js>> {
    buffer(&ctx, input.into_bytes())
}

fn secure_random_bytes<'js>(ctx: Ctx<'js>, count: f64) -> rquickjs::Result<Value<'js>> {
    if !(0.0..=MAX_RANDOM_BYTES as f64).contains(&count) {
        return Err(refuse(
            &ctx,
            &format!("secureRandomBytes: count must be 0 to {MAX_RANDOM_BYTES}"),
            INVALID,
        ));
    }
    let mut bytes = vec![0u8; count as usize];
    rand::fill(&mut bytes[..]);
    buffer(&ctx, bytes)
}

fn cron_next<'js>(ctx: Ctx<'js>, expression: String, timestamp: f64) -> rquickjs::Result<f64> {
    cron(&ctx, &expression, timestamp, true)
}

fn cron_prev<'js>(ctx: Ctx<'js>, expression: String, timestamp: f64) -> rquickjs::Result<f64> {
    cron(&ctx, &expression, timestamp, false)
}

/// The next (or previous) time `expression` fires after (before) `timestamp`, in Unix
/// seconds, as Nakama's `cronNext` and `cronPrev`.
fn cron(ctx: &Ctx<'_>, expression: &str, timestamp: f64, next: bool) -> rquickjs::Result<f64> {
    let schedule: Cron = expression.parse().map_err(|e| {
        refuse(
            ctx,
            &format!("invalid cron expression {expression:?}: {e}"),
            INVALID,
        )
    })?;
    let at = DateTime::<Utc>::from_timestamp(timestamp as i64, 0)
        .ok_or_else(|| refuse(ctx, "the timestamp is out of range", INVALID))?;
    let found = if next {
        schedule.find_next_occurrence(&at, false)
    } else {
        schedule.find_previous_occurrence(&at, false)
    };
    found
        .map(|t| t.timestamp() as f64)
        .map_err(|e| refuse(ctx, &format!("cron: {e}"), INVALID))
}
