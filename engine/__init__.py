"""The local engine: vLLM launch and health, INT8 checkpoints, KV-cache and speculative settings,
priority admission across replicas, local cost model. Bookkeeping modules import no torch."""
