//! Tenant authentication: API keys map to a tenant and the users it may act for.
//!
//! In dev mode a request needs no key only when the listener it came in on is bound to a
//! loopback address, its peer is a loopback address, and it carries no header a proxy adds
//! (`x-forwarded-for`, `forwarded`, `x-real-ip`...): a mesh sidecar or a reverse proxy on the
//! same host makes every remote client look local, and its headers are the only sign of it. Such
//! a request may act for any user of any tenant (the default tenant unless it names one). Every
//! other request must carry `authorization: Bearer <key>`. A key reads and writes its own
//! tenant's data only, and only for the users it lists; a service key (`any_tenant`) acts in the
//! tenant a request names. Anything else is PERMISSION_DENIED.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tonic::{Request, Status};

use crate::config::{ApiKeyConfig, AuthConfig, AuthMode, ConfigError};
use crate::error::{ApiError, ErrorCode};
use crate::model::{DEFAULT_TENANT, Scope};

/// The users a principal may act for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserGrant {
    Any,
    Only(HashSet<String>),
}

/// Who is calling, as established by authentication.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The tenant whose data the principal reads and writes.
    pub tenant: String,
    /// The users of its tenant it may act for.
    pub users: UserGrant,
    /// A service key: may act in any tenant a request names.
    pub any_tenant: bool,
    /// The first 8 hex digits of the key's hash, for logs; "dev" for loopback access.
    pub key_id: String,
    /// Requests per second allowed per process (0: the configured default).
    pub rate_per_second: f64,
    /// Requests in flight at once per process (0: the configured default).
    pub max_concurrency: usize,
    /// The bearer credential as presented, forwarded on calls to other services.
    pub credential: Option<String>,
}

impl Principal {
    /// The principal of in-process calls and loopback requests in dev mode: the default
    /// tenant, and any tenant a request names.
    pub fn dev() -> Self {
        Self {
            tenant: DEFAULT_TENANT.into(),
            users: UserGrant::Any,
            any_tenant: true,
            key_id: "dev".into(),
            rate_per_second: 0.0,
            max_concurrency: 0,
            credential: None,
        }
    }

    /// Whether the principal may act for every user (service and admin keys, dev mode).
    pub fn is_admin(&self) -> bool {
        self.users == UserGrant::Any
    }

    /// PERMISSION_DENIED unless the principal may act for `user_id`.
    pub fn authorize_user(&self, user_id: &str) -> Result<(), ApiError> {
        match &self.users {
            UserGrant::Any => Ok(()),
            UserGrant::Only(users) if users.contains(user_id) => Ok(()),
            UserGrant::Only(_) => Err(ApiError::permission_denied(format!(
                "the credentials of tenant {:?} may not act for user {user_id:?}",
                self.tenant
            ))),
        }
    }

    /// The tenant a request acts in: the one it names (`requested`, empty for none), which
    /// only a service key may set to another tenant than its own.
    pub fn tenant_for(&self, requested: &str) -> Result<String, ApiError> {
        if requested.is_empty() || requested == self.tenant {
            return Ok(self.tenant.clone());
        }
        if self.any_tenant {
            return Ok(requested.to_string());
        }
        Err(ApiError::permission_denied(format!(
            "the credentials of tenant {:?} may not act in tenant {requested:?}",
            self.tenant
        )))
    }

    /// Puts the scope in the principal's tenant (or the one it names, for a service key) and
    /// checks the principal may act for its user.
    pub fn authorize(&self, scope: &mut Scope) -> Result<(), ApiError> {
        scope.tenant_id = self.tenant_for(&scope.tenant_id)?;
        self.authorize_user(&scope.user_id)
    }

    /// PERMISSION_DENIED unless the principal may act for every user.
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::permission_denied(format!(
                "{what} across users needs a key that may act for every user"
            )))
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    keys: Vec<ApiKeyConfig>,
}

type KeyTable = HashMap<[u8; 32], Principal>;

/// Checks credentials against the configured keys.
#[derive(Debug)]
pub struct Authenticator {
    mode: AuthMode,
    config: AuthConfig,
    keys: RwLock<Arc<KeyTable>>,
}

fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The hex SHA-256 of a key, as configs store it (`thinkus keys hash` prints it).
pub fn key_sha256_hex(key: &str) -> String {
    hex::encode(hash_key(key))
}

