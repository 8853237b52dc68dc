//! `Vec<f32>` in a weight file: little-endian bytes in base64, so a file keeps every bit of a
//! weight and stays a third the size of decimal text.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serializer};

pub fn encode(values: &[f32]) -> String {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> Result<Vec<f32>, String> {
    let bytes = STANDARD.decode(text).map_err(|err| format!("not base64: {err}"))?;
    if bytes.len() % 4 != 0 {
        return Err(format!("{} bytes is not a whole number of f32", bytes.len()));
    }
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err("a weight is not a finite number".into());
    }
    Ok(values)
}

pub fn serialize<S: Serializer>(values: &[f32], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&encode(values))
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
    let text = String::deserialize(deserializer)?;
    decode(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bit_survives() {
        let values = vec![0.0, -0.0, 1.5, f32::MIN_POSITIVE, -3.25e-7, 123_456.79];
        let back = decode(&encode(&values)).unwrap();
        assert_eq!(
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            back.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        assert!(decode("AAAA").is_err(), "3 bytes");
        assert!(decode(&encode(&[f32::NAN])).is_err());
    }
}
