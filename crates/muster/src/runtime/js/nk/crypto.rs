//! Ciphers, password hashes, signatures and tokens, as Nakama's runtime gives them:
//! `aes128Encrypt`, `aes128Decrypt`, `aes256Encrypt`, `aes256Decrypt` (AES-CFB, a random IV
//! before the cipher text, base64), `bcryptHash`, `bcryptCompare`, `rsaSha256Hash` (an RSA
//! PKCS#1 v1.5 signature of the input's SHA-256), `jwtGenerate` (HS256 or RS256).

use aes::cipher::{AsyncStreamCipher, KeyIvInit};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use muster_js::JsError;
use rsa::pkcs1::DecodeRsaPrivateKey;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::context::{invalid, Args};

pub(super) const NAMES: &[&str] = &[
    "aes128Encrypt",
    "aes128Decrypt",
    "aes256Encrypt",
    "aes256Decrypt",
    "bcryptHash",
    "bcryptCompare",
    "rsaSha256Hash",
    "jwtGenerate",
];

/// Nakama's bcrypt cost for `bcryptHash`.
const BCRYPT_COST: u32 = 10;

/// Longest input one call may encrypt, hash or sign (a module's mistake must not hold a VM).
const MAX_INPUT_BYTES: usize = 1 << 20;

