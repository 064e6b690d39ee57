"""Anthropic's Messages API over Chat Completions.

messages_request.py   the request's parameters, typed; what cannot be translated is refused here
blocks.py             messages and their content blocks -> chat messages
messages_to_chat.py   a parsed request -> a Chat Completions body (also for count_tokens)
message.py            a chat answer -> a Message; stop reasons and usage
messages_stream.py    chat chunks -> Anthropic's SSE events, one translator per message
anthropic_errors.py   costgate's errors in Anthropic's error shape
headers.py            x-api-key and anthropic-version
messages_native.py    upstreams that serve the Messages API themselves
models.py             GET /v1/models in Anthropic's shape
"""
