"""The Batch API's lane: JSONL in (`input`), each line through the gateway's pipeline in the
batch priority class at the configured discount (`runner`), an output and an error file out."""