pub(super) fn call(name: &str, args: &Args) -> Result<Value, JsError> {
    match name {
        "aes128Encrypt" => aes_encrypt(16, args).map(Value::String),
        "aes256Encrypt" => aes_encrypt(32, args).map(Value::String),
        "aes128Decrypt" => aes_decrypt(16, args).map(Value::String),
        "aes256Decrypt" => aes_decrypt(32, args).map(Value::String),
        "bcryptHash" => {
            let input = input(args, 0, "password")?;
            let hash = bcrypt::hash(input, BCRYPT_COST)
                .map_err(|e| JsError::new(format!("error hashing input: {e}"), 13))?;
            Ok(json!(hash))
        }
        "bcryptCompare" => {
            let hash = args.string(0, "hash")?;
            let plain = args.string(1, "password")?;
            if hash.is_empty() {
                return Err(invalid("hash cannot be empty"));
            }
            if plain.is_empty() {
                return Err(invalid("plaintext cannot be empty"));
            }
            // A hash that is not bcrypt's (too short, malformed) does not match, as on Nakama.
            Ok(json!(bcrypt::verify(plain, &hash).unwrap_or(false)))
        }
        "rsaSha256Hash" => {
            let text = input(args, 0, "input")?;
            let key = args.string(1, "key")?;
            if key.is_empty() {
                return Err(invalid("key cannot be empty"));
            }
            let key = rsa::RsaPrivateKey::from_pkcs1_pem(&key)
                .map_err(|e| JsError::new(format!("error parsing key: {e}"), 3))?;
            let digest = Sha256::digest(text.as_bytes());
            let signature = key
                .sign(rsa::Pkcs1v15Sign::new::<Sha256>(), &digest)
                .map_err(|e| JsError::new(format!("error signing input: {e}"), 13))?;
            // One character per byte (Latin-1): the signature's bytes survive the string.
            Ok(json!(signature
                .iter()
                .map(|b| *b as char)
                .collect::<String>()))
        }
        "jwtGenerate" => jwt_generate(args),
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// The string argument `i`, bounded.
fn input(args: &Args, i: usize, what: &str) -> Result<String, JsError> {
    let text = args.string(i, what)?;
    if text.len() > MAX_INPUT_BYTES {
        return Err(invalid(format!(
            "{what} is longer than {MAX_INPUT_BYTES} bytes"
        )));
    }
    Ok(text)
}

fn key_of(args: &Args, size: usize) -> Result<Vec<u8>, JsError> {
    let key = args.string(1, "key")?.into_bytes();
    if key.len() != size {
        return Err(invalid(format!("expects key {size} bytes long")));
    }
    Ok(key)
}

/// Nakama's AES: the input padded with spaces to a multiple of 4 bytes, encrypted with AES-CFB
/// under a random IV; the IV and the cipher text, base64.
fn aes_encrypt(size: usize, args: &Args) -> Result<String, JsError> {
    let mut data = input(args, 0, "input")?.into_bytes();
    let key = key_of(args, size)?;
    while data.len() % 4 != 0 {
        data.push(b' ');
    }
    let mut iv = [0u8; 16];
    rand::fill(&mut iv[..]);
    match size {
        16 => cfb_mode::Encryptor::<aes::Aes128>::new_from_slices(&key, &iv)
            .map_err(|e| invalid(format!("error creating cipher block: {e}")))?
            .encrypt(&mut data),
        _ => cfb_mode::Encryptor::<aes::Aes256>::new_from_slices(&key, &iv)
            .map_err(|e| invalid(format!("error creating cipher block: {e}")))?
            .encrypt(&mut data),
    }
    let mut out = iv.to_vec();
    out.extend_from_slice(&data);
    Ok(STANDARD.encode(out))
}

fn aes_decrypt(size: usize, args: &Args) -> Result<String, JsError> {
    let text = input(args, 0, "input")?;
    let key = key_of(args, size)?;
    let decoded = STANDARD
        .decode(text.trim())
        .map_err(|e| invalid(format!("error decoding cipher text: {e}")))?;
    if decoded.len() < 16 {
        return Err(invalid("error decoding cipher text: shorter than its IV"));
    }
    let (iv, rest) = decoded.split_at(16);
    let mut data = rest.to_vec();
    match size {
        16 => cfb_mode::Decryptor::<aes::Aes128>::new_from_slices(&key, iv)
            .map_err(|e| invalid(format!("error creating cipher block: {e}")))?
            .decrypt(&mut data),
        _ => cfb_mode::Decryptor::<aes::Aes256>::new_from_slices(&key, iv)
            .map_err(|e| invalid(format!("error creating cipher block: {e}")))?
            .decrypt(&mut data),
    }
    // Nakama answers the bytes as a string: bytes that are not UTF-8 (a wrong key) come back
    // replaced, not as an error.
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// `jwtGenerate(algorithm, signingKey, claims)`: HS256 with the key's bytes, or RS256 with a
/// PKCS#8 PEM private key.
fn jwt_generate(args: &Args) -> Result<Value, JsError> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let algorithm = match args.string(0, "algorithm")?.as_str() {
        "HS256" => Algorithm::HS256,
        "RS256" => Algorithm::RS256,
        _ => {
            return Err(invalid(
                "unsupported algo type - only allowed 'HS256', 'RS256'.",
            ))
        }
    };
    let key = args.string(1, "signingKey")?;
    if key.is_empty() {
        return Err(invalid("signing key cannot be empty"));
    }
    let claims = args.get(2);
    if !claims.is_object() {
        return Err(invalid("claims must be an object"));
    }
    let key = match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(key.as_bytes())
            .map_err(|e| invalid(format!("could not parse private key: {e}")))?,
        _ => EncodingKey::from_secret(key.as_bytes()),
    };
    let token = jsonwebtoken::encode(&Header::new(algorithm), claims, &key)
        .map_err(|e| JsError::new(format!("error signing token: {e}"), 13))?;
    Ok(json!(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(values: Value) -> Args {
        Args(values.as_array().expect("array").clone())
    }

    #[test]
    fn aes_round_trips_and_refuses_keys_of_the_wrong_size() {
        for (size, key) in [
            (16, "0123456789abcdef"),
            (32, "0123456789abcdef0123456789abcdef"),
        ] {
            let sealed = aes_encrypt(size, &args(json!(["secret payload", key]))).expect("sealed");
            let opened = aes_decrypt(size, &args(json!([sealed, key]))).expect("opened");
            // Padded with spaces to a multiple of 4, as Nakama pads.
            assert_eq!(opened, "secret payload  ");
            assert!(aes_encrypt(size, &args(json!(["x", "short"]))).is_err());
        }
    }

    #[test]
    fn bcrypt_hashes_compare_and_a_bad_hash_does_not_match() {
        let hash = call("bcryptHash", &args(json!(["hunter2"]))).expect("hash");
        let hash = hash.as_str().expect("text");
        assert!(hash.starts_with("$2"), "{hash}");
        let ok = call("bcryptCompare", &args(json!([hash, "hunter2"]))).expect("compare");
        assert_eq!(ok, json!(true));
        let no = call("bcryptCompare", &args(json!([hash, "hunter3"]))).expect("compare");
        assert_eq!(no, json!(false));
        let junk = call("bcryptCompare", &args(json!(["junk", "hunter2"]))).expect("compare");
        assert_eq!(junk, json!(false));
        assert_eq!(
            call("bcryptCompare", &args(json!(["", "x"])))
                .unwrap_err()
                .code,
            3
        );
    }

    #[test]
    fn hs256_tokens_verify_and_bad_algorithms_are_refused() {
        let token = call(
            "jwtGenerate",
            &args(json!(["HS256", "key", {"sub": "player", "n": 3}])),
        )
        .expect("token");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let decoded = jsonwebtoken::decode::<Value>(
            token.as_str().expect("text"),
            &jsonwebtoken::DecodingKey::from_secret(b"key"),
            &validation,
        )
        .expect("verifies");
        assert_eq!(decoded.claims, json!({"sub": "player", "n": 3}));
        assert!(call("jwtGenerate", &args(json!(["none", "key", {}]))).is_err());
        assert!(call("jwtGenerate", &args(json!(["HS256", "", {}]))).is_err());
    }
}
