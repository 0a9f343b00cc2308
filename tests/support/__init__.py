"""What the tests share: services, fixtures, scenario builders and harnesses (loaded via pytest_plugins)."""
