"""The policies of the tools the runner-conformance scenarios call (`tests.integration.runner_conformance`).

Every adapter's test agent defines these tools in its own framework, with the same results
(``find_order`` answers ``order <id> delivered``, ``read_tool`` ``read done``, ...), and declares
these policies for them, adding its own tools' policies. ``unclassified_write`` has none: the
default effect (unclassified, with approval) is what the scenarios call it for. Imported by the
test agents' Worker children too, so it imports no pytest.
"""

from dex_agents import ToolEffect, ToolPolicy

SCENARIO_TOOL_POLICIES = {
    "find_order": ToolPolicy(ToolEffect.READ),
    "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    "email_customer": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
    "read_tool": ToolPolicy(ToolEffect.READ),
    "idempotent_write": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
    "write": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
}