fn build_table(config: &AuthConfig) -> Result<KeyTable, ConfigError> {
    let mut entries: Vec<(String, ApiKeyConfig)> = config
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("auth.keys[{i}]"), k.clone()))
        .collect();
    if let Some(path) = &config.keys_file {
        let text = std::fs::read_to_string(path)
            .map_err(|err| ConfigError::invalid("auth.keys_file", format!("{}: {err}", path.display())))?;
        // Never the parser's own message: it quotes the offending line, which may hold a key.
        let file: KeysFile = toml::from_str(&text).map_err(|err| {
            ConfigError::invalid(
                "auth.keys_file",
                format!("{}: {}", path.display(), crate::redact::toml_error(&err, &text)),
            )
        })?;
        entries.extend(
            file.keys
                .into_iter()
                .enumerate()
                .map(|(i, k)| (format!("{}: keys[{i}]", path.display()), k)),
        );
    }
    let mut table = KeyTable::new();
    for (key_name, entry) in entries {
        let digest: [u8; 32] = match (entry.key.is_empty(), entry.key_sha256.is_empty()) {
            (false, _) => hash_key(&entry.key),
            (true, false) => hex::decode(entry.key_sha256.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    ConfigError::invalid(
                        format!("{key_name}.key_sha256"),
                        "must be 64 hex digits (the SHA-256 of the key)",
                    )
                })?,
            (true, true) => {
                return Err(ConfigError::invalid(
                    key_name,
                    "needs key_sha256 (or key, in a keys file)",
                ));
            }
        };
        if entry.tenant.is_empty() {
            return Err(ConfigError::invalid(format!("{key_name}.tenant"), "is required"));
        }
        if entry.users.is_empty() && !entry.any_tenant {
            return Err(ConfigError::invalid(
                format!("{key_name}.users"),
                "must list user ids, or [\"*\"] for every user",
            ));
        }
        let users = if entry.any_tenant || entry.users.iter().any(|u| u == "*") {
            UserGrant::Any
        } else {
            UserGrant::Only(entry.users.iter().cloned().collect())
        };
        table.insert(
            digest,
            Principal {
                tenant: entry.tenant.clone(),
                users,
                any_tenant: entry.any_tenant,
                key_id: hex::encode(&digest[..4]),
                rate_per_second: entry.rate_per_second,
                max_concurrency: entry.max_concurrency,
                credential: None,
            },
        );
    }
    Ok(table)
}

impl Authenticator {
    pub fn from_config(config: &AuthConfig) -> Result<Self, ConfigError> {
        let table = build_table(config)?;
        if config.mode == AuthMode::ApiKey && table.is_empty() {
            return Err(ConfigError::invalid(
                "auth.keys",
                "api_key mode needs at least one key (inline or in auth.keys_file)",
            ));
        }
        Ok(Self {
            mode: config.mode,
            config: config.clone(),
            keys: RwLock::new(Arc::new(table)),
        })
    }

    /// An authenticator for tests and the embedded defaults: dev mode, no keys.
    pub fn dev() -> Self {
        Self::from_config(&AuthConfig::default()).expect("the default auth config is valid")
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Re-reads the keys file (key rotation without a restart). Keeps the old keys on error.
    pub fn reload(&self) -> Result<usize, ConfigError> {
        let table = build_table(&self.config)?;
        let count = table.len();
        *self.keys.write() = Arc::new(table);
        Ok(count)
    }

    /// Establishes the principal of a request from its bearer token and where it came from.
    pub fn authenticate(&self, bearer: Option<&str>, origin: &Origin) -> Result<Principal, ApiError> {
        if let Some(token) = bearer {
            let table = self.keys.read().clone();
            return match table.get(&hash_key(token)) {
                Some(principal) => {
                    let mut principal = principal.clone();
                    principal.credential = Some(token.to_string());
                    Ok(principal)
                }
                None if self.mode == AuthMode::Dev && table.is_empty() && origin.dev_refusal().is_none() => {
                    Ok(Principal::dev())
                }
                None => Err(ApiError::new(ErrorCode::Unauthenticated, "unknown API key")),
            };
        }
        match self.mode {
            AuthMode::Dev => match origin.dev_refusal() {
                None => Ok(Principal::dev()),
                Some(why) => Err(ApiError::new(ErrorCode::Unauthenticated, why)),
            },
            AuthMode::ApiKey => Err(ApiError::new(
                ErrorCode::Unauthenticated,
                "missing credentials: send `authorization: Bearer <key>`",
            )),
        }
    }
}

/// Where a request came from, as far as dev mode's exemption is concerned.
#[derive(Debug, Clone, Copy, Default)]
pub struct Origin {
    /// The peer's address, when the transport knows it.
    pub peer: Option<SocketAddr>,
    /// Whether the listener the request came in on is bound to a loopback address.
    pub listener_on_loopback: bool,
    /// The first proxy header the request carries, if any.
    pub proxy_header: Option<&'static str>,
}

impl Origin {
    /// The origin of a request received on `listener` from `peer` with `headers`.
    pub fn of(listener: Option<SocketAddr>, peer: Option<SocketAddr>, headers: &http::HeaderMap) -> Self {
        Self {
            peer,
            listener_on_loopback: listener.is_some_and(|addr| addr.ip().is_loopback()),
            proxy_header: proxy_header(headers),
        }
    }

