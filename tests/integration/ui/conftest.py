from tests.integration.stacks import shop_fixture

shop = shop_fixture("0.01", autouse=True)
"""The demo shop's files under the test's folder; words streamed 10 ms apart, so a stream has parts to drop."""
