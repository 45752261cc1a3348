"""The glue between the agent loop (agent.py) and the journal (durability/)."""
