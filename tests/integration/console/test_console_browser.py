"""The web console in a real browser: headless Chromium (Debian's package) driven through Playwright.

Each case runs the dev server, a Worker and the console in the test's event loop,
and looks at the pages as a person would. Screenshots go to
``tmp/console-screenshots`` (``$DEX_AGENTS_TEST_ARTIFACTS``).
"""

from pathlib import Path

import pytest
from playwright.async_api import expect

from dex_agents.cli.demo import PROMPT
from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import read_refunds
from dex_agents.console.security import ConsoleSecurity
from tests.integration.console.page_agent import FINAL, HOSTILE, SUPERSEDED, build_page_flow, build_retried_flow
from tests.integration.console.support import chromium, console_stack, raw_request, screenshot

pytestmark = pytest.mark.integration


WAIT_MS = 60_000
"""How long a page may take to show what the session did (generous: CI machines are shared)."""

TOKEN = "browser-test-token-0123456789abcdef"
"""A token long enough for a console bound beyond loopback."""


async def test_a_demo_session_streams_and_its_refund_is_approved_from_the_page(tmp_path: Path, shop: Path) -> None:
    async with (
        console_stack(build_order_flow(), tmp_path, suggested_message=PROMPT) as stack,
        chromium(tmp_path) as browser,
    ):
        page = await browser.new_page()
        await page.goto(stack.url + "/")
        await expect(page.locator("#sessions")).to_contain_text("No sessions yet")
        await page.fill("#start input[name=session_id]", "order-session-7")
        await expect(page.locator("#start textarea")).to_have_value(PROMPT)
        await page.click("#start button[type=submit]")
        await page.wait_for_url("**/sessions/order-session-7?notice=started", timeout=WAIT_MS)

        # The model's words arrive live, then the refund waits for approval.
        await expect(page.locator("#live .text").first).to_contain_text("Let me look up order 7", timeout=WAIT_MS)
        approval = page.locator("#pending .approval")
        await expect(approval).to_contain_text("refund_order", timeout=WAIT_MS)
        await expect(page.locator("#live")).to_contain_text("Refunding it needs your approval")
        await expect(page.locator("#status")).to_have_text("running tools")
        await screenshot(page, "1-session-waiting-for-approval")

        await approval.locator("button[value=approve]").click()
        await page.wait_for_url("**/sessions/order-session-7?notice=approved", timeout=WAIT_MS)
        await expect(page.locator("#notice")).to_have_text("Approved.")
        # The refund ran, the turn ended, and the state panel shows it without a reload.
        await expect(page.locator("#transcript")).to_contain_text("Done: order 7 is refunded", timeout=WAIT_MS)
        refund = page.locator("#transcript li.outcome", has_text="refund_order")
        await expect(refund).to_contain_text("succeeded")
        await expect(refund).to_contain_text("approval approved by web console")
        await expect(page.locator("#status")).to_have_text("waiting for user message", timeout=WAIT_MS)
        await expect(page.locator("#usage")).not_to_have_text("0 model calls, 0 input tokens, 0 output tokens")
        await expect(page.locator("#pending .approval")).to_have_count(0)
        log = await page.evaluate("window.dexConsole.log")
        finished = [(u["type"], u["tool"], u["status"]) for u in log if u["kind"] == "tool"]
        assert ("tool_call_finished", "refund_order", "succeeded") in finished
        assert await page.evaluate("window.dexConsole.duplicates()") == 0
        await screenshot(page, "2-session-after-approval")

        await page.goto(stack.url + "/")
        row = page.locator("#sessions tr[data-session=order-session-7]")
        await expect(row).to_contain_text("waiting for user message")
        await expect(row.locator("td").nth(2)).to_have_text("1")
        await expect(row.locator("td").nth(3)).to_have_text("0")
        await screenshot(page, "3-sessions")
    assert len(read_refunds(shop)) == 1


async def test_an_approval_is_rejected_with_a_reason_from_the_approvals_page(tmp_path: Path, shop: Path) -> None:
    async with console_stack(build_order_flow(), tmp_path) as stack, chromium(tmp_path) as browser:
        page = await browser.new_page()
        await page.goto(stack.url + "/approvals")
        await expect(page.locator("#approvals")).to_contain_text("Nothing waits for approval.")
        await stack.sessions.start_session("order-session-8", "Refund order 8 please.")
        # The open page shows the new approval by itself.
        approval = page.locator("#approvals .approval")
        await expect(approval).to_contain_text("refund_order", timeout=WAIT_MS)
        await expect(approval).to_contain_text('"order_id": "8"')
        await approval.locator("input[name=reason]").fill("The customer kept the jacket.")
        await screenshot(page, "4-approvals")
        await approval.locator("input[name=reason]").press("Enter")  # Enter in the reason rejects
        await page.wait_for_url("**/approvals?notice=rejected", timeout=WAIT_MS)
        await expect(page.locator("#approvals")).to_contain_text("Nothing waits for approval.")

        await page.goto(stack.url + "/sessions/order-session-8")
        await expect(page.locator("#transcript")).to_contain_text("I did not refund order 8", timeout=WAIT_MS)
        refund = page.locator("#transcript li.outcome", has_text="refund_order")
        await expect(refund).to_contain_text("reason: The customer kept the jacket.")
        await expect(refund).to_contain_text("approval rejected by web console")
    assert read_refunds(shop) == []


