from tests.integration.stacks import shop_fixture

shop = shop_fixture("0.02", autouse=True)
"""The demo shop's files under the test's folder; words streamed 20 ms apart, so streaming is visible."""
