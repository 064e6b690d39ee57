"""The request side of other APIs than Chat Completions: what their routes hand the pipeline.

    chat_stream.py    the pipeline's chat stream, read back event by event
    responses_api.py  OpenAI's Responses API: the body reader and the answer shape
    messages_api.py   Anthropic's Messages API: the body reader and the answer shape

A route authenticates the key, then hands the pipeline the context (its `api` names the
client's API), a body reader that parses the client's body and translates it to Chat
Completions (gateway/apis) — read inside the pipeline, so a body that cannot be translated is
refused, and recorded, like any other refusal — and the shape (`gateway.pipeline.AnswerShape`)
that turns the pipeline's answer, stream or refusal back into the client's API. When a
deployment speaks that API itself (config `apis`), the route target sends it the client's own
body (`ctx.native`) and the answer passes the shape untranslated.
"""