async def test_html_in_a_tool_output_is_shown_as_text_and_the_waiting_turn_is_cancelled_from_the_page(
    tmp_path: Path,
) -> None:
    async with console_stack(build_page_flow(), tmp_path) as stack, chromium(tmp_path) as browser:
        page = await browser.new_page()
        await stack.sessions.start_session("page-1")
        await page.goto(stack.url + "/sessions/page-1")
        await expect(page.locator("#live-state")).to_have_text("live", timeout=WAIT_MS)
        await page.fill("#send textarea", "Fetch the page <b>now</b>")
        await page.click("#send button[type=submit]")
        await page.wait_for_url("**/sessions/page-1?notice=sent", timeout=WAIT_MS)
        # The turn waits for approval of `publish`, with the fetched output in its tool calls and in the live text.
        await expect(page.locator("#pending .approval")).to_contain_text("publish", timeout=WAIT_MS)
        fetched = page.locator("#tool-calls tr", has_text="fetch_page")
        await expect(fetched).to_contain_text(HOSTILE)
        await expect(fetched).to_contain_text("succeeded")
        await expect(page.locator("#live")).to_contain_text("The page says: " + HOSTILE)
        await expect(page.locator("#pending .approval pre")).to_contain_text("<script>")
        await expect(page.locator("#transcript")).to_contain_text("Fetch the page <b>now</b>")
        assert await page.locator("main script, main img").count() == 0
        assert await page.locator("main b", has_text="now").count() == 0
        assert await page.evaluate("window.__pwned === undefined")
        await screenshot(page, "5-escaped-tool-output")

        # The turn waiting for approval is cancelled from the page, with a reason; a second open page sees it live.
        watcher = await browser.new_page()
        await watcher.goto(stack.url + "/sessions/page-1")
        await expect(watcher.locator("#live-state")).to_have_text("live", timeout=WAIT_MS)
        await page.fill("#cancel input[name=reason]", "Not <i>today</i>.")
        await page.click("#cancel button[type=submit]")
        await page.wait_for_url("**/sessions/page-1?notice=cancel-requested", timeout=WAIT_MS)
        await expect(watcher.locator("#live .cancelled")).to_have_text(
            "turn-1 cancelled by a person: Not <i>today</i>.; 2 tool calls of it had ended", timeout=WAIT_MS
        )
        await expect(watcher.locator("#last-cancelled")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("#status")).to_have_text("waiting for user message", timeout=WAIT_MS)
        await expect(page.locator("#last-cancelled")).to_be_visible()
        await expect(page.locator("#pending .approval")).to_have_count(0)
        await expect(page.locator("#cancel")).to_have_count(0)
        publish = page.locator("#transcript li.outcome", has_text="publish")
        await expect(publish).to_contain_text("the user cancelled the turn. Reason: Not <i>today</i>.")
        assert await page.locator("main i").count() == 0
        await screenshot(page, "7-turn-cancelled")


async def test_a_retried_model_call_replaces_the_text_of_the_attempt_it_supersedes(tmp_path: Path) -> None:
    async with console_stack(build_retried_flow(), tmp_path) as stack, chromium(tmp_path) as browser:
        page = await browser.new_page()
        await page.goto(stack.url + "/")
        await stack.sessions.start_session("retry-1")  # through a client that records it in the index
        # The open Sessions page lists it by itself.
        await expect(page.locator("#sessions tr[data-session=retry-1]")).to_contain_text("waiting", timeout=WAIT_MS)
        await page.goto(stack.url + "/sessions/retry-1")
        await expect(page.locator("#live-state")).to_have_text("live", timeout=WAIT_MS)
        await stack.sessions.send_user_message("retry-1", "Write it.")
        # The first attempt's text shows, then the retry of the same Step execution replaces it.
        await expect(page.locator("#pending .approval")).to_contain_text("publish", timeout=WAIT_MS)
        block = page.locator("#live .text")
        await expect(block).to_have_count(1)
        await expect(block).to_have_text(FINAL)
        await expect(block).to_have_attribute("data-attempt", "2")
        attempts = {u["attempt"] for u in await page.evaluate("window.dexConsole.log") if u["kind"] == "text"}
        assert attempts == {1, 2}  # both attempts' deltas arrived; only the second one's text is shown
        assert SUPERSEDED not in await page.locator("#live").inner_text()


async def test_a_console_configured_for_a_public_bind_refuses_requests_without_its_token(tmp_path: Path) -> None:
    # The socket is loopback (tests bind nothing else); the rules are those of `--host 0.0.0.0 --token ...`.
    security = ConsoleSecurity.for_bind("0.0.0.0", token=TOKEN)
    async with console_stack(build_order_flow(), tmp_path, security=security) as stack, chromium(tmp_path) as browser:
        page = await browser.new_page()
        refused = await page.goto(stack.url + "/")
        assert refused is not None
        assert refused.status == 401
        await expect(page.locator("body")).to_contain_text("needs its token")
        wrong = await page.goto(stack.url + "/?token=guess")
        assert wrong is not None
        assert wrong.status == 401
        await screenshot(page, "6-refused-without-token")

        opened = await page.goto(stack.url + "/?token=" + TOKEN)
        assert opened is not None
        assert opened.status == 200
        assert "token" not in page.url  # the token moved into an HttpOnly cookie
        await expect(page.locator("h1")).to_have_text("Sessions")
        await page.click("#start button[type=submit]")  # the cookie carries the token on the POST too
        await expect(page.locator("#notice")).to_have_text("The session started.")

        assert (await raw_request(stack.url, "GET", "/approvals")).status == 401
        assert (await raw_request(stack.url, "GET", "/sessions/x/events")).status == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert (await raw_request(stack.url, "GET", "/approvals", headers=bearer)).status == 200