    /// Why dev mode may not skip the key for this request; `None` when it may.
    fn dev_refusal(&self) -> Option<String> {
        if !self.listener_on_loopback {
            return Some(
                "dev mode accepts requests without a key only on a listener bound to loopback; \
                 configure auth.mode = \"api_key\""
                    .into(),
            );
        }
        if let Some(header) = self.proxy_header {
            return Some(format!(
                "dev mode does not accept requests without a key through a proxy (the request carries {header})"
            ));
        }
        if !self.peer.is_some_and(|addr| addr.ip().is_loopback()) {
            return Some("dev mode accepts requests without a key only from loopback addresses".into());
        }
        None
    }
}

/// Headers that proxies, load balancers and mesh sidecars add. A request that carries one was
/// relayed, so its loopback peer address says nothing about the client.
pub const PROXY_HEADERS: [&str; 12] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "x-envoy-external-address",
    "x-forwarded-client-cert",
    "l5d-client-id",
    "via",
];

/// The first proxy header among `headers`.
pub fn proxy_header(headers: &http::HeaderMap) -> Option<&'static str> {
    PROXY_HEADERS.into_iter().find(|name| headers.contains_key(*name))
}

/// The bearer token of an `authorization` header value.
pub fn parse_bearer(value: &str) -> Option<&str> {
    let value = value.trim();
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?
        .trim();
    (!token.is_empty()).then_some(token)
}

/// The bearer token of a request's `authorization` header.
pub fn bearer_from_headers(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_bearer)
}

/// The principal the serving layer ([`crate::grpc::Guarded`]) established for a request. A
/// request that did not pass through it has none: that is a wiring bug, answered
/// UNAUTHENTICATED.
pub fn principal<T>(request: &Request<T>) -> Result<Principal, Status> {
    request
        .extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no credentials were checked for this request"))
}

tokio::task_local! {
    static FORWARDED_CREDENTIAL: Option<String>;
}

/// Runs `future` so that the gRPC clients it calls forward `credential` (the caller's own
/// key) instead of this process's key: every service checks the end caller's rights.
pub async fn with_forwarded_credential<F: Future>(credential: Option<String>, future: F) -> F::Output {
    FORWARDED_CREDENTIAL.scope(credential, future).await
}

