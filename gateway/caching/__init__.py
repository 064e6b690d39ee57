"""The response cache the cache stages share, and the shipped sentence model it reads vectors with."""
