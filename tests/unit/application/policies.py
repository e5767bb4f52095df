"""The tool policies the use-case tests give their calls, one name per policy.

Each is the policy of `ToolPolicy`'s own defaults for its effect unless its name says otherwise:
a non-idempotent write and an unclassified call ask for approval by default, reads and idempotent
writes do not.
"""

from dex_agents.domain.tools import ToolEffect, ToolPolicy

READ = ToolPolicy(ToolEffect.READ)
IDEMPOTENT = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)
NON_IDEMPOTENT = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
"""A non-idempotent write: approval first, then one single-attempt Step."""
NON_IDEMPOTENT_NO_APPROVAL = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
NEEDS_APPROVAL = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
"""An idempotent write that asks for approval."""
UNCLASSIFIED = ToolPolicy(ToolEffect.UNCLASSIFIED)
"""An unclassified call: approval first, then one single-attempt Step."""
