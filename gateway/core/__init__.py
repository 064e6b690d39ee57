"""The gateway's vocabulary, which every other gateway module speaks: the request context,
the error tree, request shapes and fields, where text sits in a body, token counts, server-sent events."""
