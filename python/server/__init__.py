"""The server: everything that speaks HTTP, and the state one server process shares.

python/api's endpoints build on ``api.ApiHandler``; ``app.build_app`` assembles the
Starlette app (run_ui.py is its entry point); ``errors`` is the one table that turns
every error into a response; ``runtime.Runtime`` holds the settings, the login and the
process's chats. Nothing below (python/durable, python/tools, python/helpers, agent.py,
durability/) imports this package (tests/unit/test_architecture.py).
"""
