"""Background tool calls: run on a Celery worker, followed and settled from any web process.

One concept per module (import them by name; this package re-exports nothing):

- ``calls``: the ``BackgroundCall`` row, shared by both sides: create, claim, read, settle,
  cancel, answers, reap; the result as stored and read back (``call_result``).
- ``web``: start a call, follow it onto the client's request (frames, questions), cancel a
  request's call, the answer of a request whose follower died.
- ``worker``: the Celery task's body: claim, run the tool as the handler would, heartbeat,
  control messages, waiting for a task's input, write the outcome.
- ``embedded``: the development worker inside the web process (no broker configured).
- ``groups``: reading the call's channel-layer groups through a Redis outage.

Imports point one way: ``web`` and ``worker`` use ``calls``, ``groups`` and ``embedded`` and
never each other; nothing here imports ``mcp_app.tasks`` (the web side enqueues by task name).
"""
