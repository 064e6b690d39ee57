"""Other APIs than Chat Completions, translated to and from it: pure functions and stream
translators, no I/O. The pipeline works on Chat Completions bodies; a route for another API
turns its request into one (`*.to_chat`), and the chat answer back into its own shape
(`*.output` / `*.message` whole, `*.stream` event by event).

    chat.py        typed reading of a chat answer and of its stream chunks (both APIs use it)
    parsing.py     a client's JSON into pydantic models, errors naming the parameter
    responses/     OpenAI's Responses API (POST /v1/responses, GET/DELETE /v1/responses/{id})
    anthropic/     Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)

Each API also has a `native` module for upstreams that speak it themselves: what to rewrite in
the request and where the usage is, for pricing. The stream translators return events as
dicts; gateway/core/sse.py's `typed_event` writes each with its `event:` line.
"""
