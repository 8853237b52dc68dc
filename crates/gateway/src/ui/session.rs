//! Page sessions any gateway replica accepts. The session is the cookie itself, sealed with a
//! secret every replica shares (`gateway.ui_session_secret`), so a load balancer may send each
//! request of a person to another replica: no replica keeps sessions in memory.
//!
//! A sealed session holds a random id, when it expires and the API key entered on the sign-in
//! form (none before signing in, or in dev mode). The key is encrypted (the browser holds no
//! readable key) and the whole is authenticated: a cookie changed in any byte, sealed with
//! another secret, or past its expiry is refused, and the visitor starts a new session. The
//! CSRF token of a session is derived from its id with the same secret, so every replica
//! computes the same token, and a token of one session is worthless in another.
//!
//! The construction uses SHA-256 only (no cipher crate): HMAC-SHA256 (RFC 2104) keyed with
//! three keys derived from the secret, one for each use: as a pseudo-random function in counter
//! mode over the session id (the keystream the key is XORed with), for the tag over the id,
//! the expiry and the ciphertext (encrypt-then-MAC, checked in constant time before anything
//! is decrypted), and for the CSRF token. The id is 128 random bits, new at every sign-in and
//! sign-out; refreshing a session's expiry keeps its id and its plaintext, so the same
//! keystream never covers two different keys.
//!
//! A sealed session is a bearer credential until it expires: signing out gives the browser a
//! new session without the key, but a copy of the old cookie stays valid until its expiry
//! (`SESSION_LIFETIME`). The key itself is checked on every request, so revoking it ends every
//! session that holds it at once.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// How long a session lives after it was sealed; one used after half of it is resealed with a
/// new expiry, so a session in use does not end.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The longest API key a session holds (a cookie must stay under 4 KB).
pub const MAX_KEY_BYTES: usize = 1024;

/// The fewest bytes a configured secret has.
pub const MIN_SECRET_BYTES: usize = 32;

const VERSION: u8 = 1;
const ID_BYTES: usize = 16;
const TAG_BYTES: usize = 32;
const HEADER: usize = 1 + ID_BYTES + 8;

/// HMAC-SHA256 (RFC 2104) of the concatenated `parts`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for part in parts {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Whether two byte strings are equal, in time independent of where they differ.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One visitor's session, as its cookie holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Random; the CSRF token is derived from it.
    pub id: [u8; ID_BYTES],
    /// Unix seconds after which the session is refused.
    pub expires: i64,
    /// The API key entered on the sign-in form.
    pub key: Option<String>,
}

impl Session {
    /// A new session without a key, expiring `SESSION_LIFETIME` after `now`.
    pub fn new(now: i64) -> Self {
        Self {
            id: *uuid::Uuid::new_v4().as_bytes(),
            expires: now + SESSION_LIFETIME.as_secs() as i64,
            key: None,
        }
    }

    /// Whether it should be resealed with a later expiry (less than half its life left).
    pub fn needs_refresh(&self, now: i64) -> bool {
        self.expires - now < SESSION_LIFETIME.as_secs() as i64 / 2
    }
}

/// The keys sessions are sealed with, derived from the secret every replica shares.
pub struct SessionKeys {
    encrypt: [u8; 32],
    authenticate: [u8; 32],
    csrf: [u8; 32],
}

impl SessionKeys {
    /// The keys of `secret` (the configured `gateway.ui_session_secret`).
    pub fn new(secret: &[u8]) -> Self {
        let derive = |label: &str| hmac_sha256(secret, &[b"thinkus memory page session v1: ", label.as_bytes()]);
        Self {
            encrypt: derive("encrypt"),
            authenticate: derive("authenticate"),
            csrf: derive("csrf"),
        }
    }

    /// Keys of a random secret: sessions only this process accepts (no secret configured).
    pub fn random() -> Self {
        let secret: Vec<u8> = (0..4).flat_map(|_| *uuid::Uuid::new_v4().as_bytes()).collect();
        Self::new(&secret)
    }

    fn keystream(&self, id: &[u8; ID_BYTES], data: &mut [u8]) {
        for (counter, chunk) in data.chunks_mut(32).enumerate() {
            let block = hmac_sha256(&self.encrypt, &[id, &(counter as u32).to_be_bytes()]);
            for (byte, key) in chunk.iter_mut().zip(block) {
                *byte ^= key;
            }
        }
    }

