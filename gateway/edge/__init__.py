"""The HTTP edge around the pipeline: uvicorn's protocol with a header deadline, the guard that
refuses unauthenticated and oversized requests before any body is read, request ids, the access log."""
