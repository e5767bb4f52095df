"""The dev server speaks the wire contract of dex-python-sdk 1.23.0 and uses no private SDK module."""

import ast
import importlib.metadata
from pathlib import Path

import dex
import pytest
from dex.dexpb import dex_pb2 as pb

import dex_agents.devserver

pytestmark = pytest.mark.integration

PACKAGE = Path(dex_agents.devserver.__file__).parent


def test_sdk_is_the_pinned_version() -> None:
    assert importlib.metadata.version("dex-python-sdk") == "1.23.0"


def test_no_private_sdk_imports() -> None:
    private: list[str] = []
    for source in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            private += [f"{source.name}: {name}" for name in names if name.startswith("dex._")]
    assert private == []


def test_the_services_devserver_serves_exist_in_the_wire_contract() -> None:
    services = {service.name: {m.name for m in service.methods} for service in pb.DESCRIPTOR.services_by_name.values()}
    assert {
        "GetServerInfo",
        "SyncAttributeIndexes",
        "StartFlow",
        "StopFlow",
        "InvokeRPC",
        "WaitForFlow",
        "GetFlowSummary",
        "GetHistoryEvents",
        "SkipTimer",
        "WriteStream",
        "ReadStream",
        "ListStreamMessages",
        "HealthCheck",
    } <= services["FlowService"]
    assert services["WorkerTaskService"] == {"PollWorkerTask"}
    assert {"InvokeWaitForMethod", "InvokeExecuteMethod", "InvokeWorkerRPC"} <= services["WorkerService"]
    assert dex.AsyncWorker is not None
