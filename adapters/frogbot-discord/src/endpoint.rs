//! The HTTP interactions endpoint: Ed25519 request verification and the PING handshake.
//!
//! Discord can deliver interactions by POST to an "Interactions Endpoint URL" instead of the
//! gateway. Every request carries `X-Signature-Ed25519` and `X-Signature-Timestamp`; a request
//! whose signature does not verify against the application's public key must be answered 401.
//! A PING (type 1) is answered `{"type": 1}` ([`PONG`]); anything else is an interaction to convert
//! with [`convert::interaction`](crate::convert::interaction) and acknowledge in the HTTP response
//! (e.g. `{"type": 6}`, the deferred update) within 3 seconds.

use serenity::interactions_endpoint::Verifier;
use serenity::model::application::Interaction as DiscordInteraction;

use crate::Error;
use crate::convert::parse_interaction_create;

/// The body answering a PING.
pub const PONG: &str = r#"{"type":1}"#;

/// What a verified endpoint request is.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointRequest {
    /// Discord checks the endpoint: answer [`PONG`].
    Ping,
    /// An interaction (boxed: serenity's interaction types are large).
    Interaction(Box<DiscordInteraction>),
}

/// Verifies interactions-endpoint requests with the application's public key.
#[derive(Clone)]
pub struct EndpointVerifier {
    verifier: Verifier,
}

impl std::fmt::Debug for EndpointVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointVerifier").finish_non_exhaustive()
    }
}

fn parse_hex_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

impl EndpointVerifier {
    /// From the application's public key (64 hex digits, as the developer portal shows it).
    pub fn new(public_key_hex: &str) -> Result<Self, Error> {
        let key = parse_hex_key(public_key_hex)
            .ok_or_else(|| Error::Malformed("public key must be 64 hex digits".into()))?;
        let verifier =
            Verifier::try_new(key).map_err(|e| Error::Malformed(format!("public key: {e}")))?;
        Ok(EndpointVerifier { verifier })
    }

    /// Checks the `X-Signature-Ed25519` / `X-Signature-Timestamp` headers against the raw body.
    pub fn verify(&self, signature: &str, timestamp: &str, body: &[u8]) -> Result<(), Error> {
        self.verifier
            .verify(signature, timestamp, body)
            .map_err(|()| Error::BadSignature)
    }

    /// Verifies a request and parses its body: [`EndpointRequest::Ping`] or an interaction.
    pub fn receive(
        &self,
        signature: &str,
        timestamp: &str,
        body: &[u8],
    ) -> Result<EndpointRequest, Error> {
        self.verify(signature, timestamp, body)?;
        let text = std::str::from_utf8(body).map_err(|e| Error::Malformed(e.to_string()))?;
        match parse_interaction_create(text)? {
            DiscordInteraction::Ping(_) => Ok(EndpointRequest::Ping),
            other => Ok(EndpointRequest::Interaction(Box::new(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};
    use serde_json::json;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn signed(key: &SigningKey, timestamp: &str, body: &str) -> String {
        hex(&key
            .sign(&[timestamp.as_bytes(), body.as_bytes()].concat())
            .to_bytes())
    }

    #[test]
    fn verifies_signatures_and_answers_pings() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1})
            .to_string();
        let signature = signed(&key, "1700000000", &ping);
        assert!(matches!(
            verifier.receive(&signature, "1700000000", ping.as_bytes()),
            Ok(EndpointRequest::Ping)
        ));
        // Another timestamp, a changed body, a foreign key or garbage: 401.
        assert!(matches!(
            verifier.receive(&signature, "1700000001", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify(&signature, "1700000000", b"{}"),
            Err(Error::BadSignature)
        ));
        let other = SigningKey::from_bytes(&[9; 32]);
        assert!(matches!(
            verifier.verify(&signed(&other, "1", &ping), "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify("zz", "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(EndpointVerifier::new("abc").is_err());
        // A signed but malformed body is an error, not a panic.
        let bad = r#"{"type": 3}"#;
        assert!(matches!(
            verifier.receive(&signed(&key, "1", bad), "1", bad.as_bytes()),
            Err(Error::Malformed(_))
        ));
    }
}
