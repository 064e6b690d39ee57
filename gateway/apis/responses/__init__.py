"""OpenAI's Responses API over Chat Completions.

request.py   the request's parameters, typed; what cannot be translated is refused here
items.py     input items (messages, function calls and their outputs) -> chat messages
to_chat.py   a parsed request (and an earlier conversation) -> a Chat Completions body
output.py    a chat answer -> a Response object (and the envelope the stream shares)
stream.py    chat chunks -> the typed stream events, one translator per response
store.py     what a stored response keeps, and the conversation a chain of them makes
native.py    upstreams that serve the Responses API themselves
"""
