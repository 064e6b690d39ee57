"""The gateway's configuration: the YAML file and its sections."""
