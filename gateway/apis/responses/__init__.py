"""OpenAI's Responses API over Chat Completions.

responses_request.py   the request's parameters, typed; what cannot be translated is refused here
items.py               input items (messages, function calls and their outputs) -> chat messages
responses_to_chat.py   a parsed request (and an earlier conversation) -> a Chat Completions body
output.py              a chat answer -> a Response object (and the envelope the stream shares)
responses_stream.py    chat chunks -> the typed stream events, one translator per response
response_chain.py      what a stored response keeps, and the conversation a chain of them makes
responses_native.py    upstreams that serve the Responses API themselves
"""