/// The credential to forward from the current task, if any.
pub fn forwarded_credential() -> Option<String> {
    FORWARDED_CREDENTIAL.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().unwrap())
    }

    fn api_key_config() -> AuthConfig {
        AuthConfig {
            mode: AuthMode::ApiKey,
            keys: vec![
                ApiKeyConfig {
                    tenant: "acme".into(),
                    users: vec!["alice".into(), "bob".into()],
                    key_sha256: key_sha256_hex("acme-secret"),
                    ..Default::default()
                },
                ApiKeyConfig {
                    tenant: "platform".into(),
                    users: vec!["*".into()],
                    key_sha256: key_sha256_hex("service-secret"),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn local(addr: &str) -> Origin {
        Origin {
            peer: peer(addr),
            listener_on_loopback: true,
            proxy_header: None,
        }
    }

    #[test]
    fn dev_mode_is_open_on_loopback_only() {
        let auth = Authenticator::dev();
        assert!(auth.authenticate(None, &local("127.0.0.1:5000")).is_ok());
        assert!(auth.authenticate(None, &local("[::1]:5000")).is_ok());
        let err = auth.authenticate(None, &local("10.0.0.7:5000")).unwrap_err();
        assert_eq!(err.code, ErrorCode::Unauthenticated);
        assert!(auth.authenticate(None, &Origin::default()).is_err());
    }

    #[test]
    fn dev_mode_needs_a_loopback_listener_and_no_proxy() {
        let auth = Authenticator::dev();
        let headers = http::HeaderMap::new();
        let bound = |listener: &str| Origin::of(Some(listener.parse().unwrap()), peer("127.0.0.1:5000"), &headers);
        assert!(auth.authenticate(None, &bound("127.0.0.1:50051")).is_ok());
        let err = auth.authenticate(None, &bound("0.0.0.0:50051")).unwrap_err();
        assert_eq!(err.code, ErrorCode::Unauthenticated);
        assert!(err.message.contains("bound to loopback"), "{}", err.message);
        // An unknown key from loopback does not fall back to dev mode on an open listener.
        assert!(auth.authenticate(Some("guess"), &bound("0.0.0.0:50051")).is_err());

        for name in PROXY_HEADERS {
            let mut headers = http::HeaderMap::new();
            headers.insert(name, http::HeaderValue::from_static("203.0.113.9"));
            let origin = Origin::of(
                Some("127.0.0.1:50051".parse().unwrap()),
                peer("127.0.0.1:5000"),
                &headers,
            );
            let err = auth.authenticate(None, &origin).unwrap_err();
            assert_eq!(err.code, ErrorCode::Unauthenticated, "{name}");
            assert!(err.message.contains(name), "{name}: {}", err.message);
            assert!(auth.authenticate(Some("guess"), &origin).is_err(), "{name}");
        }
        let mut headers = http::HeaderMap::new();
        headers.insert("X-Forwarded-For", http::HeaderValue::from_static("203.0.113.9"));
        assert_eq!(
            proxy_header(&headers),
            Some("x-forwarded-for"),
            "header names are case-insensitive"
        );
    }

    #[test]
    fn keys_map_to_tenants_and_their_users() {
        let auth = Authenticator::from_config(&api_key_config()).unwrap();
        let remote = local("10.0.0.7:1");
        let acme = auth.authenticate(Some("acme-secret"), &remote).unwrap();
        assert_eq!(acme.tenant, "acme");
        assert!(acme.authorize_user("alice").is_ok());
        let err = acme.authorize_user("mallory").unwrap_err();
        assert_eq!(err.code, ErrorCode::PermissionDenied);
        assert_eq!(acme.credential.as_deref(), Some("acme-secret"));

        let service = auth.authenticate(Some("service-secret"), &Origin::default()).unwrap();
        assert!(service.is_admin());
        assert!(service.authorize_user("anyone").is_ok());

        assert_eq!(
            auth.authenticate(Some("wrong"), &local("127.0.0.1:1"))
                .unwrap_err()
                .code,
            ErrorCode::Unauthenticated
        );
        assert_eq!(
            auth.authenticate(None, &local("127.0.0.1:1")).unwrap_err().code,
            ErrorCode::Unauthenticated,
            "api_key mode has no loopback exemption"
        );
    }

    #[test]
    fn keys_act_in_their_tenant_and_service_keys_in_any() {
        let mut config = api_key_config();
        config.keys.push(ApiKeyConfig {
            tenant: "platform".into(),
            any_tenant: true,
            key_sha256: key_sha256_hex("gateway-secret"),
            ..Default::default()
        });
        let auth = Authenticator::from_config(&config).unwrap();
        let acme = auth.authenticate(Some("acme-secret"), &Origin::default()).unwrap();
        let mut scope = Scope::new("alice", "cto").with_tenant("");
        acme.authorize(&mut scope).unwrap();
        assert_eq!(scope.tenant_id, "acme", "an empty tenant is the key's own");
        let mut other = Scope::new("alice", "cto").with_tenant("globex");
        let err = acme.authorize(&mut other).unwrap_err();
        assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
        assert!(err.message.contains("globex"), "{}", err.message);

        let admin = auth.authenticate(Some("service-secret"), &Origin::default()).unwrap();
        assert!(admin.is_admin());
        assert!(
            admin
                .authorize(&mut Scope::new("bob", "cto").with_tenant("acme"))
                .is_err(),
            "users = [\"*\"] is every user of its own tenant, not of every tenant"
        );

        let service = auth.authenticate(Some("gateway-secret"), &Origin::default()).unwrap();
        assert!(service.is_admin(), "a service key acts for every user");
        let mut named = Scope::new("alice", "cto").with_tenant("acme");
        service.authorize(&mut named).unwrap();
        assert_eq!(named.tenant_id, "acme");
        let mut unnamed = Scope::new("alice", "cto").with_tenant("");
        service.authorize(&mut unnamed).unwrap();
        assert_eq!(unnamed.tenant_id, "platform");

        let dev = Principal::dev();
        let mut scope = Scope::new("alice", "cto").with_tenant("");
        dev.authorize(&mut scope).unwrap();
        assert_eq!(scope.tenant_id, DEFAULT_TENANT, "dev mode is the default tenant");
    }

    #[test]
    fn keys_file_is_read_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(&path, "[[keys]]\ntenant = \"t1\"\nusers = [\"u1\"]\nkey = \"k-one\"\n").unwrap();
        let config = AuthConfig {
            mode: AuthMode::ApiKey,
            keys_file: Some(path.clone()),
            ..Default::default()
        };
        let auth = Authenticator::from_config(&config).unwrap();
        let anywhere = Origin::default();
        assert!(auth.authenticate(Some("k-one"), &anywhere).is_ok());
        std::fs::write(&path, "[[keys]]\ntenant = \"t1\"\nusers = [\"u1\"]\nkey = \"k-two\"\n").unwrap();
        assert_eq!(auth.reload().unwrap(), 1);
        assert!(auth.authenticate(Some("k-one"), &anywhere).is_err(), "rotated out");
        assert!(auth.authenticate(Some("k-two"), &anywhere).is_ok());
    }

    #[test]
    fn a_keys_file_with_a_syntax_error_does_not_reveal_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let secret = "tk_8f1b2c3d4e5f60718293a4b5c6d7e8f9";
        // An unclosed array: the parser's own message quotes the line with the key.
        std::fs::write(
            &path,
            format!("[[keys]]\ntenant = \"t1\"\nusers = [\"u1\"\nkey = \"{secret}\"\n"),
        )
        .unwrap();
        let raw = toml::from_str::<KeysFile>(&std::fs::read_to_string(&path).unwrap())
            .unwrap_err()
            .to_string();
        assert!(raw.contains(secret), "the parser quotes the line: {raw}");
        let config = AuthConfig {
            mode: AuthMode::ApiKey,
            keys_file: Some(path.clone()),
            ..Default::default()
        };
        let err = Authenticator::from_config(&config).unwrap_err().to_string();
        assert!(!err.contains(secret) && !err.contains("tk_"), "{err}");
        assert!(err.starts_with("auth.keys_file: ") && err.contains("line 4"), "{err}");
        // A value of the wrong type is quoted by serde: redacted too.
        std::fs::write(&path, format!("[[keys]]\ntenant = \"t1\"\nusers = \"{secret}\"\n")).unwrap();
        let err = Authenticator::from_config(&config).unwrap_err().to_string();
        assert!(!err.contains(secret), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn bad_key_config_names_the_key() {
        let mut config = api_key_config();
        config.keys[1].key_sha256 = "not-hex".into();
        let err = Authenticator::from_config(&config).unwrap_err().to_string();
        assert!(err.starts_with("auth.keys[1].key_sha256"), "{err}");
        let config = AuthConfig {
            mode: AuthMode::ApiKey,
            ..Default::default()
        };
        assert!(
            Authenticator::from_config(&config)
                .unwrap_err()
                .to_string()
                .starts_with("auth.keys")
        );
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(parse_bearer("Bearer abc"), Some("abc"));
        assert_eq!(parse_bearer("bearer  abc "), Some("abc"));
        assert_eq!(parse_bearer("Basic abc"), None);
        assert_eq!(parse_bearer("Bearer "), None);
    }

    #[tokio::test]
    async fn credentials_are_forwarded_within_a_task() {
        assert_eq!(forwarded_credential(), None);
        let inner = with_forwarded_credential(Some("k".into()), async { forwarded_credential() }).await;
        assert_eq!(inner.as_deref(), Some("k"));
    }
}
