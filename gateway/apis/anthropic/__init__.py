"""Anthropic's Messages API over Chat Completions.

request.py   the request's parameters, typed; what cannot be translated is refused here
blocks.py    messages and their content blocks -> chat messages
to_chat.py   a parsed request -> a Chat Completions body (also for count_tokens)
message.py   a chat answer -> a Message; stop reasons and usage
stream.py    chat chunks -> Anthropic's SSE events, one translator per message
errors.py    costgate's errors in Anthropic's error shape
headers.py   x-api-key and anthropic-version
native.py    upstreams that serve the Messages API themselves
"""
