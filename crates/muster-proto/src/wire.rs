//! The JSON conventions of protobuf's canonical JSON mapping, which Nakama's gateway and realtime
//! JSON follow and its client SDKs expect:
//!
//! - 64-bit integers are written as strings (`"op_code":"3"`) and read from a string or a number;
//! - `bytes` are base64 (standard alphabet written; standard or URL-safe, padded or not, read);
//! - `google.protobuf.Timestamp` is an RFC 3339 string in UTC (`"2026-11-23T07:29:00Z"`);
//! - `null` reads as the field's default.

use std::fmt;

use base64::Engine as _;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The timestamp of a Unix time in milliseconds.
    pub fn from_unix_ms(ms: i64) -> Timestamp {
        Timestamp {
            seconds: ms.div_euclid(1000),
            nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
        }
    }

    /// Unix time in milliseconds (sub-millisecond precision is dropped).
    pub fn unix_ms(&self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos / 1_000_000))
    }

    fn to_datetime(self) -> Option<OffsetDateTime> {
        if !(0..1_000_000_000).contains(&self.nanos) {
            return None;
        }
        let nanos = i128::from(self.seconds) * 1_000_000_000 + i128::from(self.nanos);
        OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()
    }
}

impl Serialize for Timestamp {
    /// As Go's protojson writes it (Nakama's gateway and realtime JSON): UTC, `Z`, and 0, 3, 6
    /// or 9 fractional digits, the fewest that hold the nanoseconds exactly.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let whole = self
            .to_datetime()
            .and_then(|t| t.replace_nanosecond(0).ok())
            .and_then(|t| t.format(&Rfc3339).ok());
        let Some(whole) = whole else {
            return Err(serde::ser::Error::custom("timestamp out of range"));
        };
        let nanos = self.nanos;
        let fraction = if nanos == 0 {
            String::new()
        } else if nanos % 1_000_000 == 0 {
            format!(".{:03}", nanos / 1_000_000)
        } else if nanos % 1_000 == 0 {
            format!(".{:06}", nanos / 1_000)
        } else {
            format!(".{nanos:09}")
        };
        let text = match whole.strip_suffix('Z') {
            Some(seconds) => format!("{seconds}{fraction}Z"),
            None => whole,
        };
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let time = OffsetDateTime::parse(&text, &Rfc3339)
            .map_err(|e| de::Error::custom(format!("bad RFC 3339 timestamp {text:?}: {e}")))?;
        let nanos = time.unix_timestamp_nanos();
        let seconds = i64::try_from(nanos.div_euclid(1_000_000_000))
            .map_err(|_| de::Error::custom("timestamp out of range"))?;
        Ok(Timestamp {
            seconds,
            nanos: nanos.rem_euclid(1_000_000_000) as i32,
        })
    }
}

/// `int64` fields: written as a JSON string, read from a string or a number.
pub mod int64 {
    use super::*;

    pub fn serialize<S: Serializer>(value: &i64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
        struct Int64Visitor;
        impl Visitor<'_> for Int64Visitor {
            type Value = i64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a 64-bit integer, as a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
                Ok(v)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
                i64::try_from(v).map_err(|_| E::custom(format!("{v} does not fit in int64")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
                if v.fract() == 0.0 && v >= -(2f64.powi(63)) && v < 2f64.powi(63) {
                    Ok(v as i64)
                } else {
                    Err(E::custom(format!("{v} is not a 64-bit integer")))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
                v.trim()
                    .parse()
                    .map_err(|_| E::custom(format!("{v:?} is not a 64-bit integer")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<i64, E> {
                Ok(0)
            }
        }
        deserializer.deserialize_any(Int64Visitor)
    }
}

/// `bytes` fields: base64 in JSON.
pub mod base64_bytes {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = Option::<std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let Some(text) = text else {
            return Ok(Vec::new());
        };
        decode(&text).ok_or_else(|| de::Error::custom("bytes field is not valid base64"))
    }

    /// Decodes standard or URL-safe base64, with or without padding (as protobuf JSON allows).
    pub fn decode(text: &str) -> Option<Vec<u8>> {
        use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
        use base64::engine::DecodePaddingMode;
        const LENIENT: GeneralPurposeConfig =
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
        const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
        const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
        STANDARD
            .decode(text)
            .or_else(|_| URL_SAFE.decode(text))
            .ok()
    }
}

/// Reads `null` as the type's default (protobuf JSON treats `null` as "not set").
pub fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

pub(crate) fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = Timestamp::from_unix_ms(1_795_000_000_250);
        let json = serde_json::to_string(&t).expect("serializes");
        assert_eq!(
            json, "\"2026-11-18T11:06:40.250Z\"",
            "3, 6 or 9 digits, as protojson"
        );
        let whole = serde_json::to_string(&Timestamp::from_unix_ms(1_795_000_000_000));
        assert_eq!(whole.expect("serializes"), "\"2026-11-18T11:06:40Z\"");
        let micros = Timestamp {
            seconds: 1_795_000_000,
            nanos: 1_500,
        };
        let micros = serde_json::to_string(&micros).expect("serializes");
        assert_eq!(micros, "\"2026-11-18T11:06:40.000001500Z\"");
        let back: Timestamp = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, t);
        assert_eq!(back.unix_ms(), 1_795_000_000_250);
        let offset: Timestamp =
            serde_json::from_str("\"2026-11-18T12:06:40+01:00\"").expect("offsets are accepted");
        assert_eq!(offset.unix_ms(), 1_795_000_000_000);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
        let bad = Timestamp {
            seconds: 0,
            nanos: -1,
        };
        assert!(serde_json::to_string(&bad).is_err());
    }

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Wrapped {
        #[serde(with = "int64", default)]
        n: i64,
        #[serde(with = "base64_bytes", default)]
        b: Vec<u8>,
    }

    #[test]
    fn int64_and_bytes_follow_protobuf_json() {
        let w: Wrapped = serde_json::from_str(r#"{"n":"-42","b":"aGk="}"#).expect("strings");
        assert_eq!(
            w,
            Wrapped {
                n: -42,
                b: b"hi".to_vec()
            }
        );
        let w: Wrapped = serde_json::from_str(r#"{"n":7,"b":"aGk"}"#).expect("number, no pad");
        assert_eq!(w.n, 7);
        assert_eq!(w.b, b"hi");
        assert_eq!(
            serde_json::to_string(&w).expect("serializes"),
            r#"{"n":"7","b":"aGk="}"#
        );
        let url_safe: Wrapped = serde_json::from_str(r#"{"b":"-_8"}"#).expect("url-safe");
        assert_eq!(url_safe.b, vec![0xfb, 0xff]);
        assert!(serde_json::from_str::<Wrapped>(r#"{"n":"x"}"#).is_err());
        assert!(serde_json::from_str::<Wrapped>(r#"{"n":1.5}"#).is_err());
        assert!(serde_json::from_str::<Wrapped>(r#"{"b":"!!"}"#).is_err());
    }
}
