//! The services a process can run.

use std::fmt;
use std::str::FromStr;

use thinkus_backends::Needs;

/// One of the six services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceKind {
    MemoryController,
    Retriever,
    KnowledgeManager,
    Artifact,
    Summary,
    Gateway,
}

impl ServiceKind {
    pub const ALL: [ServiceKind; 6] = [
        ServiceKind::MemoryController,
        ServiceKind::Retriever,
        ServiceKind::KnowledgeManager,
        ServiceKind::Artifact,
        ServiceKind::Summary,
        ServiceKind::Gateway,
    ];

    /// The name used on the command line, in Helm and as the OpenTelemetry service name suffix.
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::MemoryController => "memory-controller",
            ServiceKind::Retriever => "retriever",
            ServiceKind::KnowledgeManager => "knowledge-manager",
            ServiceKind::Artifact => "artifact",
            ServiceKind::Summary => "summary",
            ServiceKind::Gateway => "gateway",
        }
    }

    /// The fully qualified gRPC service name (health checks report per service).
    pub fn grpc_name(self) -> &'static str {
        match self {
            ServiceKind::MemoryController => "thinkus.controller.v1.MemoryControllerService",
            ServiceKind::Retriever => "thinkus.retriever.v1.RetrieverService",
            ServiceKind::KnowledgeManager => "thinkus.knowledge.v1.KnowledgeManagerService",
            ServiceKind::Artifact => "thinkus.artifact.v1.ArtifactService",
            ServiceKind::Summary => "thinkus.summary.v1.SummaryService",
            ServiceKind::Gateway => "thinkus.gateway.v1.GatewayService",
        }
    }

    /// The backends the service opens itself.
    pub fn needs(self) -> Needs {
        match self {
            // The embedder feeds the learned heads a message that comes without its vector.
            ServiceKind::MemoryController => Needs {
                embedder: true,
                ..Default::default()
            },
            ServiceKind::Retriever | ServiceKind::KnowledgeManager => Needs {
                store: true,
                vectors: true,
                embedder: true,
                blobs: false,
            },
            ServiceKind::Artifact => Needs {
                store: true,
                blobs: true,
                ..Default::default()
            },
            ServiceKind::Summary => Needs {
                store: true,
                ..Default::default()
            },
            // The gateway embeds each user message once, for the controller and the retriever.
            ServiceKind::Gateway => Needs {
                store: true,
                embedder: true,
                ..Default::default()
            },
        }
    }

    /// The services it cannot answer without (the others it calls are optional: the gateway
    /// answers PrepareTurn without the controller, the artifacts or the summaries, and says so
    /// in the trace). A remote one that does not report SERVING holds this service NOT_SERVING.
    pub fn requires(self) -> &'static [ServiceKind] {
        match self {
            ServiceKind::Gateway => &[ServiceKind::Retriever, ServiceKind::KnowledgeManager],
            _ => &[],
        }
    }

    /// The services it calls.
    pub fn depends_on(self) -> &'static [ServiceKind] {
        match self {
            ServiceKind::Gateway => &[
                ServiceKind::MemoryController,
                ServiceKind::Retriever,
                ServiceKind::KnowledgeManager,
                ServiceKind::Artifact,
                ServiceKind::Summary,
            ],
            ServiceKind::Summary => &[ServiceKind::KnowledgeManager],
            _ => &[],
        }
    }
}

impl fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ServiceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServiceKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            format!(
                "unknown service {s:?} (one of {})",
                ServiceKind::ALL.map(|k| k.name()).join(", ")
            )
        })
    }
}
