"""Tests run against a live ctxd: CTXD_TARGET=host:port (clients/python/ci.sh starts none; CI
passes the address of an in-memory or a PostgreSQL-backed server). No provider network."""

import os
import re
import uuid
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

import pytest  # noqa: E402

import ctxd  # noqa: E402


@pytest.fixture(scope="session")
def target() -> str:
    value = os.environ.get("CTXD_TARGET")
    if not value:
        pytest.fail("set CTXD_TARGET=host:port of a running ctxd")
    return value


@pytest.fixture
def conv_id(request) -> str:
    return f"pytest/{request.node.name[:80]}/{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(target):
    with ctxd.Client(target, tenant="pytest", timeout=20.0) as c:
        yield c


@pytest.fixture
async def aclient(target):
    async with ctxd.AsyncClient(target, tenant="pytest", timeout=20.0) as c:
        yield c


def readme_function(name: str):
    """The function `name` as README.md defines it (its code block run as it is shown)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if f"def {name}(" in block:
            namespace: dict = {}
            exec(compile(block, "README.md", "exec"), namespace)
            return namespace[name]
    raise AssertionError(f"README.md defines no {name}")


@pytest.fixture
def readme():
    """`readme("support_turn")`: a function of README.md, so the README's code is what runs."""
    return readme_function
