"""Calling an upstream for a request: deployments, the worst case a call can cost, the charged
call itself (whole, streamed, native), its trace spans, prompt-cache markers, and the streams in flight."""