    /// The cookie value of `session`.
    pub fn seal(&self, session: &Session) -> String {
        let mut out = Vec::with_capacity(HEADER + 1 + MAX_KEY_BYTES + TAG_BYTES);
        out.push(VERSION);
        out.extend_from_slice(&session.id);
        out.extend_from_slice(&session.expires.to_be_bytes());
        let mut plain = Vec::new();
        if let Some(key) = &session.key {
            plain.push(1);
            plain.extend_from_slice(key.as_bytes());
        } else {
            plain.push(0);
        }
        self.keystream(&session.id, &mut plain);
        out.extend_from_slice(&plain);
        let tag = hmac_sha256(&self.authenticate, &[&out]);
        out.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The session of a cookie value, if these keys sealed it and it has not expired at `now`.
    pub fn open(&self, cookie: &str, now: i64) -> Option<Session> {
        if cookie.len() > 4096 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cookie).ok()?;
        if bytes.len() < HEADER + 1 + TAG_BYTES || bytes[0] != VERSION {
            return None;
        }
        let (sealed, tag) = bytes.split_at(bytes.len() - TAG_BYTES);
        if !same_bytes(&hmac_sha256(&self.authenticate, &[sealed]), tag) {
            return None;
        }
        let id: [u8; ID_BYTES] = sealed[1..1 + ID_BYTES].try_into().ok()?;
        let expires = i64::from_be_bytes(sealed[1 + ID_BYTES..HEADER].try_into().ok()?);
        if expires <= now {
            return None;
        }
        let mut plain = sealed[HEADER..].to_vec();
        self.keystream(&id, &mut plain);
        let key = match plain.split_first()? {
            (0, []) => None,
            (1, key) => Some(String::from_utf8(key.to_vec()).ok()?),
            _ => return None,
        };
        Some(Session { id, expires, key })
    }

    /// The CSRF token of a session: the same on every replica, another for every session.
    pub fn csrf(&self, session: &Session) -> String {
        hex::encode(hmac_sha256(&self.csrf, &[&session.id]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1, 2 and 6 (a key longer than a block).
        assert_eq!(
            hex::encode(hmac_sha256(&[0x0b; 20], &[b"Hi There"])),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_sealed_session_opens_with_the_same_secret_only() {
        let now = 1_764_000_000;
        let keys = SessionKeys::new(b"a secret every replica of this gateway shares");
        let replica = SessionKeys::new(b"a secret every replica of this gateway shares");
        let mut session = Session::new(now);
        session.key = Some("acme-page-key".into());
        let cookie = keys.seal(&session);
        assert!(!cookie.contains("acme"), "the key is not readable in the cookie");
        assert!(
            !String::from_utf8_lossy(&URL_SAFE_NO_PAD.decode(&cookie).unwrap()).contains("acme-page-key"),
            "nor in its bytes"
        );
        assert_eq!(replica.open(&cookie, now + 60), Some(session.clone()));
        assert_eq!(keys.csrf(&session), replica.csrf(&session));
        assert_eq!(keys.csrf(&session).len(), 64);
        assert_ne!(keys.csrf(&session), keys.csrf(&Session::new(now)));

        // Another secret, any changed byte, an expired one, garbage: refused.
        assert_eq!(
            SessionKeys::new(b"another secret of another gateway!!").open(&cookie, now),
            None
        );
        let mut bytes = URL_SAFE_NO_PAD.decode(&cookie).unwrap();
        for at in [0, 5, HEADER - 1, HEADER + 3, bytes.len() - 1] {
            bytes[at] ^= 1;
            assert_eq!(keys.open(&URL_SAFE_NO_PAD.encode(&bytes), now), None, "byte {at}");
            bytes[at] ^= 1;
        }
        assert_eq!(keys.open(&cookie, session.expires), None, "expired");
        assert_eq!(keys.open("", now), None);
        assert_eq!(keys.open("not base64 at all!", now), None);
        assert_eq!(keys.open(&"A".repeat(5000), now), None);

        // Without a key, and resealed with a later expiry: the same id, the same token.
        let anonymous = Session::new(now);
        assert_eq!(keys.open(&keys.seal(&anonymous), now), Some(anonymous.clone()));
        assert!(!anonymous.needs_refresh(now));
        assert!(anonymous.needs_refresh(now + SESSION_LIFETIME.as_secs() as i64 / 2 + 1));
        let later = Session {
            expires: anonymous.expires + 3600,
            ..anonymous.clone()
        };
        assert_eq!(keys.csrf(&later), keys.csrf(&anonymous));
        assert_eq!(SessionKeys::random().open(&keys.seal(&anonymous), now), None);
        assert!(same_bytes(b"abc", b"abc") && !same_bytes(b"abc", b"abd") && !same_bytes(b"abc", b"ab"));
    }
}
