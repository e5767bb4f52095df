"""The example chat page (``examples/chat``, no build step) in headless Chromium, served with the chat backend.

The page loads the pinned ``ai`` package straight from ``node_modules``,
sends a message, survives a reload while the turn waits for its approval
(hydrated from ``…/messages``, the waiting turn resumed), and is approved from
the page.
"""

from pathlib import Path

import pytest
from playwright.async_api import expect

from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import read_refunds
from tests.integration.console.support import chromium, screenshot
from tests.integration.ui.support import AI_MODULE, chat_stack

pytestmark = pytest.mark.integration

WAIT_MS = 60_000


async def test_the_example_page_chats_survives_a_reload_and_approves_a_refund(tmp_path: Path, shop: Path) -> None:
    assert AI_MODULE.exists(), "run `make node-deps`: the page loads the pinned ai package from node_modules"
    async with chat_stack(build_order_flow()) as stack, chromium(tmp_path) as browser:
        page = await browser.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        await page.goto(stack.url + "/#chat-page")
        await page.fill("#send input", "Refund order 7 and tell the customer.")
        await page.click("#send button")
        refund = page.locator(".tool[data-tool=refund_order]")
        await expect(refund.locator("button.approve")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("li.assistant")).to_contain_text("Refunding it needs your approval")

        await page.reload()  # hydrated from …/messages, the waiting turn streamed in again
        await expect(page.locator("li.user")).to_have_text("Refund order 7 and tell the customer.", timeout=WAIT_MS)
        await expect(refund.locator("button.approve")).to_be_visible(timeout=WAIT_MS)
        assert await page.locator(".tool[data-tool=find_order]").count() == 1
        await screenshot(page, "chat-1-waiting-for-approval")

        await refund.locator("button.approve").click()
        await expect(page.locator("li.assistant")).to_contain_text("Done: order 7 is refunded", timeout=WAIT_MS)
        await expect(page.locator("#status")).to_have_text("ready")
        await expect(page.locator(".tool[data-tool=email_customer].output-available")).to_have_count(1)
        await screenshot(page, "chat-2-done")
        assert problems == []
    assert len(read_refunds(shop)) == 1
