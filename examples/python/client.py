#!/usr/bin/env python3
"""A Thinkus Memory client in Python, generated from proto/ with grpcio-tools (./gen.sh).

It remembers one memory (KnowledgeManagerService.Remember), recalls it
(RetrieverService.Recall) and prepares a turn that needs it (GatewayService.PrepareTurn),
printing each result. It exits 0 when the memory came back from both reads, 1 otherwise.

    ./gen.sh && python client.py --addr 127.0.0.1:50051 [--api-key KEY] [--wait 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("THINKUS_PY_GEN", os.path.join(HERE, "gen")))

try:
    import grpc
    from thinkus.common.v1 import memory_pb2, scope_pb2
    from thinkus.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from thinkus.knowledge.v1 import knowledge_pb2, knowledge_pb2_grpc
    from thinkus.retriever.v1 import retriever_pb2, retriever_pb2_grpc
except ImportError as err:  # pragma: no cover - setup problem, not a test outcome
    sys.exit(f"client: {err}: pip install -r requirements.txt, then ./gen.sh")

WRITTEN = {
    knowledge_pb2.WRITE_OUTCOME_CREATED,
    knowledge_pb2.WRITE_OUTCOME_REINFORCED,
    knowledge_pb2.WRITE_OUTCOME_REPLACED_OLDER,
}


class Failure(Exception):
    """A check that did not hold."""


def wait_serving(channel: grpc.Channel, seconds: float) -> None:
    """Waits until grpc.health.v1.Health/Check answers SERVING for the whole server.

    The health messages are encoded by hand (an empty request; status = field 1, SERVING = 1)
    so that the client needs no code generated from the health proto.
    """
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=lambda raw: raw,
        response_deserializer=lambda raw: raw,
    )
    deadline = time.monotonic() + seconds
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = check(b"", timeout=2)
            if answer == b"\x08\x01":
                return
            last = f"status bytes {answer!r}"
        except grpc.RpcError as err:
            last = f"{err.code().name}: {err.details()}"
        time.sleep(0.25)
    raise Failure(f"the server at the address is not SERVING after {seconds:.0f}s ({last})")


def run(args: argparse.Namespace) -> None:
    metadata = [("authorization", f"Bearer {args.api_key}")] if args.api_key else []
    channels = {addr: grpc.insecure_channel(addr) for addr in {args.knowledge, args.retriever, args.gateway}}
    try:
        if args.wait:
            for channel in channels.values():
                wait_serving(channel, args.wait)
        knowledge = knowledge_pb2_grpc.KnowledgeManagerServiceStub(channels[args.knowledge])
        retriever = retriever_pb2_grpc.RetrieverServiceStub(channels[args.retriever])
        gateway = gateway_pb2_grpc.GatewayServiceStub(channels[args.gateway])
        steps(args, metadata, knowledge, retriever, gateway)
    finally:
        for channel in channels.values():
            channel.close()


def steps(args: argparse.Namespace, metadata: list, knowledge, retriever, gateway) -> None:
    """Remember, recall, prepare a turn; raises Failure when a check does not hold."""

    marker = uuid.uuid4().hex[:8]
    scope = scope_pb2.Scope(user_id=args.user, role_id=args.role, project_id=args.project)
    content = f"The boss wants the weekly report (ref {marker}) every Monday at 9 am, in English."

    # 1. Remember.
    remembered = knowledge.Remember(
        knowledge_pb2.RememberRequest(
            scope=scope,
            memory=knowledge_pb2.MemoryDraft(
                type=memory_pb2.MEMORY_TYPE_USER_PREFERENCE,
                content=content,
                importance=4,
                tags=["reports", f"ref-{marker}"],
            ),
            request_id=f"py-client-{marker}",
        ),
        metadata=metadata,
        timeout=args.timeout,
    )
    result = remembered.result
    outcome = knowledge_pb2.WriteOutcome.Name(result.outcome)
    print(f"remember: {outcome} {result.memory.id} {result.memory.summary!r} ({result.reason or 'ok'})")
    if result.outcome not in WRITTEN or not result.memory.id:
        raise Failure(f"Remember did not write the memory: {outcome} {result.reason!r}")
    memory_id = result.memory.id

    # 2. Recall.
    recalled = retriever.Recall(
        retriever_pb2.RecallRequest(scope=scope, query="When does the boss want the weekly report?"),
        metadata=metadata,
        timeout=args.timeout,
    )
    print(
        f"recall: {len(recalled.catalog)} of {recalled.candidates} candidates, "
        f"{recalled.tokens_used}/{recalled.budget_tokens} tokens ({recalled.tokenizer})"
    )
    for entry in recalled.catalog:
        kind = memory_pb2.MemoryType.Name(entry.type)
        print(f"  {entry.score:6.3f}  {entry.id}  {kind}  {entry.summary!r}  {entry.relative_time}")
    if memory_id not in [entry.id for entry in recalled.catalog]:
        raise Failure(f"Recall did not return {memory_id}")

    # 3. Prepare a turn that needs the memory.
    if args.skip_prepare_turn:
        print("prepare-turn: skipped")
        return
    session = f"py-{marker}"
    prepared = gateway.PrepareTurn(
        gateway_pb2.PrepareTurnRequest(
            scope=scope_pb2.Scope(
                user_id=args.user, role_id=args.role, project_id=args.project, session_id=session
            ),
            message="Remind me: when did I say I want the weekly report?",
        ),
        metadata=metadata,
        timeout=args.timeout,
    )
    decision = prepared.trace.decision
    used = [item.id for item in prepared.trace.items if item.included]
    print(
        f"prepare-turn: {prepared.tokens_used}/{prepared.budget_tokens} tokens, "
        f"{len(prepared.sections)} sections, decision {decision.reason!r} ({decision.engine}), "
        f"timings {dict(prepared.trace.timings_ms)}"
    )
    for line in prepared.context.splitlines():
        print(f"  | {line}")
    if memory_id not in used and marker not in prepared.context:
        raise Failure(f"PrepareTurn did not put {memory_id} in the context")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", default=os.environ.get("THINKUS_ADDR", "127.0.0.1:50051"),
                        help="host:port of the all-in-one process (or of a gateway whose services share storage)")
    parser.add_argument("--api-key", default=os.environ.get("THINKUS_API_KEY"),
                        help="API key (default $THINKUS_API_KEY; dev mode on loopback needs none)")
    parser.add_argument("--knowledge", help="the knowledge manager's host:port when not --addr")
    parser.add_argument("--retriever", help="the retriever's host:port when not --addr")
    parser.add_argument("--gateway", help="the gateway's host:port when not --addr")
    parser.add_argument("--user", default="py-example-user")
    parser.add_argument("--role", default="cto")
    parser.add_argument("--project", default="")
    parser.add_argument("--timeout", type=float, default=20.0, help="deadline of each call, seconds")
    parser.add_argument("--wait", type=float, default=0.0, help="wait up to this many seconds for SERVING first")
    parser.add_argument("--skip-prepare-turn", action="store_true", help="only remember and recall")
    args = parser.parse_args()
    args.knowledge = args.knowledge or args.addr
    args.retriever = args.retriever or args.addr
    args.gateway = args.gateway or args.addr
    try:
        run(args)
    except grpc.RpcError as err:
        print(f"client: FAILED: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    except Failure as err:
        print(f"client: FAILED: {err}", file=sys.stderr)
        return 1
    print("client: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
